package regionstore

import (
	"bytes"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// On a file system whose files cannot be mapped (MemFS here; ENODEV from
// mmap on some FUSE and network file systems), a view reads the file
// into a copy instead. The copy must not be kept as if it were a
// mapping: a write in place after it would not show in it, and a later
// view would serve the old bytes, or fail their new CRCs.
func TestViewOfUnmappableFileSeesLaterWrites(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			s, err := Open(Options{Dir: faultDir, FS: vfs.NewMem()})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			l := Layout{Dims: []uint64{2 * blockSizeU()}, Elem: 1, Mode: mode}
			all := region.Shape(l.Dims...)
			for i, b := range []byte{1, 2} {
				data := bytes.Repeat([]byte{b}, int(2*blockSize))
				if err := s.Write(7, l, all, data); err != nil {
					t.Fatal(err)
				}
				v, err := s.View(7, l, all)
				if err != nil {
					t.Fatalf("view after write %d: %v", i+1, err)
				}
				var got []byte
				for _, seg := range v.Segs {
					got = append(got, seg...)
				}
				v.Release()
				if !bytes.Equal(got, data) {
					t.Fatalf("view after write %d reads %d..., want %d", i+1, got[0], b)
				}
			}
		})
	}
}
