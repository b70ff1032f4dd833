package regionstore

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/pdcgo/pdc/region"
)

// An object whose size in bytes passes 2^63 keeps what is written to it
// by offset: an unlimited first dim (PDC_SIZE_UNLIMITED, which clients
// send as the dim), a first dim that large, and a row that large. Before,
// the size wrapped negative and every call cut the file to nothing.
func TestHugeDimsKeepData(t *testing.T) {
	for _, dims := range [][]uint64{
		{math.MaxUint64, 16},
		{1 << 60, 4096},
		{2, 1 << 62, 4},
	} {
		t.Run(fmt.Sprint(dims), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, false)
			l := Layout{Dims: dims, Elem: 1, Mode: ByOffset}
			box := func(i uint64) region.Box {
				b := region.Box{Off: make([]uint64, len(dims)), Size: make([]uint64, len(dims))}
				for d := range b.Size {
					b.Size[d] = 1
				}
				b.Size[len(dims)-1] = 4
				b.Off[len(dims)-2] = i
				return b
			}
			want := [][]byte{[]byte("abcd"), []byte("efgh"), []byte("ijkl")}
			for i, w := range want {
				if err := s.Write(1, l, box(uint64(i)), w); err != nil {
					t.Fatal(err)
				}
			}
			check := func(s *Store) {
				t.Helper()
				for i, w := range want {
					got := make([]byte, len(w))
					if err := s.Read(1, l, box(uint64(i)), got); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, w) {
						t.Fatalf("%v reads %q, want %q", box(uint64(i)), got, w)
					}
				}
			}
			check(s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, dir, false)
			defer func() { _ = s.Close() }()
			check(s)
		})
	}
}
