package regionstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdcgo/pdc/region"
)

const benchObject = 256 << 20

// BenchmarkStore writes and reads a 256 MiB 1-D object in chunks, going
// round it in order. Writes go to a fresh object: by region, the first
// round appends to the log and later rounds rewrite in place. Reads go to
// an object written once in 16 MiB pieces (so from the page cache). The
// memcpy and file sub-benchmarks are the ceilings measured in the same
// run: a copy into memory, and plain pwrite/pread of a file.
func BenchmarkStore(b *testing.B) {
	sizes := []benchSize{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}}
	// Ceilings: memcpy into a 256 MiB buffer, and pwrite/pread of a
	// 256 MiB file, with the same chunks.
	b.Run("memcpy", func(b *testing.B) { benchMemcpy(b, sizes) })
	b.Run("file", func(b *testing.B) { benchFile(b, sizes) })
	for _, mode := range []Mode{ByOffset, ByRegion} {
		b.Run(mode.String(), func(b *testing.B) { benchStoreMode(b, mode, sizes) })
	}
}

// benchSize is a chunk size of BenchmarkStore.
type benchSize struct {
	name string
	n    uint64
}

// benchMemcpy is the memory ceiling: chunks copied into a 256 MiB buffer.
func benchMemcpy(b *testing.B, sizes []benchSize) {
	src, dst := make([]byte, 16<<20), make([]byte, benchObject)
	for _, sz := range sizes {
		b.Run(sz.name, func(b *testing.B) {
			b.SetBytes(int64(sz.n))
			var off uint64
			for b.Loop() {
				copy(dst[off:off+sz.n], src[:sz.n])
				off = (off + sz.n) % benchObject
			}
		})
	}
}

// benchFile is the file ceiling: chunks written and read with plain
// pwrite/pread of a 256 MiB file.
func benchFile(b *testing.B, sizes []benchSize) {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, 16<<20)
	for off := int64(0); off < benchObject; off += 16 << 20 {
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
	}
	for _, sz := range sizes {
		b.Run(sz.name, func(b *testing.B) {
			for _, op := range []string{"write", "read"} {
				b.Run(op, func(b *testing.B) {
					b.SetBytes(int64(sz.n))
					var off uint64
					for b.Loop() {
						var err error
						if op == "write" {
							_, err = f.WriteAt(buf[:sz.n], int64(off))
						} else {
							_, err = f.ReadAt(buf[:sz.n], int64(off))
						}
						if err != nil {
							b.Fatal(err)
						}
						off = (off + sz.n) % benchObject
					}
				})
			}
		})
	}
}

// benchStoreMode writes chunks to a fresh object and reads them from one
// written once, in one layout mode.
func benchStoreMode(b *testing.B, mode Mode, sizes []benchSize) {
	s := openStore(b, b.TempDir(), false)
	defer func() { _ = s.Close() }()
	l := Layout{Dims: []uint64{benchObject}, Elem: 1, Mode: mode}
	buf := randData(rand.New(rand.NewPCG(1, 2)), 16<<20)
	fill := func(obj uint64) {
		for off := uint64(0); off < benchObject; off += 16 << 20 {
			box := region.Box{Off: []uint64{off}, Size: []uint64{16 << 20}}
			if err := s.Write(obj, l, box, buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	fill(1)
	for i, sz := range sizes {
		b.Run(sz.name, func(b *testing.B) {
			b.Run("write", func(b *testing.B) {
				obj := uint64(10 + i)
				b.SetBytes(int64(sz.n))
				var off uint64
				for b.Loop() {
					box := region.Box{Off: []uint64{off}, Size: []uint64{sz.n}}
					if err := s.Write(obj, l, box, buf[:sz.n]); err != nil {
						b.Fatal(err)
					}
					off = (off + sz.n) % benchObject
				}
				b.StopTimer()
				if err := s.Delete(obj); err != nil {
					b.Fatal(err)
				}
			})
			b.Run("read", func(b *testing.B) {
				into := make([]byte, sz.n)
				b.SetBytes(int64(sz.n))
				var off uint64
				for b.Loop() {
					box := region.Box{Off: []uint64{off}, Size: []uint64{sz.n}}
					if err := s.Read(1, l, box, into); err != nil {
						b.Fatal(err)
					}
					off = (off + sz.n) % benchObject
				}
			})
		})
	}
}

// BenchmarkStrided reads and writes a column slab of a 2-D object, the
// case where runs are short: 4096x256 of 4096x4096, runs of half a block
// each in a block of its own; 65536x32 of 65536x64, eight runs to a block.
func BenchmarkStrided(b *testing.B) {
	cases := []struct {
		dims []uint64
		box  region.Box
	}{
		{[]uint64{4096, 4096}, region.Box{Off: []uint64{0, 1024}, Size: []uint64{4096, 256}}},
		{[]uint64{65536, 64}, region.Box{Off: []uint64{0, 16}, Size: []uint64{65536, 32}}},
	}
	for _, mode := range []Mode{ByOffset, ByRegion} {
		b.Run(mode.String(), func(b *testing.B) {
			s := openStore(b, b.TempDir(), false)
			defer func() { _ = s.Close() }()
			for i, c := range cases {
				obj := uint64(1 + i)
				l := Layout{Dims: c.dims, Elem: 8, Mode: mode}
				all := make([]byte, c.dims[0]*c.dims[1]*8)
				if err := s.Write(obj, l, region.Shape(l.Dims...), all); err != nil {
					b.Fatal(err)
				}
				box := c.box
				buf := make([]byte, box.Volume()*8)
				for _, op := range []string{"write", "read"} {
					name := fmt.Sprintf("%s-%dx%d", op, box.Size[0], box.Size[1])
					if i > 0 {
						name += fmt.Sprintf("of%d", c.dims[1])
					}
					b.Run(name, func(b *testing.B) {
						b.SetBytes(int64(len(buf)))
						for b.Loop() {
							var err error
							if op == "write" {
								err = s.Write(obj, l, box, buf)
							} else {
								err = s.Read(obj, l, box, buf)
							}
							if err != nil {
								b.Fatal(err)
							}
						}
					})
				}
			}
		})
	}
}
