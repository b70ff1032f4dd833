package regionstore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

func files(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestModeMismatch(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, false)
	l := Layout{Dims: []uint64{8}, Elem: 2, Mode: ByRegion}
	if err := s.Write(3, l, region.Shape(8), make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		off := l
		off.Mode = ByOffset
		err := s.Write(3, off, region.Shape(8), make([]byte, 16))
		if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "object 3") ||
			!strings.Contains(err.Error(), "region") || !strings.Contains(err.Error(), "offset") {
			t.Fatalf("write by offset to an object stored by region: %v", err)
		}
		if err := s.Read(3, off, region.Shape(8), make([]byte, 16)); !errors.Is(err, pdc.ErrInvalid) {
			t.Fatalf("read by offset of an object stored by region: %v", err)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check(openStore(t, dir, false)) // the mode comes back from the files
}

func TestElemMismatch(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, false)
			defer func() { _ = s.Close() }()
			l := Layout{Dims: []uint64{8}, Elem: 2, Mode: mode}
			if err := s.Write(4, l, region.Shape(8), make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
			l.Elem = 4
			err := s.Write(4, l, region.Shape(8), make([]byte, 32))
			if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "object 4") {
				t.Fatalf("write with another element size: %v", err)
			}
			l.Elem, l.Dims = 2, []uint64{2, 4}
			if err := s.Read(4, l, region.Shape(2, 4), make([]byte, 16)); !errors.Is(err, pdc.ErrInvalid) {
				t.Fatalf("read with another number of dims: %v", err)
			}
		})
	}
}

func TestNeverWritten(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, false)
	defer func() { _ = s.Close() }()
	for _, mode := range []Mode{ByOffset, ByRegion} {
		got := bytes.Repeat([]byte{7}, 24)
		if err := s.Read(11, Layout{Dims: []uint64{2, 3}, Elem: 4, Mode: mode}, region.Shape(2, 3), got); err != nil {
			t.Fatal(err)
		}
		if !allZero(got) {
			t.Fatalf("never-written object read %v", got)
		}
	}
	if err := s.Flush(11); err != nil {
		t.Fatalf("flush of a never-written object: %v", err)
	}
	if n, err := s.Bytes(11); err != nil || n != 0 {
		t.Fatalf("bytes of a never-written object: %d, %v", n, err)
	}
	if names := files(t, dir); len(names) != 0 {
		t.Fatalf("reading created %v", names)
	}
}

func TestDelete(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, true)
			defer func() { _ = s.Close() }()
			l := Layout{Dims: []uint64{1000}, Elem: 8, Mode: mode}
			if err := s.Write(6, l, region.Shape(1000), randData(rand.New(rand.NewPCG(1, 1)), 8000)); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(6); err != nil {
				t.Fatal(err)
			}
			if n, err := s.Bytes(6); err != nil || n < 8000 {
				t.Fatalf("bytes of an 8000-byte object: %d, %v", n, err)
			}
			if err := s.Delete(6); err != nil {
				t.Fatal(err)
			}
			if names := files(t, dir); len(names) != 0 {
				t.Fatalf("delete left %v", names)
			}
			if err := s.Delete(6); err != nil {
				t.Fatalf("second delete: %v", err)
			}
			got := make([]byte, 8000)
			if err := s.Read(6, l, region.Shape(1000), got); err != nil || !allZero(got) {
				t.Fatalf("read after delete: %v", err)
			}
			// The object can come back, even in the other mode.
			l.Mode = ByOffset + ByRegion - mode
			if err := s.Write(6, l, region.Shape(1), make([]byte, 8)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestClosed(t *testing.T) {
	s := openStore(t, t.TempDir(), false)
	l := Layout{Dims: []uint64{4}, Elem: 1, Mode: ByOffset}
	if err := s.Write(1, l, region.Shape(4), []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	for name, err := range map[string]error{
		"write":  s.Write(1, l, region.Shape(4), []byte{1, 2, 3, 4}),
		"read":   s.Read(1, l, region.Shape(4), make([]byte, 4)),
		"flush":  s.Flush(1),
		"delete": s.Delete(1),
	} {
		if !errors.Is(err, pdc.ErrClosed) {
			t.Errorf("%s after close: %v, want ErrClosed", name, err)
		}
	}
	if _, err := s.Bytes(1); !errors.Is(err, pdc.ErrClosed) {
		t.Errorf("bytes after close: %v, want ErrClosed", err)
	}
}

func TestBadCalls(t *testing.T) {
	s := openStore(t, t.TempDir(), false)
	defer func() { _ = s.Close() }()
	l := Layout{Dims: []uint64{4}, Elem: 1, Mode: ByOffset}
	if err := s.Write(1, l, region.Shape(5), make([]byte, 5)); !errors.Is(err, pdc.ErrOutOfRange) {
		t.Errorf("write past the dims: %v", err)
	}
	if err := s.Write(1, l, region.Shape(4), make([]byte, 3)); !errors.Is(err, pdc.ErrInvalid) {
		t.Errorf("write of a short buffer: %v", err)
	}
	l.Mode = 9
	if err := s.Write(1, l, region.Shape(4), make([]byte, 4)); !errors.Is(err, pdc.ErrInvalid) {
		t.Errorf("write with mode 9: %v", err)
	}
	if _, err := Open(Options{}); !errors.Is(err, pdc.ErrInvalid) {
		t.Errorf("open without a dir: %v", err)
	}
}

// Changing trailing dims of a large by-offset object moves its data in
// chunks; growing the first dim past the checksum table moves it once.
func TestRelayoutLarge(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, false)
	defer func() { _ = s.Close() }()
	r := rand.New(rand.NewPCG(5, 5))
	l := Layout{Dims: []uint64{3000, 1000}, Elem: 2, Mode: ByOffset}
	data := randData(r, 3000*1000*2)
	if err := s.Write(1, l, region.Shape(l.Dims...), data); err != nil {
		t.Fatal(err)
	}
	nl := l
	nl.Dims = []uint64{3000, 999}
	got := make([]byte, 3000*999*2)
	if err := s.Read(1, nl, region.Shape(nl.Dims...), got); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, len(got))
	_ = region.Copy(want, region.Shape(nl.Dims...), data, region.Shape(l.Dims...), region.Shape(nl.Dims...), 2)
	if !bytes.Equal(got, want) {
		t.Fatalf("after relayout the object differs at byte %d", firstDiff(got, want))
	}
	// Past the table (sized for 1 GiB at first, more for this object):
	// the file is rewritten with a larger one.
	nl.Dims = []uint64{1 << 30, 999}
	far := region.Box{Off: []uint64{1 << 20, 0}, Size: []uint64{1, 999}}
	row := randData(r, 999*2)
	if err := s.Write(1, nl, far, row); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, len(row))
	if err := s.Read(1, nl, far, back); err != nil || !bytes.Equal(back, row) {
		t.Fatalf("far row: %v", err)
	}
	if err := s.Read(1, nl, region.Shape(3000, 999), got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the table grew: %v (differs at %d)", err, firstDiff(got, want))
	}
	if n, err := s.Bytes(1); err != nil || n > 3*int64(len(data)) {
		t.Fatalf("the grown file takes %d bytes on disk (%v): holes were filled", n, err)
	}
}

// More objects than the open-file limit: the cache closes idle files and
// reopens them on demand.
func TestManyObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 300 files")
	}
	s := openStore(t, t.TempDir(), false)
	defer func() { _ = s.Close() }()
	for _, mode := range []Mode{ByOffset, ByRegion} {
		l := Layout{Dims: []uint64{16}, Elem: 1, Mode: mode}
		base := uint64(mode) * 1000
		for obj := base; obj < base+300; obj++ {
			if err := s.Write(obj, l, region.Shape(16), bytes.Repeat([]byte{byte(obj)}, 16)); err != nil {
				t.Fatal(err)
			}
			if n := s.files.open(); n > maxOpenFiles {
				t.Fatalf("%d files open", n)
			}
		}
		for obj := base; obj < base+300; obj++ {
			got := make([]byte, 16)
			if err := s.Read(obj, l, region.Shape(16), got); err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte(obj)}, 16)) {
				t.Fatalf("object %d: %v %v", obj, got, err)
			}
		}
	}
}

// Writers of different objects and readers of one object, all at once;
// run under -race.
func TestConcurrent(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			s := openStore(t, t.TempDir(), false)
			defer func() { _ = s.Close() }()
			l := Layout{Dims: []uint64{64, 64}, Elem: 4, Mode: mode}
			var wg sync.WaitGroup
			errs := make(chan error, 100)
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					obj := uint64(g)
					r := rand.New(rand.NewPCG(uint64(g), 9))
					m := make([]byte, 64*64*4)
					for i := range 50 {
						box := randBox(r, 2, 64)
						data := randData(r, int(box.Volume())*4)
						if err := s.Write(obj, l, box, data); err != nil {
							errs <- err
							return
						}
						_ = region.Copy(m, region.Shape(64, 64), data, box, box, 4)
						if i%10 == 0 {
							got := make([]byte, len(m))
							if err := s.Read(obj, l, region.Shape(64, 64), got); err != nil {
								errs <- err
								return
							}
							if !bytes.Equal(got, m) {
								errs <- fmt.Errorf("object %d differs at %d", obj, firstDiff(got, m))
								return
							}
						}
					}
				}()
			}
			shared := randData(rand.New(rand.NewPCG(1, 1)), 64*64*4)
			if err := s.Write(100, l, region.Shape(64, 64), shared); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got := make([]byte, len(shared))
					for range 50 {
						if err := s.Read(100, l, region.Shape(64, 64), got); err != nil {
							errs <- err
							return
						}
						if !bytes.Equal(got, shared) {
							errs <- errors.New("shared object differs")
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// In-place writes rewrite a piece's payload instead of growing the log.
func TestInPlace(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, false)
	l := Layout{Dims: []uint64{100, 100}, Elem: 8, Mode: ByRegion}
	r := rand.New(rand.NewPCG(2, 2))
	all := randData(r, 100*100*8)
	if err := s.Write(1, l, region.Shape(100, 100), all); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "0000000000000001.reg")
	size := fileSize(t, path)
	for range 20 {
		box := randBox(r, 2, 100)
		data := randData(r, int(box.Volume())*8)
		if err := s.Write(1, l, box, data); err != nil {
			t.Fatal(err)
		}
		_ = region.Copy(all, region.Shape(100, 100), data, box, box, 8)
	}
	if got := fileSize(t, path); got != size {
		t.Fatalf("writes inside the one piece grew the log from %d to %d bytes", size, got)
	}
	crash(s)
	s = openStore(t, dir, false)
	defer func() { _ = s.Close() }()
	got := make([]byte, len(all))
	if err := s.Read(1, l, region.Shape(100, 100), got); err != nil || !bytes.Equal(got, all) {
		t.Fatalf("after in-place writes and a crash: %v (differs at %d)", err, firstDiff(got, all))
	}
}

// One element written at the far corner of an 8 TiB object stored by
// offset: the store's memory and work follow what was written, not the
// object's extent, through a write, a reopen and a cut.
func TestSparseFarCorner(t *testing.T) {
	dir := t.TempDir()
	l := Layout{Dims: []uint64{1 << 20, 1 << 20}, Elem: 8, Mode: ByOffset}
	corner := region.Box{Off: []uint64{1<<20 - 1, 1<<20 - 1}, Size: []uint64{1, 1}}
	want := []byte("farthest")
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	s := openStore(t, dir, false)
	if err := s.Write(9, l, corner, want); err != nil {
		if errors.Is(err, syscall.EFBIG) {
			t.Skipf("the file system of %s cannot hold an 8 TiB sparse file: %v", dir, err)
		}
		t.Fatal(err)
	}
	check := func(s *Store, box region.Box, want []byte) {
		t.Helper()
		got := make([]byte, 8)
		if err := s.Read(9, l, box, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read %v: %q, want %q", box, got, want)
		}
	}
	zeros := make([]byte, 8)
	check(s, corner, want)
	check(s, region.Box{Off: []uint64{1 << 19, 7}, Size: []uint64{1, 1}}, zeros)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, false)
	check(s, corner, want)
	// Shrinking the first dim cuts the data past it; growing it back reads
	// zeros there.
	l.Dims[0] = 1 << 19
	check(s, region.Box{Off: []uint64{1<<19 - 1, 1<<20 - 1}, Size: []uint64{1, 1}}, zeros)
	l.Dims[0] = 1 << 20
	check(s, corner, zeros)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Fatalf("the store allocated %d MiB for one element of a sparse object", got>>20)
	}
}

// A write spanning several stored pieces, each of its rows inside one of
// them with nothing newer over it, goes in place piece by piece, from
// memory and from a stream, in 1-D and 2-D; one spanning a hole or a
// newer partial piece is appended. Every read matches the writes, also
// after a crash. (The data server merges adjacent regions of a request
// into one write; before, writing the same regions again in other runs
// appended them all.)
func TestInPlaceAcrossPieces(t *testing.T) {
	for _, dims := range [][]uint64{{120}, {120, 7}} {
		t.Run(fmt.Sprint(len(dims), "d"), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, false)
			l := Layout{Dims: dims, Elem: 4, Mode: ByRegion}
			r := rand.New(rand.NewPCG(3, uint64(len(dims))))
			whole := region.Shape(dims...)
			row := int(whole.Volume()/dims[0]) * 4
			all := make([]byte, int(whole.Volume())*4)
			rows := func(lo, hi uint64) region.Box {
				b := whole.Clone()
				b.Off[0], b.Size[0] = lo, hi-lo
				return b
			}
			put := func(lo, hi uint64, stream bool) {
				t.Helper()
				box := rows(lo, hi)
				data := randData(r, int(hi-lo)*row)
				var err error
				if stream {
					err = s.WriteFrom(1, l, box, bytes.NewReader(data), make([]byte, 1<<20))
				} else {
					err = s.Write(1, l, box, data)
				}
				if err != nil {
					t.Fatal(err)
				}
				copy(all[int(lo)*row:], data)
			}
			// Pieces of 10 rows each over rows 0-99; rows 100-119 never written.
			for lo := uint64(0); lo < 100; lo += 10 {
				put(lo, lo+10, false)
			}
			path := filepath.Join(dir, "0000000000000001.reg")
			size := fileSize(t, path)
			put(0, 30, false)
			put(30, 100, true)
			put(5, 25, true)
			put(37, 61, false)
			if got := fileSize(t, path); got != size {
				t.Fatalf("writes over stored pieces grew the log from %d to %d bytes", size, got)
			}
			put(95, 110, true) // over the hole at 100
			grown := fileSize(t, path)
			if grown == size {
				t.Fatal("a write over a hole was not appended")
			}
			put(50, 52, false)  // newer, inside piece 50-59: in place
			put(45, 55, true)   // rows 45-49 in one piece, 50-54 in another
			put(96, 105, false) // inside the appended piece 95-109
			if got := fileSize(t, path); got != grown {
				t.Fatalf("writes over stored pieces grew the log from %d to %d bytes", grown, got)
			}
			// Rows 95-97 are under the newer piece 95-109 only in part.
			put(88, 98, true)
			if got := fileSize(t, path); got == grown {
				t.Fatal("a write under a newer partial piece was not appended")
			}
			put(0, 120, false)
			put(1, 119, true)
			check := func(when string) {
				t.Helper()
				got := make([]byte, len(all))
				if err := s.Read(1, l, whole, got); err != nil || !bytes.Equal(got, all) {
					t.Fatalf("%s: %v (differs at byte %d)", when, err, firstDiff(got, all))
				}
			}
			check("after the writes")
			crash(s)
			s = openStore(t, dir, false)
			defer func() { _ = s.Close() }()
			check("after a crash")
		})
	}
}
