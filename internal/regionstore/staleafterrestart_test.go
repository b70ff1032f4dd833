package regionstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// The newest dims version applied to an object is known only in memory
// (Store's object.version, and the data server's layouts): after a
// restart, a client still holding older, smaller dims cuts the object
// back, and the rows written under the newer dims, acknowledged, are gone.
func TestOlderDimsAfterReopenDoNotCut(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, false)
			grown := Layout{Dims: []uint64{4, 1024}, Elem: 1, Mode: mode, Version: 2}
			rows := region.Box{Off: []uint64{2, 0}, Size: []uint64{2, 1024}}
			data := bytes.Repeat([]byte{7}, 2*1024)
			if err := s.Write(1, grown, rows, data); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, dir, false)
			defer func() { _ = s.Close() }()
			old := Layout{Dims: []uint64{2, 1024}, Elem: 1, Mode: mode, Version: 1}
			err := s.Read(1, old, region.Box{Off: []uint64{0, 0}, Size: []uint64{1, 1024}}, make([]byte, 1024))
			if !errors.Is(err, pdc.ErrStale) {
				t.Errorf("read with dims of version 1 after version 2 was written, and a reopen: %v, want ErrStale", err)
			}
			got := make([]byte, len(data))
			if err := s.Read(1, grown, rows, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("rows 2-3, written under dims version 2, read %d... after a call with version 1", got[0])
			}
		})
	}
}

// The version survives a relayout (new trailing dims: a new file made by
// rename), a crash, and goes up through both slots in turn.
func TestDimsVersionKeptAcrossRelayoutAndCrash(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, false)
	l := Layout{Dims: []uint64{4, 8}, Elem: 1, Mode: ByOffset}
	for v := range uint64(5) {
		l.Version = v
		l.Dims = []uint64{4, 8 + v} // each version relayouts
		if err := s.Write(3, l, region.Box{Off: []uint64{0, 0}, Size: []uint64{1, 1}}, []byte{byte(v + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	crash(s)
	s = openStore(t, dir, false)
	defer func() { _ = s.Close() }()
	if v, err := s.Version(3); err != nil || v != 4 {
		t.Fatalf("version after a crash: %d, %v; want 4", v, err)
	}
	old := Layout{Dims: []uint64{4, 9}, Elem: 1, Mode: ByOffset, Version: 1}
	if err := s.Read(3, old, region.Box{Off: []uint64{0, 0}, Size: []uint64{1, 1}}, make([]byte, 1)); !errors.Is(err, pdc.ErrStale) {
		t.Fatalf("read with version 1's dims after version 4's: %v, want ErrStale", err)
	}
}

// A slot whose bytes are damaged (a write torn by power loss, say) is
// skipped: the other slot's version, the one before, still counts.
func TestDimsMarkTornSlot(t *testing.T) {
	hdr := make([]byte, 4096)
	m := decodeMark(markAt, hdr)
	if m.version != 0 || m.slot != -1 {
		t.Fatalf("zeroed slots (a file from before them) read as version %d slot %d", m.version, m.slot)
	}
	copy(hdr[markAt:], encodeMarkSlot(6))
	copy(hdr[markAt+markSlot:], encodeMarkSlot(7))
	if m := decodeMark(markAt, hdr); m.version != 7 || m.slot != 1 {
		t.Fatalf("slots 6 and 7 read as version %d slot %d", m.version, m.slot)
	}
	hdr[markAt+markSlot+5] ^= 0x40
	if m := decodeMark(markAt, hdr); m.version != 6 || m.slot != 0 {
		t.Fatalf("slot 1 damaged: version %d slot %d, want 6 in slot 0", m.version, m.slot)
	}
}

// Logs of version 2 have no header page and so no slots: they work as
// before, the version kept in memory only.
func TestDimsVersionOldLog(t *testing.T) {
	newRegVersion = 2
	defer func() { newRegVersion = regVersion }()
	dir := t.TempDir()
	s := openStore(t, dir, false)
	grown := Layout{Dims: []uint64{4, 16}, Elem: 1, Mode: ByRegion, Version: 2}
	rows := region.Box{Off: []uint64{2, 0}, Size: []uint64{2, 16}}
	if err := s.Write(1, grown, rows, bytes.Repeat([]byte{9}, 32)); err != nil {
		t.Fatal(err)
	}
	old := Layout{Dims: []uint64{2, 16}, Elem: 1, Mode: ByRegion, Version: 1}
	if err := s.Read(1, old, region.Box{Off: []uint64{0, 0}, Size: []uint64{1, 16}}, make([]byte, 16)); !errors.Is(err, pdc.ErrStale) {
		t.Fatalf("read with older dims, same process: %v, want ErrStale", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, false)
	defer func() { _ = s.Close() }()
	if v, err := s.Version(1); err != nil || v != 0 {
		t.Fatalf("version of a version-2 log after reopen: %d, %v; want 0 (not kept)", v, err)
	}
	got := make([]byte, 32)
	if err := s.Read(1, grown, rows, got); err != nil || !bytes.Equal(got, bytes.Repeat([]byte{9}, 32)) {
		t.Fatalf("read back: %v %v", got, err)
	}
}
