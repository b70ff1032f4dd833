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
	sizes := []struct {
		name string
		n    uint64
	}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}}
	// Ceilings: memcpy into a 256 MiB buffer, and pwrite/pread of a
	// 256 MiB file, with the same chunks.
	b.Run("memcpy", func(b *testing.B) {
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
	})
	b.Run("file", func(b *testing.B) {
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
	})
	for _, mode := range []Mode{ByOffset, ByRegion} {
		b.Run(mode.String(), func(b *testing.B) {
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
		})
	}
}

// BenchmarkStrided reads and writes a column slab of a 2-D object, the
// case where runs are short and blocks are shared between them.
func BenchmarkStrided(b *testing.B) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		b.Run(mode.String(), func(b *testing.B) {
			s := openStore(b, b.TempDir(), false)
			defer func() { _ = s.Close() }()
			l := Layout{Dims: []uint64{4096, 4096}, Elem: 8, Mode: mode}
			all := make([]byte, 4096*4096*8)
			if err := s.Write(1, l, region.Shape(l.Dims...), all); err != nil {
				b.Fatal(err)
			}
			box := region.Box{Off: []uint64{0, 1024}, Size: []uint64{4096, 256}}
			buf := make([]byte, box.Volume()*8)
			for _, op := range []string{"write", "read"} {
				b.Run(fmt.Sprintf("%s-4096x256", op), func(b *testing.B) {
					b.SetBytes(int64(len(buf)))
					for b.Loop() {
						var err error
						if op == "write" {
							err = s.Write(1, l, box, buf)
						} else {
							err = s.Read(1, l, box, buf)
						}
						if err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
