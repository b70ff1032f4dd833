package placement

import "github.com/pdcgo/pdc/region"

// Spread is where an object's data lives, fixed when it is created, by
// its partition strategy: an object-static object all in slot Home; a
// region-static one in blocks of Block rows of its first dim, block k in
// slot k mod Over. Over is the number of data servers at the create, so
// that a cluster restarted with another number still finds every block
// (SlotHost).
type Spread struct {
	Home  uint32
	Block uint64
	Over  uint32
}

// StaticBlockBytes is the size of a region-static block when the first
// dim is unlimited, so that it cannot be divided among the servers.
const StaticBlockBytes = 64 << 20

// unlimited is limits.Unlimited (PDC_SIZE_UNLIMITED), a first dim that
// can grow.
const unlimited = ^uint64(0)

// NewSpread fixes the spread of a new object of placement key key, dims
// and elem-byte elements over dataServers data servers. ok is false, and
// the spread zero, when there is nothing to fix: no data server, no dims.
//
// Home is key mod dataServers, so that objects spread like their owners.
// A first dim of n rows makes blocks of ceil(n/dataServers) rows, one per
// server; an unlimited one makes blocks of StaticBlockBytes.
func NewSpread(key uint32, dims []uint64, elem, dataServers int) (s Spread, ok bool) {
	if dataServers <= 0 || len(dims) == 0 {
		return Spread{}, false
	}
	ds := uint64(dataServers)
	s = Spread{Home: key % uint32(dataServers), Over: uint32(dataServers)}
	if dims[0] != unlimited {
		s.Block = max((dims[0]+ds-1)/ds, 1)
		return s, true
	}
	row := uint64(max(elem, 1))
	for _, d := range dims[1:] {
		row *= max(d, 1)
	}
	s.Block = max(StaticBlockBytes/row, 1)
	return s, true
}

// StaticPieces cuts box into the blocks of rows of its first dim that
// region static places round-robin over over data slots (block k in slot
// k mod over), merging neighbours in one slot, and calls emit with each
// piece in row order. Each piece's box is its own copy.
//
// A callback rather than a slice: the caller keeps the pieces in its own
// type, with no second slice per region.
func StaticPieces(box region.Box, block uint64, over int, emit func(slot int, piece region.Box)) {
	block, over = max(block, 1), max(over, 1)
	start, end := box.Off[0], box.End(0)
	if start >= end {
		return
	}
	cut := func(from, to uint64) region.Box {
		b := box.Clone()
		b.Off[0], b.Size[0] = from, to-from
		return b
	}
	from, slot := start, int((start/block)%uint64(over))
	for row := start; row < end; {
		k := row / block
		if s := int(k % uint64(over)); s != slot {
			emit(slot, cut(from, row))
			from, slot = row, s
		}
		// The next block's first row, unless the box ends first: the
		// last block of an unlimited dim ends past 2^64, where
		// (k+1)*block wraps.
		if left := block - row%block; left < end-row {
			row += left
		} else {
			row = end
		}
	}
	emit(slot, cut(from, end))
}

// Candidates lists the data slots 0..n-1 starting at slot start mod n:
// the slots a region-dynamic write may go to. The least-loaded choice
// gives ties to the first, so each client starting the list at its own
// place spreads the ties among the slots.
func Candidates(n, start int) []uint64 {
	if n <= 0 {
		return nil
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64((i + start) % n)
	}
	return out
}

// LeastLoaded returns the candidate slot holding the fewest bytes, ties
// to the first; load says how many bytes a slot holds. It asks load about
// each candidate once, in order, and stops at its first error. With no
// candidates it returns slot 0.
func LeastLoaded(cands []uint64, load func(slot uint32) (uint64, error)) (uint32, error) {
	best, bestLoad := uint32(0), uint64(0)
	for j, c := range cands {
		slot := uint32(c)
		l, err := load(slot)
		if err != nil {
			return 0, err
		}
		if j == 0 || l < bestLoad {
			best, bestLoad = slot, l
		}
	}
	return best, nil
}
