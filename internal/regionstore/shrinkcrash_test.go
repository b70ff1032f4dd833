package regionstore

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A crash at any point of a run of writes and shrinks of the first dim
// loses nothing acknowledged: reopened, with a shrink under way at the
// crash done again by the next call (a client retries it), the store
// reads what the model holds, the rows dropped by shrinks as zeros.
func TestShrinkCrashes(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		for seed := range uint64(4) {
			mem := vfs.NewMem()
			fsys := vfs.NewFaulty(mem)
			s, err := Open(Options{Dir: faultDir, FS: fsys})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(seed, 9))
			dims := []uint64{48, 64}
			m := newFModel(dims)
			type point struct {
				fs   *vfs.MemFS
				m    *fmodel
				pend *fwrite
				rows uint64 // a shrink under way to rows, 0 if none
				ver  uint64 // the shrink's dims version
			}
			var points []point
			var pend *fwrite
			var shrinkTo uint64
			var ver uint64 = 1
			fsys.OnOp(func(op vfs.Op, path string) {
				points = append(points, point{mem.Clone(), m.clone(), pend, shrinkTo, ver})
			})
			for i := range 40 {
				if i%5 == 4 {
					rows := 1 + r.Uint64N(47)
					ver++
					shrinkTo = rows
					small := Layout{Dims: []uint64{rows, 64}, Elem: 4, Mode: mode, Version: ver}
					if err := s.Read(7, small, region.Box{Off: []uint64{0, 0}, Size: []uint64{1, 1}}, make([]byte, 4)); err != nil {
						t.Fatal(err)
					}
					shrinkTo = 0
					for k := rows * 64 * 4; k < uint64(len(m.data)); k++ {
						m.data[k] = 0
					}
					ver++
					continue
				}
				box := randBoxIn(r, dims)
				w := fwrite{box: box, data: randData(r, int(box.Volume())*4), dims: dims}
				pend = &w
				if err := s.Write(7, Layout{Dims: dims, Elem: 4, Mode: mode, Version: ver}, w.box, w.data); err != nil {
					t.Fatal(err)
				}
				pend = nil
				m.apply(w.box, w.data, true)
			}
			fsys.OnOp(nil)
			s.Close()
			for i, p := range points {
				s, err := Open(Options{Dir: faultDir, FS: p.fs})
				if err != nil {
					t.Fatal(err)
				}
				if p.rows != 0 {
					small := Layout{Dims: []uint64{p.rows, 64}, Elem: 4, Mode: mode, Version: p.ver}
					if err := s.Read(7, small, region.Box{Off: []uint64{0, 0}, Size: []uint64{1, 1}}, make([]byte, 4)); err != nil {
						t.Fatalf("seed %d crash %d: resume shrink: %v", seed, i, err)
					}
					for k := p.rows * 64 * 4; k < uint64(len(p.m.data)); k++ {
						p.m.data[k] = 0
					}
				}
				got, err := readAll(s, mode, dims)
				when := fmt.Sprintf("%s seed %d crash %d (shrink %d)", mode, seed, i, p.rows)
				if err != nil {
					t.Fatalf("%s: read: %v", when, err)
				}
				p.m.check(t, got, p.pend, when)
				s.Close()
			}
			t.Logf("%s seed %d: %d points", mode, seed, len(points))
		}
	}
}
