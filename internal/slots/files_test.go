package slots

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

func TestMarkerRoundTripAndLegacy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data-7")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A slot dir written before slots had markers: generation 0 of the
	// slot its name says.
	if s, g, err := dd(dir).Marker(dir); err != nil || s != 7 || g != 0 {
		t.Fatalf("legacy dir: slot %d gen %d, %v", s, g, err)
	}
	if err := dd(dir).SetMarker(dir, 7, 1<<40); err != nil {
		t.Fatal(err)
	}
	if s, g, err := dd(dir).Marker(dir); err != nil || s != 7 || g != 1<<40 {
		t.Fatalf("slot %d gen %d, %v", s, g, err)
	}
	// A flipped byte, a cut file and an unknown version are refused.
	path := filepath.Join(dir, markerFile)
	good, _ := os.ReadFile(path)
	for name, b := range map[string][]byte{
		"flipped": append(append([]byte{}, good[:18]...), append([]byte{good[18] ^ 1}, good[19:]...)...),
		"cut":     good[:len(good)-1],
		"version": append(append([]byte{}, good[:8]...), append([]byte{9}, good[9:]...)...),
	} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := dd(dir).Marker(dir)
		if !errors.Is(err, pdc.ErrCorrupt) && !errors.Is(err, pdc.ErrVersion) {
			t.Fatalf("%s marker read: %v", name, err)
		}
	}
}

// Gen reads a copy's generation as Scan does: 0 for a dir without a
// marker, a marker that cannot be read, or one of another slot.
func TestGenAsScanReadsIt(t *testing.T) {
	root := t.TempDir()
	d := dd(root)
	if err := os.Mkdir(d.Slot(3), 0o755); err != nil {
		t.Fatal(err)
	}
	if g := d.Gen(3); g != 0 {
		t.Fatalf("legacy dir: generation %d", g)
	}
	if err := d.SetMarker(d.Slot(3), 3, 9); err != nil {
		t.Fatal(err)
	}
	if g := d.Gen(3); g != 9 {
		t.Fatalf("generation %d, want 9", g)
	}
	if err := d.SetMarker(d.Slot(3), 4, 9); err != nil {
		t.Fatal(err)
	}
	if g := d.Gen(3); g != 0 {
		t.Fatalf("marker of another slot: generation %d", g)
	}
	if err := os.WriteFile(filepath.Join(d.Slot(3), markerFile), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if g := d.Gen(3); g != 0 {
		t.Fatalf("unreadable marker: generation %d", g)
	}
}

func TestTableRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if tb, err := dd(dir).Table(); err != nil || tb.Epoch != 0 || len(tb.Gens) != 0 {
		t.Fatalf("no table: %+v %v", tb, err)
	}
	want := Table{Epoch: 9, Gens: map[int]uint64{0: 9, 1: 9, 5: 3}, Owed: map[int][]DirSeen{}}
	if err := dd(dir).SetTable(want); err != nil {
		t.Fatal(err)
	}
	got, err := dd(dir).Table()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read %+v, %v; want %+v", got, err, want)
	}
	path := filepath.Join(dir, tableFile)
	// Without cuts owed, the table is of the version builds before them
	// read.
	if b, _ := os.ReadFile(path); binary.LittleEndian.Uint32(b[8:]) != 1 {
		t.Fatalf("a table without owed cuts written as version %d, want 1", binary.LittleEndian.Uint32(b[8:]))
	}
	want.Owed = map[int][]DirSeen{5: {{ID: "b", Host: "nodeb", Path: "/d/b"}, {ID: "c"}}, 7: {{ID: "a", Path: "/d/a"}}}
	if err := dd(dir).SetTable(want); err != nil {
		t.Fatal(err)
	}
	if got, err = dd(dir).Table(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read %+v, %v; want %+v", got, err, want)
	}
	b, _ := os.ReadFile(path)
	b[20] ^= 0x80
	_ = os.WriteFile(path, b, 0o644)
	if _, err := dd(dir).Table(); !errors.Is(err, pdc.ErrCorrupt) {
		t.Fatalf("corrupt table read: %v", err)
	}
}

func TestDirIDSharedByRacingServers(t *testing.T) {
	dir := t.TempDir()
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			id, err := dd(dir).ID()
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || len(id) != 32 {
			t.Fatalf("ids %q", ids)
		}
	}
	other, _ := dd(t.TempDir()).ID()
	if other == ids[0] {
		t.Fatal("two dirs with one id")
	}
}

func TestScanCleansUpAndReports(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	_ = dd(dir).SetMarker(mk("data-0"), 0, 4)
	mk("data-1") // legacy: no marker
	_ = os.WriteFile(filepath.Join(mk("data-2"), markerFile), []byte("junk"), 0o644)
	_ = dd(dir).SetMarker(mk("data-3"), 5, 4) // the marker of another slot
	partial := mk("data-4.incoming")
	sent := mk("data-5.sent")
	mk("data-6.aside-1-2")
	mk("data-007")
	mk("meta-2")
	mk("meta-x")
	// Object files: the highest id sequence number among the slots' is
	// reported; files set aside, and other names, do not count.
	for _, f := range []string{"data-0/0000000100000005.off", "data-1/00000002000000ff.reg", "data-3/0000000300000010.idx.tmp",
		"data-3/00000004fffffff0.junk", "data-6.aside-1-2/00000005fffffff0.off"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	inv, warns, err := dd(dir).Scan()
	if err != nil {
		t.Fatal(err)
	}
	want := []wire.SlotCopy{{Slot: 0, Gen: 4}, {Slot: 1}, {Slot: 2}, {Slot: 3}}
	if !reflect.DeepEqual(inv.Copies, want) || !reflect.DeepEqual(inv.MetaDirs, []uint64{2}) || len(inv.DirID) != 32 ||
		inv.MaxSeq != 0xff || inv.Path != dir {
		t.Fatalf("inventory %+v", inv)
	}
	if len(warns) != 2 {
		t.Fatalf("warnings %q, want two (slots 2 and 3)", warns)
	}
	for _, p := range []string{partial, sent} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left: %v", p, err)
		}
	}
}

func dd(path string) DataDir { return NewDataDir(nil, path) }

// FuzzMarker: decoding never panics, and what decodes encodes back to the
// same bytes.
func FuzzMarker(f *testing.F) {
	f.Add(encodeMarker(0, 0))
	f.Add(encodeMarker(7, 1<<40))
	f.Add([]byte("pdcslot\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		slot, gen, err := decodeMarker("SLOT", b)
		if err != nil {
			return
		}
		if got := encodeMarker(slot, gen); !bytes.Equal(got, b) {
			t.Fatalf("%x decodes to slot %d gen %d, which encodes to %x", b, slot, gen, got)
		}
	})
}

// FuzzTable: decoding never panics, and what decodes encodes back to the
// same bytes.
func FuzzTable(f *testing.F) {
	f.Add(encodeTable(Table{Gens: map[int]uint64{}}))
	f.Add(encodeTable(Table{Epoch: 9, Gens: map[int]uint64{0: 9, 1: 9, 5: 3}}))
	f.Add(encodeTable(Table{Epoch: 9, Gens: map[int]uint64{0: 9, 5: 3}, Owed: map[int][]DirSeen{5: {{ID: "a", Host: "h", Path: "/p"}, {ID: "b"}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		tb, err := decodeTable("data-slots", b)
		if err != nil {
			return
		}
		if got := encodeTable(tb); !bytes.Equal(got, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, tb, got)
		}
	})
}
