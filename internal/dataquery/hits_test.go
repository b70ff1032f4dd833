package dataquery

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// TestMerge: the parts' hits add up; indexes come back sorted, with their
// values in the same order, only as far as asked for.
func TestMerge(t *testing.T) {
	parts := []Hits{
		{N: 2, Idx: []uint64{9, 3}, Vals: []byte{9, 3}},
		{N: 3, Idx: []uint64{1, 12, 4}, Vals: []byte{1, 12, 4}},
	}
	n, sel, vals := Merge(parts, wire.QueryValues, 1)
	if n != 5 || !slices.Equal(sel, []uint64{1, 3, 4, 9, 12}) || !slices.Equal(vals, []byte{1, 3, 4, 9, 12}) {
		t.Fatalf("values: %d %v %v", n, sel, vals)
	}
	n, sel, vals = Merge(parts, wire.QuerySelection, 1)
	if n != 5 || !slices.Equal(sel, []uint64{1, 3, 4, 9, 12}) || vals != nil {
		t.Fatalf("selection: %d %v %v", n, sel, vals)
	}
	n, sel, _ = Merge(parts, wire.QueryCount, 1)
	if n != 5 || sel != nil {
		t.Fatalf("count: %d %v", n, sel)
	}
}

func TestZeroHitsAreTheUnheldElements(t *testing.T) {
	dims := []uint64{4, 4}
	area := region.Box{Off: []uint64{0, 0}, Size: []uint64{4, 4}}
	held := []region.Box{{Off: []uint64{0, 0}, Size: []uint64{4, 2}}, {Off: []uint64{0, 2}, Size: []uint64{2, 2}}}
	got, err := ZeroHits(area, held, dims, wire.QueryValues, 8)
	if err != nil || len(got) != 1 {
		t.Fatalf("ZeroHits: %v, %v", got, err)
	}
	// Rows 2 and 3, columns 2 and 3: elements 10, 11, 14, 15.
	if z := got[0]; z.N != 4 || !slices.Equal(z.Idx, []uint64{10, 11, 14, 15}) || len(z.Vals) != 4*8 {
		t.Errorf("zero hits %+v, want 4 at 10, 11, 14, 15 with 32 bytes of values", z)
	}
	if got, err := ZeroHits(area, append(held, region.Box{Off: []uint64{2, 2}, Size: []uint64{2, 2}}), dims, wire.QueryValues, 8); err != nil || got != nil {
		t.Errorf("area covered: %v, %v; want no hits", got, err)
	}
	big := region.Box{Off: []uint64{0}, Size: []uint64{1 << 30}}
	if _, err := ZeroHits(big, nil, []uint64{1 << 30}, wire.QuerySelection, 8); !errors.Is(err, pdc.ErrTooLarge) {
		t.Errorf("a selection of 1 Gi never-written elements: %v, want ErrTooLarge", err)
	}
}

func TestCallsGroupBySlotInOrder(t *testing.T) {
	type piece struct {
		server, slot int
		off          uint64
	}
	pieces := []piece{{1, 0, 0}, {0, 3, 1}, {1, 0, 2}, {1, 1, 3}}
	for range BoxesPerCall {
		pieces = append(pieces, piece{0, 3, 9})
	}
	calls := Calls(len(pieces), func(i int) (int, int, region.Box) {
		p := pieces[i]
		return p.server, p.slot, region.Box{Off: []uint64{p.off}, Size: []uint64{1}}
	})
	var got []string
	for _, c := range calls {
		got = append(got, fmt.Sprintf("%d/%d:%d", c.Server, c.Slot, len(c.Boxes)))
	}
	want := []string{"1/0:2", "0/3:8192", "0/3:1", "1/1:1"}
	if !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	if calls[0].Boxes[1].Off[0] != 2 {
		t.Errorf("server 1's second box is at %d, want 2", calls[0].Boxes[1].Off[0])
	}
}
