package region

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
)

// cells lists every coordinate of b in row-major order: the naive version
// the box math is checked against.
func cells(b Box) [][]uint64 {
	var out [][]uint64
	c := slices.Clone(b.Off)
	for {
		out = append(out, slices.Clone(c))
		i := len(c) - 1
		for ; i >= 0; i-- {
			c[i]++
			if c[i] < b.End(i) {
				break
			}
			c[i] = b.Off[i]
		}
		if i < 0 {
			return out
		}
	}
}

func inside(b Box, c []uint64) bool {
	for i := range c {
		if c[i] < b.Off[i] || c[i] >= b.End(i) {
			return false
		}
	}
	return true
}

func randBox(r *rand.Rand, n int, span uint64) Box {
	b := Box{Off: make([]uint64, n), Size: make([]uint64, n)}
	for i := range n {
		b.Off[i] = r.Uint64N(span)
		b.Size[i] = 1 + r.Uint64N(span-b.Off[i])
	}
	return b
}

// randSub is a random box inside b.
func randSub(r *rand.Rand, b Box) Box {
	s := Box{Off: make([]uint64, len(b.Size)), Size: make([]uint64, len(b.Size))}
	for i := range b.Size {
		s.Off[i] = b.Off[i] + r.Uint64N(b.Size[i])
		s.Size[i] = 1 + r.Uint64N(b.End(i)-s.Off[i])
	}
	return s
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		b    Box
		want error
		msg  string
	}{
		{Box{}, pdc.ErrInvalid, "0 dimensions"},
		{Shape(make([]uint64, 33)...), pdc.ErrInvalid, "33 dimensions"},
		{Box{Off: []uint64{0}, Size: []uint64{1, 2}}, pdc.ErrInvalid, "1 offsets and 2 sizes"},
		{Shape(4, 0, 4), pdc.ErrInvalid, "dimension 1 is empty"},
		{Box{Off: []uint64{math.MaxUint64}, Size: []uint64{2}}, pdc.ErrOutOfRange, "past 2^64"},
		{Shape(1<<32, 1<<32, 2), pdc.ErrOutOfRange, "more than 2^64"},
	} {
		err := c.b.Check()
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: got %v, want %v naming %q", c.b, err, c.want, c.msg)
		}
	}
	if err := Shape(make32()...).Check(); err != nil {
		t.Errorf("32 dimensions: %v", err)
	}
}

func make32() []uint64 {
	d := make([]uint64, 32)
	for i := range d {
		d[i] = 2
	}
	return d
}

func TestWithin(t *testing.T) {
	dims := []uint64{10, 20}
	b, _ := New([]uint64{5, 10}, []uint64{5, 10})
	if err := b.Within(dims); err != nil {
		t.Fatal(err)
	}
	b.Size[1] = 11
	if err := b.Within(dims); !errors.Is(err, ErrOutside) || !errors.Is(err, pdc.ErrOutOfRange) || !strings.Contains(err.Error(), "dimension 1") {
		t.Fatalf("past the end: %v", err)
	}
	if err := Shape(1, 1, 1).Within(dims); !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "3 dimensions") {
		t.Fatalf("ndim mismatch: %v", err)
	}
}

// Intersect and Contains agree with the naive cell sets.
func TestIntersectContains(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + r.IntN(4)
		a, b := randBox(r, n, 7), randBox(r, n, 7)
		got, ok := Intersect(a, b)
		var want [][]uint64
		for _, c := range cells(a) {
			if inside(b, c) {
				want = append(want, c)
			}
		}
		if ok != (len(want) > 0) {
			t.Fatalf("%v ∩ %v: ok %v, %d common cells", a, b, ok, len(want))
		}
		if ok && !slices.EqualFunc(cells(got), want, slices.Equal) {
			t.Fatalf("%v ∩ %v = %v, cells differ", a, b, got)
		}
		contains := true
		for _, c := range cells(b) {
			contains = contains && inside(a, c)
		}
		if a.Contains(b) != contains {
			t.Fatalf("%v contains %v: %v, naive %v", a, b, a.Contains(b), contains)
		}
	}
	if _, ok := Intersect(Shape(2), Shape(2, 2)); ok {
		t.Fatal("boxes of different dimensions intersect")
	}
}

func TestLinearize(t *testing.T) {
	dims := []uint64{3, 4, 5}
	var c []uint64
	for idx, cell := range cells(Shape(dims...)) {
		if got := Linearize(dims, cell); got != uint64(idx) {
			t.Fatalf("Linearize(%v) = %d, want %d", cell, got, idx)
		}
		if c = Delinearize(dims, uint64(idx), c); !slices.Equal(c, cell) {
			t.Fatalf("Delinearize(%d) = %v, want %v", idx, c, cell)
		}
	}
}

// Blocks cover the box exactly, each piece inside its cell.
func TestBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		n := 1 + r.IntN(3)
		b := randBox(r, n, 12)
		block := make([]uint64, n)
		for i := range block {
			block[i] = 1 + r.Uint64N(5)
		}
		seen := map[string]int{}
		err := b.Blocks(block, func(cell []uint64, piece Box) bool {
			cellBox := Box{Off: make([]uint64, n), Size: block}
			for i := range cell {
				cellBox.Off[i] = cell[i] * block[i]
			}
			if !cellBox.Contains(piece) || !b.Contains(piece) {
				t.Fatalf("%v in blocks %v: piece %v outside cell %v or the box", b, block, piece, cellBox)
			}
			for _, c := range cells(piece) {
				seen[string(fmtCell(c))]++
			}
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cells(b) {
			if seen[string(fmtCell(c))] != 1 {
				t.Fatalf("%v in blocks %v: cell %v covered %d times", b, block, c, seen[string(fmtCell(c))])
			}
		}
		if len(seen) != int(b.Volume()) {
			t.Fatalf("%v in blocks %v: %d cells covered, volume %d", b, block, len(seen), b.Volume())
		}
	}
	if err := Shape(4).Blocks([]uint64{0}, func([]uint64, Box) bool { return true }); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("empty block: %v", err)
	}
}

func fmtCell(c []uint64) []byte {
	var b []byte
	for _, v := range c {
		b = append(b, byte(v), byte(v>>8), ',')
	}
	return b
}

// Split cuts into disjoint, covering pieces of nearly equal volume.
func TestSplit(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		b := randBox(r, 1+r.IntN(3), 10)
		parts := 1 + r.IntN(6)
		pieces := b.Split(parts)
		if len(pieces) > parts || len(pieces) == 0 {
			t.Fatalf("%v split %d ways: %d pieces", b, parts, len(pieces))
		}
		var vol uint64
		lo, hi := uint64(math.MaxUint64), uint64(0)
		for i, p := range pieces {
			if !b.Contains(p) {
				t.Fatalf("%v: piece %v outside", b, p)
			}
			for _, q := range pieces[i+1:] {
				if _, ok := Intersect(p, q); ok {
					t.Fatalf("%v: pieces %v and %v overlap", b, p, q)
				}
			}
			vol += p.Volume()
			lo, hi = min(lo, p.Volume()), max(hi, p.Volume())
		}
		if vol != b.Volume() {
			t.Fatalf("%v: pieces hold %d of %d cells", b, vol, b.Volume())
		}
		if len(pieces) > 1 && hi-lo > hi/uint64(len(pieces))+b.Volume()/b.Size[0] {
			t.Fatalf("%v split %d ways: volumes from %d to %d", b, parts, lo, hi)
		}
	}
}

// Runs are the naive sorted linear offsets of sub's cells, merged.
func TestRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		outer := randBox(r, 1+r.IntN(4), 6)
		sub := randSub(r, outer)
		var want []uint64
		for _, c := range cells(sub) {
			rel := make([]uint64, len(c))
			for i := range c {
				rel[i] = c[i] - outer.Off[i]
			}
			want = append(want, Linearize(outer.Size, rel))
		}
		var got []uint64
		var prev *Run
		Runs(outer, sub, func(run Run) bool {
			if prev != nil && prev.Off+prev.Len >= run.Off {
				t.Fatalf("%v in %v: runs %v and %v touch or overlap (not merged or out of order)", sub, outer, *prev, run)
			}
			for k := range run.Len {
				got = append(got, run.Off+k)
			}
			prev = &run
			return true
		})
		if !slices.Equal(got, want) {
			t.Fatalf("%v in %v: runs cover %v, want %v", sub, outer, got, want)
		}
	}
	// A box that spans whole rows is one run.
	n := 0
	Runs(Shape(4, 8, 8), Box{Off: []uint64{1, 0, 0}, Size: []uint64{2, 8, 8}}, func(r Run) bool {
		n++
		if r.Off != 64 || r.Len != 128 {
			t.Fatalf("whole rows: run %v", r)
		}
		return true
	})
	if n != 1 {
		t.Fatalf("whole rows: %d runs", n)
	}
}

// naiveCopy copies cell by cell.
func naiveCopy(dst []byte, dstBox Box, src []byte, srcBox Box, sub Box, elem int) {
	rel := func(b Box, c []uint64) uint64 {
		r := make([]uint64, len(c))
		for i := range c {
			r[i] = c[i] - b.Off[i]
		}
		return Linearize(b.Size, r) * uint64(elem)
	}
	for _, c := range cells(sub) {
		copy(dst[rel(dstBox, c):rel(dstBox, c)+uint64(elem)], src[rel(srcBox, c):rel(srcBox, c)+uint64(elem)])
	}
}

func TestCopy(t *testing.T) {
	testCopy(t, 2000, 1, 4, 6)
}

// Boxes of more dims than the run walker keeps in place take its other
// path.
func TestCopyManyDims(t *testing.T) {
	testCopy(t, 100, 9, 12, 3)
}

func testCopy(t *testing.T, rounds, minDims, maxDims int, span uint64) {
	r := rand.New(rand.NewPCG(9, 10))
	for range rounds {
		n := minDims + r.IntN(maxDims-minDims+1)
		sub := randBox(r, n, span)
		grow := func() Box {
			b := sub.Clone()
			for i := range b.Size {
				lo := r.Uint64N(b.Off[i] + 1)
				b.Size[i] += b.Off[i] - lo + r.Uint64N(3)
				b.Off[i] = lo
			}
			return b
		}
		srcBox, dstBox := grow(), grow()
		elem := []int{1, 3, 8}[r.IntN(3)]
		src := make([]byte, srcBox.Volume()*uint64(elem))
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		got := make([]byte, dstBox.Volume()*uint64(elem))
		want := make([]byte, len(got))
		if err := Copy(got, dstBox, src, srcBox, sub, elem); err != nil {
			t.Fatal(err)
		}
		naiveCopy(want, dstBox, src, srcBox, sub, elem)
		if !bytes.Equal(got, want) {
			t.Fatalf("copy %v from %v to %v (%d-byte elements) differs from cell by cell", sub, srcBox, dstBox, elem)
		}
	}
}

func TestCopyErrors(t *testing.T) {
	buf := make([]byte, 64)
	for _, c := range []struct {
		dst, src, sub Box
		dstBuf        []byte
		elem          int
		want          error
		msg           string
	}{
		{Shape(8), Shape(8), Shape(9), buf, 1, pdc.ErrOutOfRange, "not inside the source"},
		{Shape(4), Shape(8), Shape(8), buf, 1, pdc.ErrOutOfRange, "not inside the destination"},
		{Shape(8), Shape(8), Shape(8), buf[:7], 1, pdc.ErrInvalid, "7-byte buffer"},
		{Shape(8), Shape(8), Shape(8), buf, 0, pdc.ErrInvalid, "element size 0"},
		{Shape(8), Shape(2, 4), Shape(8), buf, 1, pdc.ErrOutOfRange, "not inside"},
	} {
		err := Copy(c.dstBuf, c.dst, buf, c.src, c.sub, c.elem)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("got %v, want %v naming %q", err, c.want, c.msg)
		}
	}
}

// FuzzCopy checks Copy against the cell-by-cell copy for boxes read from
// the input.
func FuzzCopy(f *testing.F) {
	f.Add([]byte{2, 3, 1, 2, 2, 0, 1, 1, 3})
	f.Add([]byte{1, 9, 0, 1, 4, 2, 5})
	f.Add([]byte{3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 2 {
			return
		}
		n := 1 + int(in[0])%4
		elem := 1 + int(in[1])%8
		in = in[2:]
		next := func() uint64 {
			if len(in) == 0 {
				return 0
			}
			v := uint64(in[0]) % 5
			in = in[1:]
			return v
		}
		sub := Box{Off: make([]uint64, n), Size: make([]uint64, n)}
		srcBox, dstBox := sub.Clone(), sub.Clone()
		for i := range n {
			sub.Off[i], sub.Size[i] = next(), 1+next()
			srcBox.Off[i] = sub.Off[i] - min(sub.Off[i], next())
			srcBox.Size[i] = sub.End(i) - srcBox.Off[i] + next()
			dstBox.Off[i] = sub.Off[i] - min(sub.Off[i], next())
			dstBox.Size[i] = sub.End(i) - dstBox.Off[i] + next()
		}
		src := make([]byte, srcBox.Volume()*uint64(elem))
		for i := range src {
			src[i] = byte(i*7 + 1)
		}
		got := make([]byte, dstBox.Volume()*uint64(elem))
		want := make([]byte, len(got))
		if err := Copy(got, dstBox, src, srcBox, sub, elem); err != nil {
			t.Fatal(err)
		}
		naiveCopy(want, dstBox, src, srcBox, sub, elem)
		if !bytes.Equal(got, want) {
			t.Fatalf("copy %v from %v to %v differs", sub, srcBox, dstBox)
		}
	})
}

// BenchmarkCopy copies a 1024x1024 float32 sub-box out of a 2048x2048
// buffer, next to a memcpy of the same bytes.
func BenchmarkCopy(b *testing.B) {
	src := make([]byte, 2048*2048*4)
	srcBox := Shape(2048, 2048)
	sub := Box{Off: []uint64{512, 512}, Size: []uint64{1024, 1024}}
	dst := make([]byte, 1024*1024*4)
	dstBox := sub
	b.Run("region.Copy", func(b *testing.B) {
		b.SetBytes(int64(len(dst)))
		for b.Loop() {
			if err := Copy(dst, dstBox, src, srcBox, sub, 4); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("memcpy", func(b *testing.B) {
		b.SetBytes(int64(len(dst)))
		for b.Loop() {
			copy(dst, src[:len(dst)])
		}
	})
}

// Subtract leaves exactly the cells of a outside b, in disjoint boxes.
func TestSubtract(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 2000 {
		n := 1 + r.IntN(4)
		a, b := randBox(r, n, 7), randBox(r, n, 7)
		parts := Subtract(a, b)
		if len(parts) > 2*n {
			t.Fatalf("%v - %v: %d parts", a, b, len(parts))
		}
		seen := map[string]int{}
		for _, p := range parts {
			if err := p.Check(); err != nil {
				t.Fatalf("%v - %v: part %v: %v", a, b, p, err)
			}
			for _, c := range cells(p) {
				seen[string(fmtCell(c))]++
			}
		}
		for _, c := range cells(a) {
			want := 0
			if !inside(b, c) {
				want = 1
			}
			if seen[string(fmtCell(c))] != want {
				t.Fatalf("%v - %v: cell %v covered %d times, want %d", a, b, c, seen[string(fmtCell(c))], want)
			}
			delete(seen, string(fmtCell(c)))
		}
		if len(seen) != 0 {
			t.Fatalf("%v - %v: parts cover cells outside a", a, b)
		}
	}
}
