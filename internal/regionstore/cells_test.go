package regionstore

import (
	"math/rand/v2"
	"slices"

	"github.com/pdcgo/pdc/region"
)

func randBox(r *rand.Rand, n int, span uint64) region.Box {
	b := region.Box{Off: make([]uint64, n), Size: make([]uint64, n)}
	for i := range n {
		b.Off[i] = r.Uint64N(span)
		b.Size[i] = 1 + r.Uint64N(span-b.Off[i])
	}
	return b
}

func forCells(b region.Box, fn func(c []uint64)) {
	c := slices.Clone(b.Off)
	for {
		fn(c)
		i := len(c) - 1
		for ; i >= 0; i-- {
			c[i]++
			if c[i] < b.End(i) {
				break
			}
			c[i] = b.Off[i]
		}
		if i < 0 {
			return
		}
	}
}

func holds(b region.Box, c []uint64) bool {
	for i := range c {
		if c[i] < b.Off[i] || c[i] >= b.End(i) {
			return false
		}
	}
	return true
}
