package dataquery

import (
	"fmt"
	"slices"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
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

// maxZeroSelection bounds the bytes of the selection of never-written
// elements a client makes itself, as a data server's answer is bounded.
const maxZeroSelection = 1 << 30

// ZeroHits are the hits of a predicate zero satisfies among the elements
// of area outside the disjoint boxes held (by data servers: what is not
// held was never written, and reads as zeros), for an object of dims with
// elements of elem bytes, answered as ret asks; none if held covers area.
func ZeroHits(area region.Box, held []region.Box, dims []uint64, ret uint32, elem int) ([]Hits, error) {
	var covered uint64
	for _, b := range held {
		covered += b.Volume()
	}
	if covered >= area.Volume() {
		return nil, nil
	}
	if ret >= wire.QuerySelection && (area.Volume()-covered)*uint64(8+elem) > maxZeroSelection {
		return nil, fmt.Errorf("%d never-written elements match, more than one selection may hold: restrict the region or ask for the count: %w",
			area.Volume()-covered, pdc.ErrTooLarge)
	}
	holes := []region.Box{area}
	for _, b := range held {
		var next []region.Box
		for _, h := range holes {
			next = append(next, region.Subtract(h, b)...)
		}
		holes = next
	}
	var zero Hits
	for _, h := range holes {
		zero.N += h.Volume()
		if ret >= wire.QuerySelection {
			region.Runs(region.Shape(dims...), h, func(r region.Run) bool {
				for i := r.Off; i < r.Off+r.Len; i++ {
					zero.Idx = append(zero.Idx, i)
				}
				return true
			})
		}
	}
	if ret == wire.QueryValues {
		zero.Vals = make([]byte, len(zero.Idx)*elem)
	}
	return []Hits{zero}, nil
}

// BoxesPerCall bounds the boxes of one DataQuery message.
const BoxesPerCall = 8192

// A Call is one DataQuery: boxes of one data slot on its server.
type Call struct {
	Server, Slot int
	Boxes        []wire.QueryBox
}

// Calls groups n held boxes (piece i is box on the slot of server) by data
// slot, a server holding several, in calls of at most BoxesPerCall boxes,
// in the order the slots first appear.
func Calls(n int, piece func(i int) (server, slot int, box region.Box)) []Call {
	type holder struct{ server, slot int }
	byHolder := map[holder][]wire.QueryBox{}
	var holders []holder
	for i := range n {
		server, slot, box := piece(i)
		h := holder{server, slot}
		if _, ok := byHolder[h]; !ok {
			holders = append(holders, h)
		}
		byHolder[h] = append(byHolder[h], wire.QueryBox{Off: box.Off, Size: box.Size})
	}
	var calls []Call
	for _, h := range holders {
		bs := byHolder[h]
		for len(bs) > 0 {
			k := min(len(bs), BoxesPerCall)
			calls = append(calls, Call{h.server, h.slot, bs[:k]})
			bs = bs[k:]
		}
	}
	return calls
}
