package dataquery

import (
	"slices"

	"github.com/pdcgo/pdc/internal/wire"
)

// Hits is one part of a query's answer: what one data server found, or
// the never-written zeros that match.
type Hits struct {
	N    uint64   // matching elements
	Idx  []uint64 // their linear indexes, when a selection is asked for
	Vals []byte   // their values, elem bytes each, when values are
}

// Merge puts the parts together: the total of their hits and, as ret
// (wire.QueryCount, QuerySelection or QueryValues) asks, the linear
// indexes sorted and the values in the same order.
func Merge(parts []Hits, ret uint32, elem int) (hits uint64, sel []uint64, vals []byte) {
	n := 0
	for _, p := range parts {
		hits += p.N
		n += len(p.Idx)
	}
	if ret < wire.QuerySelection {
		return hits, nil, nil
	}
	sel = make([]uint64, 0, n)
	if ret < wire.QueryValues {
		for _, p := range parts {
			sel = append(sel, p.Idx...)
		}
		slices.Sort(sel)
		return hits, sel, nil
	}
	type hit struct {
		idx uint64
		val []byte
	}
	all := make([]hit, 0, n)
	for _, p := range parts {
		for i, x := range p.Idx {
			all = append(all, hit{x, p.Vals[i*elem : (i+1)*elem]})
		}
	}
	slices.SortFunc(all, func(a, b hit) int {
		switch {
		case a.idx < b.idx:
			return -1
		case a.idx > b.idx:
			return 1
		}
		return 0
	})
	vals = make([]byte, 0, n*elem)
	for _, h := range all {
		sel = append(sel, h.idx)
		vals = append(vals, h.val...)
	}
	return hits, sel, vals
}
