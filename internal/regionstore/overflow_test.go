package regionstore

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/pdcgo/pdc"
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

// An element whose row-major offset is past what a file offset holds is
// refused, not stored at (or read from) the offset the product wraps to:
// row 2^52 of 4096-byte rows would be row 0.
func TestOffsetPast64BitsRefused(t *testing.T) {
	s := openStore(t, t.TempDir(), false)
	defer func() { _ = s.Close() }()
	l := Layout{Dims: []uint64{1 << 53, 4096}, Elem: 1, Mode: ByOffset}
	row0 := region.Box{Off: []uint64{0, 0}, Size: []uint64{1, 4096}}
	want := bytes.Repeat([]byte{0xaa}, 4096)
	if err := s.Write(1, l, row0, want); err != nil {
		t.Fatal(err)
	}
	far := region.Box{Off: []uint64{1 << 52, 0}, Size: []uint64{1, 4096}}
	if err := s.Write(1, l, far, bytes.Repeat([]byte{0xbb}, 4096)); !errors.Is(err, pdc.ErrTooLarge) {
		t.Errorf("write of row 2^52: %v, want an error wrapping ErrTooLarge", err)
	}
	if err := s.WriteFrom(1, l, far, bytes.NewReader(bytes.Repeat([]byte{0xbb}, 4096)), make([]byte, blockSize)); !errors.Is(err, pdc.ErrTooLarge) {
		t.Errorf("write from a stream of row 2^52: %v, want an error wrapping ErrTooLarge", err)
	}
	got := make([]byte, 4096)
	if err := s.Read(1, l, far, got); !errors.Is(err, pdc.ErrTooLarge) {
		t.Errorf("read of row 2^52: %v (%x...), want an error wrapping ErrTooLarge", err, got[:4])
	}
	if v, err := s.View(1, l, far); !errors.Is(err, pdc.ErrTooLarge) {
		if v != nil {
			v.Release()
		}
		t.Errorf("view of row 2^52: %v, want an error wrapping ErrTooLarge", err)
	}
	if err := s.Read(1, l, row0, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("row 0 reads %x..., want %x...: the far write landed on it", got[:4], want[:4])
	}
}
