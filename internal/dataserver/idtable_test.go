package dataserver

import (
	"math/rand/v2"
	"testing"
)

// TestIDTable: the table holds what a map from id to transfer would,
// through puts and dels in any order across pages, and gives emptied
// pages back.
func TestIDTable(t *testing.T) {
	tb := newIDTable()
	want := map[uint64]*transfer{}
	rng := rand.New(rand.NewPCG(1, 2))
	next := uint64(0)
	for range 20000 {
		switch {
		case rng.IntN(3) > 0 || len(want) == 0:
			next++
			tr := &transfer{id: next}
			tb.put(next, tr)
			want[next] = tr
		default:
			// Take any registered one, or one never registered.
			var id uint64
			for k := range want {
				id = k
				break
			}
			if rng.IntN(10) == 0 {
				id = next + 1 + uint64(rng.IntN(1000))
			}
			tb.del(id)
			delete(want, id)
		}
		if tb.len() != len(want) {
			t.Fatalf("len %d, want %d", tb.len(), len(want))
		}
	}
	for id, tr := range want {
		if got := tb.get(id); got != tr {
			t.Fatalf("get(%d) = %v, want %v", id, got, tr)
		}
	}
	for id := uint64(0); id <= next+idPageSize; id++ {
		if _, ok := want[id]; !ok && tb.get(id) != nil {
			t.Fatalf("get(%d) found a transfer never registered or deleted", id)
		}
	}
	seen := 0
	tb.each(func(id uint64, tr *transfer) {
		if want[id] != tr {
			t.Fatalf("each gave %d -> %v, want %v", id, tr, want[id])
		}
		seen++
		tb.del(id) // as SessionEnded does
	})
	if seen != len(want) || tb.len() != 0 || len(tb.pages) != 0 {
		t.Fatalf("each saw %d of %d; after deleting all, len %d, %d pages", seen, len(want), tb.len(), len(tb.pages))
	}
}

// TestIDTableOneAtATime: a transfer registered and taken, then the next,
// reuses one page rather than allocating one each time.
func TestIDTableOneAtATime(t *testing.T) {
	tb := newIDTable()
	tr := &transfer{}
	allocs := testing.AllocsPerRun(1000, func() {
		for id := uint64(1); id <= 3*idPageSize; id++ {
			tb.put(id, tr)
			if tb.get(id) != tr {
				t.Fatal("lost")
			}
			tb.del(id)
		}
	})
	if allocs > 1 {
		t.Fatalf("%.1f allocations for %d registrations taken one at a time", allocs, 3*idPageSize)
	}
}
