package slots

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

func TestOwedCutsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	d := dd(dir)
	if cuts, err := d.OwedCuts(3); err != nil || cuts != nil {
		t.Fatalf("no file: %v, %v", cuts, err)
	}
	want := []OwedCut{{Epoch: 4, Obj: 9, Version: 2, Dims: []uint64{8, 40}}, {Epoch: 5, Obj: 1, Version: 7, Dims: []uint64{1 << 40}}}
	if err := d.SetOwedCuts(3, want); err != nil {
		t.Fatal(err)
	}
	if got, err := d.OwedCuts(3); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read %+v, %v; want %+v", got, err, want)
	}
	// Another slot's file under this one's name is not taken for it.
	b, _ := os.ReadFile(d.Owed(3))
	if err := os.WriteFile(d.Owed(4), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.OwedCuts(4); !errors.Is(err, pdc.ErrCorrupt) {
		t.Fatalf("slot 3's cuts read as slot 4's: %v", err)
	}
	b[len(b)-9] ^= 1
	if err := os.WriteFile(d.Owed(3), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.OwedCuts(3); !errors.Is(err, pdc.ErrCorrupt) {
		t.Fatalf("a flipped bit read: %v", err)
	}
	if err := d.SetOwedCuts(3, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Owed(3)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no cuts left, the file stays: %v", err)
	}
}

// Due keeps the cuts a copy has not had, each object's in version order:
// set dims 8, then 26 (no cut), then 20 drops rows 8-19 only if the cut
// to 8 goes first.
func TestDue(t *testing.T) {
	owed := []OwedCut{
		{Epoch: 6, Obj: 2, Version: 5, Dims: []uint64{20}},
		{Epoch: 3, Obj: 2, Version: 1, Dims: []uint64{4}}, // the copy of generation 3 had it
		{Epoch: 5, Obj: 2, Version: 3, Dims: []uint64{8}},
		{Epoch: 5, Obj: 1, Version: 9, Dims: []uint64{1}},
		{Epoch: 6, Obj: 2, Version: 3, Dims: []uint64{8}}, // pushed again
	}
	got := Due(owed, 3)
	want := []OwedCut{owed[3], owed[2], owed[0]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("due for a copy of generation 3:\n%+v\nwant\n%+v", got, want)
	}
	if got := Due(owed, 6); len(got) != 0 {
		t.Fatalf("due for a copy held at the last epoch they were owed at: %+v", got)
	}
}

func TestLedger(t *testing.T) {
	dir := t.TempDir()
	d := dd(dir)
	l, err := NewLedger(d, 7, []int{2, 5})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Owes(2) || l.Owes(1) {
		t.Fatal("owes the wrong slots")
	}
	cut := func(obj, v uint64, dims ...uint64) wire.DimsCut {
		return wire.DimsCut{Obj: obj, DimsVersion: v, Dims: dims}
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := l.Owe([]int{2, 5}, cut(uint64(i), 2, 8, 8)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Pushed again (its acknowledgment lost): kept once.
	if err := l.Owe([]int{2}, cut(3, 2, 8, 8)); err != nil {
		t.Fatal(err)
	}
	if err := l.Owe([]int{1}, cut(3, 3, 4, 8)); !errors.Is(err, pdc.ErrInternal) {
		t.Fatalf("a cut for a slot not kept here: %v", err)
	}
	for _, s := range []int{2, 5} {
		cuts, err := d.OwedCuts(s)
		if err != nil || len(cuts) != 8 || l.Count(s) != 8 {
			t.Fatalf("slot %d: %d cuts kept, count %d, %v", s, len(cuts), l.Count(s), err)
		}
		for _, c := range cuts {
			if c.Epoch != 7 || c.Version != 2 || !reflect.DeepEqual(c.Dims, []uint64{8, 8}) {
				t.Fatalf("slot %d: kept %+v", s, c)
			}
		}
	}
	// A new ledger counts what is kept.
	if l, err := NewLedger(d, 8, []int{2}); err != nil || l.Count(2) != 8 {
		t.Fatalf("reopened: %d, %v", l.Count(2), err)
	}
	// Up to MaxOwed a slot; the next fails, and is not acknowledged.
	full := make([]OwedCut, MaxOwed)
	for i := range full {
		full[i] = OwedCut{Epoch: 1, Obj: 100, Version: uint64(i + 1), Dims: []uint64{1}}
	}
	if err := d.SetOwedCuts(5, full); err != nil {
		t.Fatal(err)
	}
	if err := l.Owe([]int{5}, cut(101, 1, 1)); !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "data slot 5") {
		t.Fatalf("a cut over the bound: %v", err)
	}
	// A file that cannot be read keeps none for its slot.
	if err := os.WriteFile(d.Owed(2), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := NewLedger(d, 8, []int{2, 5}); !errors.Is(err, pdc.ErrCorrupt) || l.Owes(2) || !l.Owes(5) {
		t.Fatalf("with slot 2's file unreadable: owes 2 %v, 5 %v, %v", l.Owes(2), l.Owes(5), err)
	}
}

func TestScanReportsOwedCuts(t *testing.T) {
	dir := t.TempDir()
	d := dd(dir)
	if err := d.SetOwedCuts(3, []OwedCut{{Epoch: 4, Obj: 1, Version: 2, Dims: []uint64{1}}, {Epoch: 6, Obj: 1, Version: 3, Dims: []uint64{1}}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.Owed(5), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "data-9.cuts"), 0o700); err != nil { // not a file of ours
		t.Fatal(err)
	}
	inv, _, err := d.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Owed) != 2 || inv.Owed[0] != (wire.OwedFile{Slot: 3, Newest: 6, Cuts: 2}) || inv.Owed[1].Slot != 5 || inv.Owed[1].Bad == "" {
		t.Fatalf("owed files reported: %+v", inv.Owed)
	}
	if len(inv.Copies) != 0 {
		t.Fatalf("copies: %+v", inv.Copies)
	}
}

// owedAt adds to srv the file of cuts owed to slot in the data dir of
// rank: cuts many, the newest of epoch newest.
func owedAt(srv []Server, rank, slot int, newest uint64, cuts uint64) {
	srv[rank].Inventory.Owed = append(srv[rank].Inventory.Owed, wire.OwedFile{Slot: uint32(slot), Newest: newest, Cuts: cuts})
}

func TestPlanMissingSlotKeepsItsCutsAtItsHolder(t *testing.T) {
	// Node b is not started: slot 3 is missing at rank 1, which keeps
	// the cuts owed to it in its data dir (a).
	srv := servers([]string{"a", "a"}, map[string]map[int]uint64{"a": {0: 3, 1: 3}})
	plans, next := Plan(srv, Table{Epoch: 3, Gens: map[int]uint64{0: 3, 1: 3, 2: 3, 3: 3}})
	if m := plans[1].Missing; len(m) != 1 || m[0].Slot != 3 || m[0].Owe != "a" {
		t.Fatalf("rank 1 missing %+v", m)
	}
	if !reflect.DeepEqual(next.Owed, map[int][]DirSeen{2: {{ID: "a"}}, 3: {{ID: "a"}}}) {
		t.Fatalf("next table owed %+v", next.Owed)
	}
	// Held after a restart of rank 0 says the same.
	if m := Held(srv, next)[1].Missing; len(m) != 1 || m[0].Owe != "a" {
		t.Fatalf("held: rank 1 missing %+v", m)
	}
	// Node b back (ranks 2, 3): slot 3 is held there, and its cuts, under
	// node a's data dir, are sent to it at RoundMoved; a's file goes once
	// the start is done.
	srv = servers([]string{"a", "a", "b", "b"}, map[string]map[int]uint64{"a": {0: 4, 1: 4}, "b": {2: 3, 3: 3}})
	owedAt(srv, 0, 3, 4, 2)
	plans, next = Plan(srv, next)
	if !reflect.DeepEqual(plans[3].Hold, []wire.SlotCopy{cp(3, 3)}) || len(plans[3].Missing) != 0 {
		t.Fatalf("rank 3 %+v", plans[3])
	}
	if !reflect.DeepEqual(plans[0].ShipOwed, []uint64{3}) || !reflect.DeepEqual(plans[0].DropOwed, []uint64{3}) || len(plans[1].ShipOwed) != 0 {
		t.Fatalf("rank 0 ships %v, drops %v; rank 1 ships %v", plans[0].ShipOwed, plans[0].DropOwed, plans[1].ShipOwed)
	}
	if !reflect.DeepEqual(plans[2].Hold, []wire.SlotCopy{cp(2, 3)}) || next.Gens[3] != 5 || len(next.Owed) != 0 {
		t.Fatalf("slot 2 held %+v, next %+v", plans[2].Hold, next)
	}
	// Slot 3's holder on node a, which keeps its cuts: held, and applied
	// there.
	srv = servers([]string{"a", "a", "a", "a"}, map[string]map[int]uint64{"a": {0: 4, 1: 4}, "b": {}})
	srv = append(srv, Server{Rank: 4, Data: true, Inventory: wire.SlotInventory{DirID: "b", Copies: []wire.SlotCopy{cp(2, 3), cp(3, 3)}}})
	owedAt(srv, 0, 3, 4, 2)
	owedAt(srv, 0, 2, 4, 2)
	plans, next = Plan(srv, Table{Epoch: 4, Gens: map[int]uint64{0: 4, 1: 4, 2: 3, 3: 3}, Owed: map[int][]DirSeen{2: {{ID: "a"}}, 3: {{ID: "a"}}}})
	if !reflect.DeepEqual(plans[3].Receive, []wire.SlotCopy{cp(3, 3)}) || !reflect.DeepEqual(plans[2].Receive, []wire.SlotCopy{cp(2, 3)}) {
		t.Fatalf("rank 2 %+v, rank 3 %+v", plans[2], plans[3])
	}
	if len(next.Owed) != 0 {
		t.Fatalf("next table owed %+v", next.Owed)
	}
}

// A start moves at most MaxShipped owed cuts from or to a server: a slot
// whose cuts would go over waits for the next start, which moves them.
func TestPlanShipsBoundedCuts(t *testing.T) {
	srv := servers([]string{"a", "b"}, map[string]map[int]uint64{"a": {0: 4}, "b": {1: 3, 3: 3, 5: 3}})
	for _, s := range []int{1, 3, 5} {
		owedAt(srv, 0, s, 4, MaxShipped/3+1)
	}
	table := Table{Epoch: 4, Gens: map[int]uint64{0: 4, 1: 3, 3: 3, 5: 3}}
	plans, next := Plan(srv, table)
	if !reflect.DeepEqual(plans[0].ShipOwed, []uint64{1, 3}) || !reflect.DeepEqual(plans[0].DropOwed, []uint64{1, 3}) {
		t.Fatalf("rank 0 ships %v, drops %v", plans[0].ShipOwed, plans[0].DropOwed)
	}
	if m := plans[1].Missing; len(m) != 1 || m[0].Slot != 5 || !strings.Contains(m[0].Why, "the next start moves them") {
		t.Fatalf("rank 1 missing %+v", m)
	}
	// The next start: slots 1 and 3 held, their files gone.
	srv = servers([]string{"a", "b"}, map[string]map[int]uint64{"a": {0: 5}, "b": {1: 5, 3: 5, 5: 3}})
	owedAt(srv, 0, 5, 4, MaxShipped/3+1)
	if plans, _ := Plan(srv, next); !reflect.DeepEqual(plans[0].ShipOwed, []uint64{5}) || len(plans[1].Missing) != 0 {
		t.Fatalf("next start: rank 0 ships %v, rank 1 missing %+v", plans[0].ShipOwed, plans[1].Missing)
	}
}

func TestPlanSlotWaitsForTheDataDirOfItsCuts(t *testing.T) {
	// The table says cuts owed to slot 1 may be kept under data dir c,
	// which no server of this start sees: slot 1's copy on a is not held.
	srv := servers([]string{"a", "a"}, map[string]map[int]uint64{"a": {0: 5, 1: 3}})
	table := Table{Epoch: 5, Gens: map[int]uint64{0: 5, 1: 3}, Owed: map[int][]DirSeen{1: {{ID: "c", Host: "nodec", Path: "/d/c"}}}}
	plans, next := Plan(srv, table)
	m := plans[1].Missing
	if len(m) != 1 || m[0].Slot != 1 || !strings.Contains(m[0].Why, "data dir /d/c on host nodec, which no server of this cluster sees") {
		t.Fatalf("rank 1 missing %+v", m)
	}
	// Still expected: c, and the holder's dir, where cuts go now.
	if !reflect.DeepEqual(next.Owed[1], []DirSeen{{ID: "a"}, {ID: "c", Host: "nodec", Path: "/d/c"}}) || next.Gens[1] != 3 {
		t.Fatalf("next table %+v", next)
	}
	// Stale cuts (the copy is newer than them) and an unreadable file.
	srv = servers([]string{"a", "b"}, map[string]map[int]uint64{"a": {0: 5}, "b": {1: 5}})
	owedAt(srv, 0, 1, 4, 1)
	if plans, _ := Plan(srv, Table{Epoch: 5, Gens: map[int]uint64{0: 5, 1: 5}}); len(plans[1].Missing) != 0 ||
		len(plans[0].ShipOwed) != 0 || !reflect.DeepEqual(plans[0].DropOwed, []uint64{1}) {
		t.Fatalf("stale cuts: rank 1 missing %+v, rank 0 ships %v, drops %v", plans[1].Missing, plans[0].ShipOwed, plans[0].DropOwed)
	}
	srv[0].Inventory.Owed[0].Bad = "crc mismatch"
	plans, _ = Plan(srv, Table{Epoch: 5, Gens: map[int]uint64{0: 5, 1: 5}})
	if m := plans[1].Missing; len(m) != 1 || !strings.Contains(m[0].Why, "cannot be read (crc mismatch)") {
		t.Fatalf("an unreadable file of cuts: missing %+v", m)
	}
}

// FuzzOwedCuts: decoding never panics, and what decodes encodes back to
// the same bytes.
func FuzzOwedCuts(f *testing.F) {
	f.Add(encodeOwed(3, nil))
	f.Add(encodeOwed(3, []OwedCut{{Epoch: 4, Obj: 9, Version: 2, Dims: []uint64{8, 40}}, {Epoch: 5, Obj: 1, Version: 7, Dims: []uint64{1}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		cuts, err := decodeOwed("data-3.cuts", 3, b)
		if err != nil {
			return
		}
		if got := encodeOwed(3, cuts); !bytes.Equal(got, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, cuts, got)
		}
	})
}

func TestOwedCutsOnTheWire(t *testing.T) {
	cuts := []OwedCut{{Epoch: 4, Obj: 9, Version: 2, Dims: []uint64{8, 40}}, {Epoch: 5, Obj: 1, Version: 7, Dims: []uint64{1}}}
	var m wire.OwedCuts
	w := WireCuts(3, cuts)
	if err := m.Unmarshal(w.Marshal(nil)); err != nil {
		t.Fatal(err)
	}
	got, err := FromWire(m)
	if err != nil || m.Slot != 3 || !reflect.DeepEqual(got, cuts) {
		t.Fatalf("slot %d: %+v, %v", m.Slot, got, err)
	}
	m.Cuts[1].Dims = nil
	if _, err := FromWire(m); !errors.Is(err, pdc.ErrProtocol) {
		t.Fatalf("a cut without dims: %v", err)
	}
}

// A slot told abandoned (--abandon-slot) that would be missing starts
// empty: its out-of-date copies are set aside, the cuts owed to it go. One
// held is not touched.
func TestPlanAbandonSlot(t *testing.T) {
	srv := servers([]string{"a", "a", "c"}, map[string]map[int]uint64{"a": {0: 4, 1: 4, 2: 3}})
	srv[2].Data = false
	srv[1].Inventory.AbandonSlots = []uint64{0, 2, 3}
	owedAt(srv, 0, 3, 5, 1)
	owedAt(srv, 2, 3, 5, 1)
	table := Table{Epoch: 5, Gens: map[int]uint64{0: 4, 1: 4, 2: 4, 3: 4}, Owed: map[int][]DirSeen{3: {{ID: "a"}, {ID: "c"}}}}
	plans, next := Plan(srv, table)
	want0 := &wire.SlotPlan{Epoch: 6, Own: 1, Hold: []wire.SlotCopy{cp(0, 4)}, Fresh: []uint64{2}, Aside: []wire.SlotCopy{cp(2, 3)}}
	want1 := &wire.SlotPlan{Epoch: 6, Own: 2, Hold: []wire.SlotCopy{cp(1, 4)}, Fresh: []uint64{3}}
	if !reflect.DeepEqual(plans[0], want0) || !reflect.DeepEqual(plans[1], want1) || !reflect.DeepEqual(plans[2].DropOwed, []uint64{3}) {
		t.Fatalf("plans\n%+v\n%+v\n%+v\nwant\n%+v\n%+v", plans[0], plans[1], plans[2], want0, want1)
	}
	if next.Gens[2] != 6 || next.Gens[3] != 6 || len(next.Owed) != 0 {
		t.Fatalf("next table %+v", next)
	}
	// Without the flag, both are missing, and the error says how to
	// abandon them.
	srv[1].Inventory.AbandonSlots = nil
	plans, _ = Plan(srv, table)
	for _, m := range append(plans[0].Missing, plans[1].Missing...) {
		if !strings.Contains(m.Why, fmt.Sprintf("--abandon-slot %d", m.Slot)) {
			t.Fatalf("slot %d missing: %s", m.Slot, m.Why)
		}
	}
}

// A start without data servers (every server metadata only) moves no
// slot and keeps the table; the data dirs that may keep cuts owed to a
// missing slot are part of it. Before, they were dropped: the next start
// with data servers held the slot, found on another node, without the
// cuts kept under a data dir it did not see, and a regrow read back the
// rows those shrinks dropped.
func TestPlanWithoutDataServersKeepsTheDirsOfOwedCuts(t *testing.T) {
	table := Table{Epoch: 5, Gens: map[int]uint64{0: 5, 1: 3}, Owed: map[int][]DirSeen{1: {{ID: "a", Host: "nodea", Path: "/d/a"}}}}
	srv := servers([]string{"a", "a"}, nil)
	srv[0].Data, srv[1].Data = false, false
	_, next := Plan(srv, table)
	if !reflect.DeepEqual(next.Owed, table.Owed) {
		t.Fatalf("a start without data servers: owed %+v, want %+v", next.Owed, table.Owed)
	}
	// Node b has slot 1's copy; node a, whose data dir keeps its cuts, is
	// not started: slot 1 stays missing.
	srv = servers([]string{"b", "b"}, map[string]map[int]uint64{"b": {0: 5, 1: 3}})
	plans, _ := Plan(srv, next)
	if m := plans[1].Missing; len(m) != 1 || m[0].Slot != 1 || !strings.Contains(m[0].Why, "data dir /d/a on host nodea") {
		t.Fatalf("slot 1 found on node b, its cuts on node a: rank 1 holds %+v, receives %+v, missing %+v", plans[1].Hold, plans[1].Receive, m)
	}
}
