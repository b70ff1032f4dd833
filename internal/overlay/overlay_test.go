package overlay

import (
	"math/rand/v2"
	"slices"
	"testing"

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

// Every cell of the read comes from the newest piece holding it, or is a
// hole when none does: checked cell by cell against random overlapping
// writes.
func TestResolveLastWriteWins(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for range 1000 {
		n := 1 + r.IntN(3)
		pieces := make([]Piece, r.IntN(8))
		for i := range pieces {
			pieces[i] = Piece{Box: randBox(r, n, 8), Seq: r.Uint64N(20)}
		}
		// Seqs are unique in a real store; make them so.
		for i := range pieces {
			pieces[i].Seq = pieces[i].Seq*16 + uint64(i)
		}
		read := randBox(r, n, 8)
		frags, holes := Resolve(read, pieces)
		got := map[string]int{} // cell -> piece, or -1 for a hole
		key := func(c []uint64) string { return string(fmtCell(c)) }
		for _, f := range frags {
			if !read.Contains(f.Box) || !pieces[f.Piece].Box.Contains(f.Box) {
				t.Fatalf("fragment %v of piece %v outside the read %v or its piece", f.Box, pieces[f.Piece].Box, read)
			}
			forCells(f.Box, func(c []uint64) {
				if _, dup := got[key(c)]; dup {
					t.Fatalf("cell %v covered twice", c)
				}
				got[key(c)] = f.Piece
			})
		}
		for _, h := range holes {
			forCells(h, func(c []uint64) {
				if _, dup := got[key(c)]; dup {
					t.Fatalf("cell %v covered twice", c)
				}
				got[key(c)] = -1
			})
		}
		forCells(read, func(c []uint64) {
			want, best := -1, uint64(0)
			for i, p := range pieces {
				if holds(p.Box, c) && (want < 0 || p.Seq > best) {
					want, best = i, p.Seq
				}
			}
			g, ok := got[key(c)]
			if !ok || g != want {
				t.Fatalf("read %v over %v: cell %v from %d (present %v), want %d", read, pieces, c, g, ok, want)
			}
		})
		if len(got) != int(read.Volume()) {
			t.Fatalf("read %v: %d cells covered, volume %d", read, len(got), read.Volume())
		}
	}
}

func fmtCell(c []uint64) []byte {
	var b []byte
	for _, v := range c {
		b = append(b, byte(v), ',')
	}
	return b
}
