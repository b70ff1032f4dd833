package regionstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// The store takes a write at a dims version older than its files' when
// the write's dims change nothing there (stale refuses only one that
// would). A data server can store one: a write at version 1, registered
// before a transfer at version 2 that carries a shrink (it arrived before
// the metadata server's push of the cut), is stored by another worker
// after it, and lands past the shrunk dims. What keeps a regrow from
// reading it back is the push of the cut that follows: at the files' own
// version it is applied again and drops the rows past its dims, whether
// it comes before or after a restart. This pins that: after the older
// write (taken, or refused as stale), the cut pushed at version 2 and a
// regrow, every row past the cut reads zeros.
func TestOlderWriteAfterACarriedShrinkIsCutByItsPush(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		for _, restart := range []bool{false, true} {
			name := mode.String()
			if restart {
				name += "/restart"
			}
			t.Run(name, func(t *testing.T) {
				mem := vfs.NewMem()
				s, err := Open(Options{Dir: faultDir, FS: mem})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { s.Close() }()
				old := Layout{Dims: []uint64{27, 68}, Elem: 8, Mode: mode, Version: 1}
				if err := s.Write(7, old, region.Shape(27, 68), bytes.Repeat([]byte{0x11}, 27*68*8)); err != nil {
					t.Fatal(err)
				}
				// The transfer that carries the shrink to 8 rows.
				shrunk := Layout{Dims: []uint64{8, 68}, Elem: 8, Mode: mode, Version: 2}
				if err := s.Write(7, shrunk, region.Shape(2, 68), bytes.Repeat([]byte{0xee}, 2*68*8)); err != nil {
					t.Fatal(err)
				}
				// The older write, registered before it, stored after.
				late := region.Box{Off: []uint64{10, 0}, Size: []uint64{11, 68}}
				if err := s.Write(7, old, late, bytes.Repeat([]byte{0xaa}, 11*68*8)); err != nil && !errors.Is(err, pdc.ErrStale) {
					t.Fatalf("a write at an older version than the files': %v", err)
				}
				if restart {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					if s, err = Open(Options{Dir: faultDir, FS: mem}); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Cut(7, shrunk.Dims, shrunk.Version); err != nil {
					t.Fatal(err)
				}
				regrow := Layout{Dims: []uint64{26, 68}, Elem: 8, Mode: mode, Version: 3}
				got := make([]byte, 26*68*8)
				if err := s.Read(7, regrow, region.Shape(26, 68), got); err != nil {
					t.Fatal(err)
				}
				for j, b := range got {
					row := j / (68 * 8)
					want := byte(0)
					switch {
					case row < 2:
						want = 0xee
					case row < 8:
						want = 0x11
					}
					if b != want {
						t.Fatalf("after the cut and a regrow: row %d reads %#x, want %#x", row, b, want)
					}
				}
			})
		}
	}
}
