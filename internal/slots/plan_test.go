package slots

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// servers builds a cluster: dirs[i] is rank i's data dir id, copies what
// each dir holds (slot -> generation).
func servers(dirs []string, copies map[string]map[int]uint64) []Server {
	out := make([]Server, len(dirs))
	for i, d := range dirs {
		out[i] = Server{Rank: i, Data: true, Meta: true, Inventory: wire.SlotInventory{DirID: d}}
		for s, g := range copies[d] {
			out[i].Inventory.Copies = append(out[i].Inventory.Copies, wire.SlotCopy{Slot: uint32(s), Gen: g})
		}
	}
	return out
}

func cp(slot int, gen uint64) wire.SlotCopy { return wire.SlotCopy{Slot: uint32(slot), Gen: gen} }

func TestPlanSharedDirHoldsInPlace(t *testing.T) {
	// pdc up -n 4, then -n 2, one data dir: slots 2 and 3 are held in
	// place by ranks 0 and 1.
	srv := servers([]string{"D", "D"}, map[string]map[int]uint64{"D": {0: 1, 1: 1, 2: 1, 3: 1}})
	plans, next := Plan(srv, Table{Epoch: 1, Gens: map[int]uint64{0: 1, 1: 1, 2: 1, 3: 1}})
	want := map[int]*wire.SlotPlan{
		0: {Epoch: 2, Own: 1, Hold: []wire.SlotCopy{cp(0, 1), cp(2, 1)}},
		1: {Epoch: 2, Own: 2, Hold: []wire.SlotCopy{cp(1, 1), cp(3, 1)}},
	}
	if !reflect.DeepEqual(plans, want) {
		t.Fatalf("plans\n%+v\n%+v\nwant\n%+v\n%+v", plans[0], plans[1], want[0], want[1])
	}
	if next.Epoch != 2 || !reflect.DeepEqual(next.Gens, map[int]uint64{0: 2, 1: 2, 2: 2, 3: 2}) {
		t.Fatalf("next table %+v", next)
	}
}

func TestPlanFreshClusterAndGrowth(t *testing.T) {
	// A first start: every server's own slot is new.
	plans, next := Plan(servers([]string{"D", "D"}, nil), Table{Gens: map[int]uint64{}})
	if !reflect.DeepEqual(plans[0].Fresh, []uint64{0}) || !reflect.DeepEqual(plans[1].Fresh, []uint64{1}) {
		t.Fatalf("fresh: %+v %+v", plans[0], plans[1])
	}
	// Growing from 2 to 3: slots 0, 1 stay, 2 is new.
	srv := servers([]string{"D", "D", "D"}, map[string]map[int]uint64{"D": {0: next.Epoch, 1: next.Epoch}})
	plans, _ = Plan(srv, next)
	if len(plans[2].Fresh) != 1 || plans[2].Fresh[0] != 2 || len(plans[0].Hold) != 1 || len(plans[1].Hold) != 1 {
		t.Fatalf("growth: %+v %+v %+v", plans[0], plans[1], plans[2])
	}
}

func TestPlanNodeLocalSendsToHolder(t *testing.T) {
	// Ranks 0, 1 on node a, 2 on node b; slot 3 was on node b (rank 3 of
	// a 4-server cluster) and goes to rank 0, on a: rank 2 sends it.
	srv := servers([]string{"a", "a", "b"}, map[string]map[int]uint64{"a": {0: 4, 1: 4}, "b": {2: 4, 3: 4}})
	plans, next := Plan(srv, Table{Epoch: 4, Gens: map[int]uint64{0: 4, 1: 4, 2: 4, 3: 4}})
	if !reflect.DeepEqual(plans[2].Send, []wire.SlotSend{{Slot: 3, Gen: 4, To: 0}}) {
		t.Fatalf("rank 2 sends %+v", plans[2].Send)
	}
	if !reflect.DeepEqual(plans[0].Receive, []wire.SlotCopy{cp(3, 4)}) || !reflect.DeepEqual(plans[0].Hold, []wire.SlotCopy{cp(0, 4)}) {
		t.Fatalf("rank 0: %+v", plans[0])
	}
	if next.Gens[3] != 5 {
		t.Fatalf("next table %+v", next)
	}
}

func TestPlanMissingNeverFresh(t *testing.T) {
	// Node b is not started: its slots are missing at their holders, and
	// rank 0 and 1's own slots, known to the table, are not made empty
	// again when their dirs are gone.
	srv := servers([]string{"a", "a"}, map[string]map[int]uint64{"a": {0: 3}})
	plans, next := Plan(srv, Table{Epoch: 3, Gens: map[int]uint64{0: 3, 1: 3, 2: 3, 3: 3}})
	if len(plans[1].Fresh) != 0 || len(plans[0].Fresh) != 0 {
		t.Fatalf("a slot the table knows was planned empty: %+v %+v", plans[0], plans[1])
	}
	var missing []uint32
	for _, r := range []int{0, 1} {
		for _, m := range plans[r].Missing {
			missing = append(missing, m.Slot)
			if !strings.Contains(m.Why, SlotDir(int(m.Slot))) || !strings.Contains(m.Why, "no server of this cluster finds it") {
				t.Fatalf("slot %d missing because %q", m.Slot, m.Why)
			}
		}
	}
	if !reflect.DeepEqual(missing, []uint32{2, 1, 3}) {
		t.Fatalf("missing %v, want 2 at rank 0 and 1, 3 at rank 1", missing)
	}
	// A missing slot keeps its generation: its copy, back, is good.
	if next.Gens[1] != 3 || next.Gens[0] != 4 {
		t.Fatalf("next table %+v", next)
	}
}

func TestPlanOutOfDateCopies(t *testing.T) {
	// Slot 1's only copy is older than the table says: missing, and the
	// copy is left alone. Slot 0 has a newer copy under b and an older one
	// under a (its holder's dir): b's is sent, and a's set aside by the
	// holder when it arrives. Slot 2 has the same generation in both:
	// the holder's is used, the other set aside.
	srv := servers([]string{"a", "b", "b"}, map[string]map[int]uint64{"a": {0: 2, 1: 2, 2: 5}, "b": {0: 5, 2: 5}})
	plans, _ := Plan(srv, Table{Epoch: 5, Gens: map[int]uint64{0: 5, 1: 5, 2: 5}})
	if len(plans[1].Missing) != 1 || plans[1].Missing[0].Slot != 1 || !strings.Contains(plans[1].Missing[0].Why, "out of date") {
		t.Fatalf("rank 1: %+v", plans[1])
	}
	if !reflect.DeepEqual(plans[1].Send, []wire.SlotSend{{Slot: 0, Gen: 5, To: 0}}) || !reflect.DeepEqual(plans[0].Receive, []wire.SlotCopy{cp(0, 5)}) {
		t.Fatalf("slot 0: %+v / %+v", plans[0], plans[1])
	}
	if !reflect.DeepEqual(plans[2].Hold, []wire.SlotCopy{cp(2, 5)}) || !reflect.DeepEqual(plans[0].Aside, []wire.SlotCopy{cp(2, 5)}) {
		t.Fatalf("slot 2: %+v / %+v", plans[0], plans[2])
	}
	for r, p := range plans {
		for _, a := range p.Aside {
			if a.Slot == 1 {
				t.Fatalf("rank %d sets aside the only copy of slot 1", r)
			}
		}
	}
}

func TestPlanMetadataOnlyServersHoldNoData(t *testing.T) {
	srv := servers([]string{"D", "D", "D"}, map[string]map[int]uint64{"D": {0: 1, 1: 1}})
	srv[0].Data = false
	plans, _ := Plan(srv, Table{Epoch: 1, Gens: map[int]uint64{0: 1, 1: 1}})
	if plans[0].Own != 0 || len(plans[0].Hold) != 0 {
		t.Fatalf("rank 0 (metadata only): %+v", plans[0])
	}
	// Slot i is the i-th data server's: slot 0 at rank 1, slot 1 at 2.
	if !reflect.DeepEqual(plans[1].Hold, []wire.SlotCopy{cp(0, 1)}) || !reflect.DeepEqual(plans[2].Hold, []wire.SlotCopy{cp(1, 1)}) {
		t.Fatalf("%+v %+v", plans[1], plans[2])
	}
}

func TestAdoptBySeer(t *testing.T) {
	// One shared dir: store r goes to metadata index r mod count.
	srv := servers([]string{"D", "D"}, nil)
	srv[0].Inventory.MetaDirs = []uint64{0, 1, 2, 3, 4}
	srv[1].Inventory.MetaDirs = []uint64{0, 1, 2, 3, 4}
	got, err := Adopt(srv)
	if !reflect.DeepEqual(got, map[int][]uint64{0: {2, 4}, 1: {3}}) || err != nil {
		t.Fatalf("adopt %v %v", got, err)
	}
	// Node-local dirs: only a server on node b sees b's stores. Rank 1
	// runs on node a now: its store on node b is adopted there.
	srv = servers([]string{"a", "a", "b"}, nil)
	srv[2].Inventory.MetaDirs = []uint64{1, 2, 3}
	srv[1].Data = false
	got, err = Adopt(srv)
	if !reflect.DeepEqual(got, map[int][]uint64{2: {1, 3}}) || err != nil {
		t.Fatalf("adopt %v %v", got, err)
	}
}

// A store that no metadata server sees (none shares its data dir: node b
// runs only a data server now) is adopted by nobody: Adopt refuses the
// start, naming every such store, where it is and what to do, rather than
// leave its objects "not found".
func TestAdoptRefusesAStoreNoMetadataServerSees(t *testing.T) {
	srv := servers([]string{"a", "a", "b"}, nil)
	srv[2].Inventory.MetaDirs = []uint64{1, 2, 3}
	srv[2].Inventory.Path = "/nodes/b/data"
	srv[2].Host = "b"
	srv[1].Data = false
	srv[2].Meta = false
	got, err := Adopt(srv)
	if got != nil || !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("adopt %v, %v; want an error", got, err)
	}
	for _, want := range []string{"meta-2 in data dir /nodes/b/data (rank 2, host b)", "/nodes/b/data/meta-1", "/nodes/b/data/meta-3",
		"metadata server on the node that holds that data dir", "move the store", "remove it"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the refusal does not say %q: %v", want, err)
		}
	}
	// Store 1's rank is a metadata server, on node a: it opens its own
	// store there; the one on node b is still adopted by nobody.
	srv[2].Inventory.MetaDirs = []uint64{1}
	if _, err := Adopt(srv); err == nil || !strings.Contains(err.Error(), "meta-1 in data dir /nodes/b/data") {
		t.Fatalf("adopt: %v", err)
	}
	// With a metadata server on node b, every store there is adopted.
	srv[2].Meta = true
	if got, err := Adopt(srv); err != nil || !reflect.DeepEqual(got, map[int][]uint64{2: {1}}) {
		t.Fatalf("adopt %v, %v", got, err)
	}
}

// Held gives every server what the start's plan gave it, held in place at
// the epoch (what a restarted rank 0 answers the servers that restart
// after it), and the missing slot stays missing at its host.
func TestHeldAfterPlan(t *testing.T) {
	// Ranks 0, 1 on node a, 2 on node b (without metadata); slot 3's copy
	// at generation 4 is nowhere, slot 2 is sent from a to rank 2.
	srv := servers([]string{"a", "a", "b"}, map[string]map[int]uint64{"a": {0: 4, 1: 4, 2: 4}})
	srv[2].Meta = false
	plans, next := Plan(srv, Table{Epoch: 4, Gens: map[int]uint64{0: 4, 1: 4, 2: 4, 3: 4}})
	held := Held(srv, next)
	for rank, p := range plans {
		h := held[rank]
		if h.Epoch != next.Epoch || h.Own != p.Own {
			t.Fatalf("rank %d: held %+v, plan %+v", rank, h, p)
		}
		var want []wire.SlotCopy
		for _, c := range append(append([]wire.SlotCopy(nil), p.Hold...), p.Receive...) {
			want = append(want, cp(int(c.Slot), next.Epoch))
		}
		for _, f := range p.Fresh {
			want = append(want, cp(int(f), next.Epoch))
		}
		if len(want) != len(h.Hold) {
			t.Fatalf("rank %d holds %+v, its plan %+v", rank, h.Hold, p)
		}
		for _, c := range want {
			found := false
			for _, g := range h.Hold {
				found = found || g == c
			}
			if !found {
				t.Fatalf("rank %d: %+v not held in %+v", rank, c, h.Hold)
			}
		}
		if len(h.Missing) != len(p.Missing) {
			t.Fatalf("rank %d: missing %+v, plan %+v", rank, h.Missing, p.Missing)
		}
		for i := range h.Missing {
			if h.Missing[i].Slot != p.Missing[i].Slot {
				t.Fatalf("rank %d: missing %+v, plan %+v", rank, h.Missing, p.Missing)
			}
		}
	}
	if n := len(held[0].Missing) + len(held[1].Missing) + len(held[2].Missing); n != 1 {
		t.Fatalf("%d slots missing, want slot 3 only: %+v", n, held)
	}
}
