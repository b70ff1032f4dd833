package regionstore

import (
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A cut interrupted by a crash is pushed again by the metadata server,
// which keeps it until a push is acknowledged; the push after the restart
// must finish it. The version was raised before the file took the new
// dims, so a crash between the two left the version marked with the old
// layout under it, and the second push, not newer than the mark, changed
// nothing: a regrow then moved the rows the cut should have dropped into
// the new layout, where they read back (the crash loop: a shrink from
// [27 68] to [2 38] cut short by a crash stop, the cut pushed again at
// the next start, a regrow to [27 38], row 24 reading a cycle-old value).
func TestCutAgainAfterACrashInsideIt(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			fsys := vfs.NewFaulty(mem)
			s, err := Open(Options{Dir: faultDir, FS: fsys})
			if err != nil {
				t.Fatal(err)
			}
			full := Layout{Dims: []uint64{27, 68}, Elem: 8, Mode: mode, Version: 1}
			data := make([]byte, 27*68*8)
			for i := range data {
				data[i] = byte(i%251 + 1)
			}
			if err := s.Write(7, full, region.Shape(27, 68), data); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(7); err != nil {
				t.Fatal(err)
			}
			var crashes []*vfs.MemFS
			var ops []string
			fsys.OnOp(func(op vfs.Op, path string) {
				crashes = append(crashes, mem.Clone())
				ops = append(ops, op.String()+" "+path)
			})
			if err := s.Cut(7, []uint64{2, 38}, 2); err != nil {
				t.Fatal(err)
			}
			fsys.OnOp(nil)
			_ = s.Close()
			crashes = append(crashes, mem.Clone())
			ops = append(ops, "(none: the cut returned)")
			for i, crashed := range crashes {
				s, err := Open(Options{Dir: faultDir, FS: crashed})
				if err != nil {
					t.Fatalf("after a crash before %s: %v", ops[i], err)
				}
				// The metadata server pushes the cut again, then the
				// regrow's dims come with a write.
				if err := s.Cut(7, []uint64{2, 38}, 2); err != nil {
					t.Fatalf("after a crash before %s: the cut pushed again: %v", ops[i], err)
				}
				regrow := Layout{Dims: []uint64{27, 38}, Elem: 8, Mode: mode, Version: 3}
				if err := s.Write(7, regrow, region.Box{Off: []uint64{26, 37}, Size: []uint64{1, 1}}, make([]byte, 8)); err != nil {
					t.Fatalf("after a crash before %s: %v", ops[i], err)
				}
				got := make([]byte, 27*38*8)
				if err := s.Read(7, regrow, region.Shape(27, 38), got); err != nil {
					t.Fatalf("after a crash before %s: %v", ops[i], err)
				}
				for j, b := range got {
					row, col := j/(38*8), j%(38*8)
					want := byte(0)
					if row < 2 {
						want = data[row*68*8+col]
					}
					if b != want {
						t.Fatalf("after a crash before %s and the cut pushed again: row %d col %d reads %d, want %d", ops[i], row, col/8, b, want)
					}
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
