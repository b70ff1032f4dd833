package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/wire"
)

// A data server that restarts during a start (its successor rejoins the
// rounds already done) gets what its predecessor got of the dims cuts
// owed to a slot coming back: the one that keeps them still reports them
// at RoundMoved, and drops its file once the start is done; the slot's
// holder is answered them again. Before, the successor's plan had no
// ShipOwed and RoundMoved's rejoin answer no Owed: the holder opened the
// slot without the cuts another data dir kept, stamped it with the new
// epoch (after which they count as applied) and served it, and a regrow
// read back the rows those shrinks dropped.
func TestRejoinDuringAStartKeepsTheOwedCutsMoving(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cuts := wire.OwedCuts{Slot: 1, Cuts: []wire.OwedCut{{Epoch: 4, Obj: 7, DimsVersion: 2, Dims: []uint64{8, 40}}}}
	s := &Server{}
	// Slot 1 comes back at rank 1; rank 2's data dir keeps its cuts.
	s.slots.plans = map[int]*wire.SlotPlan{
		0: {Epoch: 5, Own: 1, Hold: []wire.SlotCopy{{Slot: 0, Gen: 4}}},
		1: {Epoch: 5, Own: 2, Receive: []wire.SlotCopy{{Slot: 1, Gen: 3}}},
		2: {Epoch: 5, Own: 3, ShipOwed: []uint64{1}, DropOwed: []uint64{1}},
	}
	s.rounds = newRounds(3, func() *cluster.List { return nil })
	s.rounds.finish, s.rounds.rejoin = s.finishRound, s.rejoinRound

	q := s.rejoinRound(wire.RoundPlan, 2).Plan
	if !slices.Equal(q.ShipOwed, []uint64{1}) || !slices.Equal(q.DropOwed, []uint64{1}) {
		t.Fatalf("rank 2 restarted after RoundPlan: ships %v, drops %v; want slot 1's cuts", q.ShipOwed, q.DropOwed)
	}
	got := make(chan *wire.StartRound, 3)
	for r := range 3 {
		go func() {
			m := &wire.StartRound{Round: wire.RoundMoved, Rank: uint32(r), Instance: "i"}
			if r == 2 {
				m.Owed = []wire.OwedCuts{cuts}
			}
			a, err := s.rounds.report(ctx, m, false)
			if err != nil {
				t.Error(err)
			}
			got <- a
		}()
	}
	for range 3 {
		<-got
	}
	if t.Failed() {
		t.FailNow()
	}
	a, err := s.rounds.report(ctx, &wire.StartRound{Round: wire.RoundMoved, Rank: 1, Instance: "successor"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if a.Plan == nil || len(a.Plan.Owed) != 1 || a.Plan.Owed[0].Slot != 1 || len(a.Plan.Owed[0].Cuts) != 1 {
		t.Fatalf("rank 1, slot 1's holder, restarted after RoundMoved: answered %+v; want slot 1's cuts", a)
	}
}
