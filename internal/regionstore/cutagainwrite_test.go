package regionstore

import (
	"bytes"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A cut pushed again at the version the object's files hold is applied
// again (TestCutAgainAfterACrashInsideIt); data written at that version
// after the cut, within its dims, must survive it: a version has one
// dims, so the second push is a no-op then, before and after a restart.
func TestCutAgainKeepsWritesOfItsVersion(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			s, err := Open(Options{Dir: faultDir, FS: mem})
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
			cut := []uint64{2, 38}
			if err := s.Cut(7, cut, 2); err != nil {
				t.Fatal(err)
			}
			at := Layout{Dims: cut, Elem: 8, Mode: mode, Version: 2}
			fresh := bytes.Repeat([]byte{0xee}, 2*38*8)
			if err := s.Write(7, at, region.Shape(2, 38), fresh); err != nil {
				t.Fatal(err)
			}
			check := func(s *Store, when string) {
				t.Helper()
				got := make([]byte, len(fresh))
				if err := s.Read(7, at, region.Shape(2, 38), got); err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				if !bytes.Equal(got, fresh) {
					t.Fatalf("%s: the write at the cut's version reads back as %v, want all 0xee", when, got[:16])
				}
			}
			if err := s.Cut(7, cut, 2); err != nil {
				t.Fatal(err)
			}
			check(s, "after the cut pushed again")
			if err := s.Flush(7); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(Options{Dir: faultDir, FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Cut(7, cut, 2); err != nil {
				t.Fatal(err)
			}
			check(s, "after a restart and the cut pushed again")
			// A regrow shows zeros past the cut, the write within it.
			regrow := Layout{Dims: []uint64{27, 68}, Elem: 8, Mode: mode, Version: 3}
			got := make([]byte, 27*68*8)
			if err := s.Read(7, regrow, region.Shape(27, 68), got); err != nil {
				t.Fatal(err)
			}
			for j, b := range got {
				row, col := j/(68*8), (j%(68*8))/8
				want := byte(0)
				if row < 2 && col < 38 {
					want = 0xee
				}
				if b != want {
					t.Fatalf("after the regrow: row %d col %d reads %#x, want %#x", row, col, b, want)
				}
			}
		})
	}
}
