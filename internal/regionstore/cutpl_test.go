package regionstore

import (
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A cut is durable whatever Options.Sync says (the metadata server
// forgets it once acknowledged): after a power loss right after it, the
// object's files have the cut's version, and a regrow reads zeros past
// the shrink. The files are made durable first (a store with Sync).
func TestCutSurvivesPowerLoss(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		for _, to := range [][]uint64{{8, 64}, {54, 32}} {
			mem := vfs.NewMem()
			s, err := Open(Options{Dir: "d", FS: mem, Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			full := Layout{Dims: []uint64{27, 64}, Elem: 8, Mode: mode, Version: 1}
			data := make([]byte, 27*64*8)
			for i := range data {
				data[i] = byte(i%251 + 1)
			}
			if err := s.Write(7, full, region.Shape(27, 64), data); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open(Options{Dir: "d", FS: mem}); err != nil {
				t.Fatal(err)
			}
			if err := s.Cut(7, to, 2); err != nil {
				t.Fatal(err)
			}
			crashed := mem.CrashClone()
			s.Close()
			s, err = Open(Options{Dir: "d", FS: crashed})
			if err != nil {
				t.Fatalf("%v %v: reopen: %v", mode, to, err)
			}
			if v, err := s.Version(7); err != nil || v != 2 {
				t.Errorf("%v to %v: version after the cut and a power loss: %d, %v; want 2", mode, to, v, err)
			}
			got := make([]byte, 8*64*8)
			if err := s.Read(7, Layout{Dims: []uint64{27, 64}, Elem: 8, Mode: mode, Version: 3}, region.Shape(8, 64), got); err == nil && to[0] == 8 {
				g2 := make([]byte, 19*64*8)
				if err := s.Read(7, Layout{Dims: []uint64{27, 64}, Elem: 8, Mode: mode, Version: 3}, region.Box{Off: []uint64{8, 0}, Size: []uint64{19, 64}}, g2); err != nil {
					t.Fatal(err)
				}
				for i, b := range g2 {
					if b != 0 {
						t.Errorf("%v to %v: after a power loss, a regrow reads row %d's old value", mode, to, 8+i/(64*8))
						break
					}
				}
			}
			s.Close()
		}
	}
}
