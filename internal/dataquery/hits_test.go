package dataquery

import (
	"slices"
	"testing"

	"github.com/pdcgo/pdc/internal/wire"
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
