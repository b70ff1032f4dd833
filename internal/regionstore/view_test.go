package regionstore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

func viewBytes(t *testing.T, s *Store, obj uint64, l Layout, box region.Box) []byte {
	t.Helper()
	v, err := s.View(obj, l, box)
	if err != nil {
		t.Fatalf("view %v: %v", box, err)
	}
	defer v.Release()
	var out []byte
	for _, b := range v.Segs {
		out = append(out, b...)
	}
	return out
}

// compareViews checks views of n random boxes of object obj, and of two
// more under one hold, against what Read reads.
func compareViews(t *testing.T, s *Store, r *rand.Rand, obj uint64, l Layout, n int) {
	t.Helper()
	read := func(box region.Box) []byte {
		want := make([]byte, box.Volume()*uint64(l.Elem))
		if err := s.Read(obj, l, box, want); err != nil {
			t.Fatal(err)
		}
		return want
	}
	for range n {
		box := randBoxIn(r, l.Dims)
		if got := viewBytes(t, s, obj, l, box); !bytes.Equal(got, read(box)) {
			t.Fatalf("dims %v: view of %v differs from read", l.Dims, box)
		}
	}
	// Two boxes under one hold: each gets its own segments.
	a, b := randBoxIn(r, l.Dims), randBoxIn(r, l.Dims)
	v, err := s.ViewAll(obj, l, []region.Box{a, b})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	segs := v.Segs
	for i, box := range []region.Box{a, b} {
		if got := bytes.Join(segs[:v.Lens[i]], nil); !bytes.Equal(got, read(box)) {
			t.Fatalf("dims %v: box %d (%v) of a view of two differs from read", l.Dims, i, box)
		}
		segs = segs[v.Lens[i]:]
	}
}

// A view of any box reads what Read reads: written parts, zeros where
// nothing was written, past the file's end and in an object never
// written; after the dims shrink and grow, and after more writes.
func TestViewMatchesRead(t *testing.T) {
	s := openStore(t, t.TempDir(), false)
	defer func() { _ = s.Close() }()
	r := rand.New(rand.NewPCG(5, 6))
	l := Layout{Dims: []uint64{40, 3000}, Elem: 4, Mode: ByOffset}
	if got := viewBytes(t, s, 9, l, region.Shape(40, 3000)); !bytes.Equal(got, make([]byte, 40*3000*4)) {
		t.Fatal("a view of an object never written is not all zeros")
	}
	compare := func(l Layout) {
		t.Helper()
		compareViews(t, s, r, 9, l, 60)
	}
	for range 5 {
		box := randBoxIn(r, l.Dims)
		if err := s.Write(9, l, box, randData(r, int(box.Volume())*l.Elem)); err != nil {
			t.Fatal(err)
		}
		compare(l)
	}
	l.Dims = []uint64{7, 3000} // cut: the file shrinks under the old mapping
	compare(l)
	l.Dims = []uint64{50, 3000}
	compare(l)
	l.Dims = []uint64{50, 1000} // relayout: the file is replaced
	compare(l)
	box := region.Box{Off: []uint64{45, 0}, Size: []uint64{5, 1000}}
	if err := s.Write(9, l, box, randData(r, 5*1000*4)); err != nil {
		t.Fatal(err) // the file grows past the mapping
	}
	compare(l)
}

func randBoxIn(r *rand.Rand, dims []uint64) region.Box {
	b := region.Box{Off: make([]uint64, len(dims)), Size: make([]uint64, len(dims))}
	for i, d := range dims {
		b.Off[i] = r.Uint64N(d)
		b.Size[i] = 1 + r.Uint64N(d-b.Off[i])
	}
	return b
}

// A flipped byte fails a view that touches its block with ErrCorrupt, and
// only such a view.
func TestViewCorruption(t *testing.T) {
	dir := t.TempDir()
	l := Layout{Dims: []uint64{4 << 20}, Elem: 1, Mode: ByOffset}
	s := openStore(t, dir, false)
	data := randData(rand.New(rand.NewPCG(3, 4)), 1<<20)
	if err := s.Write(5, l, region.Box{Off: []uint64{0}, Size: []uint64{1 << 20}}, data); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	flipByte(t, filepath.Join(dir, "0000000000000005.off"), offHeaderSize+tableBytes(tableFor(1<<20))+300_000)
	s = openStore(t, dir, false)
	defer func() { _ = s.Close() }()
	_, err := s.View(5, l, region.Box{Off: []uint64{300_001}, Size: []uint64{1}})
	if !errors.Is(err, pdc.ErrCorrupt) || !strings.Contains(err.Error(), "object 5") {
		t.Fatalf("view of a flipped block: %v, want ErrCorrupt naming object 5", err)
	}
	good := region.Box{Off: []uint64{0}, Size: []uint64{4 * blockSizeU()}}
	if got := viewBytes(t, s, 5, l, good); !bytes.Equal(got, data[:len(got)]) {
		t.Fatal("view of good blocks differs")
	}
	// The failed view let go of the object: a write goes through.
	if err := s.Write(5, l, good, data[:good.Size[0]]); err != nil {
		t.Fatal(err)
	}
}

// A view of an object stored by region reads what Read reads: the newest
// of overlapping writes, writes in place inside a stored piece, zeros where
// nothing was written, pieces clipped by a shrink, and two boxes under one
// hold; and a corrupt block of a piece fails the view.
func TestViewByRegionMatchesRead(t *testing.T) {
	s := openStore(t, t.TempDir(), false)
	defer func() { _ = s.Close() }()
	r := rand.New(rand.NewPCG(7, 8))
	l := Layout{Dims: []uint64{30, 2000}, Elem: 4, Mode: ByRegion}
	compare := func(l Layout) {
		t.Helper()
		compareViews(t, s, r, 3, l, 40)
	}
	for i := range 12 {
		box := randBoxIn(r, l.Dims)
		if i%3 == 2 {
			// Inside the last box: written in place.
			box = randBoxIn(r, box.Size)
		}
		if err := s.Write(3, l, box, randData(r, int(box.Volume())*l.Elem)); err != nil {
			t.Fatal(err)
		}
		compare(l)
	}
	// The same region written and read whole: one slice of the log.
	whole := region.Box{Off: []uint64{2, 0}, Size: []uint64{5, 2000}}
	data := randData(r, int(whole.Volume())*l.Elem)
	if err := s.Write(3, l, whole, data); err != nil {
		t.Fatal(err)
	}
	v, err := s.View(3, l, whole)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Segs) != 1 || !bytes.Equal(v.Segs[0], data) {
		t.Fatalf("view of a region written whole: %d slices; want 1 holding the bytes written", len(v.Segs))
	}
	v.Release()
	// Two boxes whose bytes follow each other in the log keep their own
	// slices.
	top := region.Box{Off: []uint64{2, 0}, Size: []uint64{2, 2000}}
	next := region.Box{Off: []uint64{4, 0}, Size: []uint64{2, 2000}}
	v, err = s.ViewAll(3, l, []region.Box{top, next})
	if err != nil {
		t.Fatal(err)
	}
	half := len(data) / 5 * 2
	if got := bytes.Join(v.Segs[:v.Lens[0]], nil); !bytes.Equal(got, data[:half]) {
		t.Fatalf("first of two adjacent boxes: %d bytes in %d slices; want the %d bytes written there", len(got), v.Lens[0], half)
	}
	if got := bytes.Join(v.Segs[v.Lens[0]:], nil); !bytes.Equal(got, data[half:2*half]) {
		t.Fatalf("second of two adjacent boxes: %d bytes; want the %d bytes written there", len(got), half)
	}
	v.Release()
	l.Dims = []uint64{10, 2000} // a shrink clips the pieces
	compare(l)
	l.Dims = []uint64{30, 2000} // and growing back shows zeros there
	compare(l)

	// A corrupt block of a piece fails the view. The payload of the last
	// record ends the log.
	if err := s.Write(4, l, whole, data); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.opts.Dir, fmt.Sprintf("%016x.reg", 4))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err == nil {
		_, err = f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, st.Size()-8)
	}
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.View(4, l, whole); !errors.Is(err, pdc.ErrCorrupt) {
		t.Fatalf("view over a corrupt block: %v; want ErrCorrupt", err)
	}
}

// A view holds no lock: a write, and a cut of the object, go through
// while one is held, and the view is released after.
func TestViewHoldsNoLock(t *testing.T) {
	s := openStore(t, t.TempDir(), false)
	defer func() { _ = s.Close() }()
	l := Layout{Dims: []uint64{1 << 20}, Elem: 1, Mode: ByOffset}
	data := randData(rand.New(rand.NewPCG(1, 2)), 1<<20)
	if err := s.Write(2, l, region.Shape(1<<20), data); err != nil {
		t.Fatal(err)
	}
	v, err := s.View(2, l, region.Shape(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.Join(v.Segs, nil), data) {
		t.Fatal("view differs from what was written")
	}
	if err := s.Write(2, l, region.Box{Off: []uint64{0}, Size: []uint64{10}}, make([]byte, 10)); err != nil {
		t.Fatal(err) // hangs if the view held the object
	}
	small := Layout{Dims: []uint64{1000}, Elem: 1, Mode: ByOffset}
	if err := s.Write(2, small, region.Shape(10), make([]byte, 10)); err != nil {
		t.Fatal(err) // the file is cut under the held mapping
	}
	v.Release() // unmaps the cut file's old mapping; no fault
	if got := viewBytes(t, s, 2, small, region.Shape(1000)); !bytes.Equal(got[10:], data[10:1000]) {
		t.Fatal("view after the cut differs")
	}
}

// Dims older than those applied, that would cut the object, are refused.
func TestViewRefusesOlderDims(t *testing.T) {
	s := openStore(t, t.TempDir(), false)
	defer func() { _ = s.Close() }()
	newer := Layout{Dims: []uint64{200}, Elem: 1, Mode: ByOffset, Version: 2}
	data := randData(rand.New(rand.NewPCG(1, 3)), 200)
	if err := s.Write(4, newer, region.Shape(200), data); err != nil {
		t.Fatal(err)
	}
	older := Layout{Dims: []uint64{100}, Elem: 1, Mode: ByOffset, Version: 1}
	if _, err := s.View(4, older, region.Shape(10)); !errors.Is(err, pdc.ErrStale) {
		t.Fatalf("view with older dims: %v, want ErrStale", err)
	}
	if err := s.Read(4, older, region.Shape(10), make([]byte, 10)); !errors.Is(err, pdc.ErrStale) {
		t.Fatalf("read with older dims: %v, want ErrStale", err)
	}
	if err := s.Write(4, older, region.Shape(10), make([]byte, 10)); !errors.Is(err, pdc.ErrStale) {
		t.Fatalf("write with older dims: %v, want ErrStale", err)
	}
	if got := viewBytes(t, s, 4, newer, region.Shape(200)); !bytes.Equal(got, data) {
		t.Fatal("the object lost data to older dims")
	}
}

// Mappings no view uses are kept for only so many objects.
func TestIdleMappingsAreBounded(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, false)
	defer func() { _ = s.Close() }()
	l := Layout{Dims: []uint64{4096}, Elem: 1, Mode: ByOffset}
	for obj := uint64(1); obj <= maxIdleMaps+100; obj++ {
		if err := s.Write(obj, l, region.Shape(4096), make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
		viewBytes(t, s, obj, l, region.Shape(4096))
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps to count mappings in")
	}
	if n := strings.Count(string(maps), dir); n > maxIdleMaps {
		t.Fatalf("%d mappings of the store's files after viewing %d objects, want at most %d", n, maxIdleMaps+100, maxIdleMaps)
	}
}

func TestBlockRange(t *testing.T) {
	var r blockRange
	if r.has(0) {
		t.Fatal("an empty range has block 0")
	}
	for _, b := range []int64{5, 6, 7, 4} {
		r.add(b)
	}
	for b := int64(3); b <= 8; b++ {
		if want := b >= 4 && b <= 7; r.has(b) != want {
			t.Fatalf("after 5, 6, 7, 4: has(%d) = %v", b, !want)
		}
	}
	r.add(20) // not next to the run: it starts again
	if r.has(5) || !r.has(20) {
		t.Fatal("a block away from the run did not start a new one")
	}
}
