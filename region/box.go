package region

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"

	"github.com/pdcgo/pdc"
)

// MaxDims is the most dimensions a box (or an object) has.
const MaxDims = 32

// Box is an n-dimensional box of array elements: Size[i] elements from
// Off[i] along dimension i, row-major (the last dimension varies fastest).
// PDC's region (offset and size arrays) is a Box.
type Box struct {
	Off  []uint64
	Size []uint64
}

// New checks and returns the box at off of size.
func New(off, size []uint64) (Box, error) {
	b := Box{Off: off, Size: size}
	return b, b.Check()
}

// Shape is the box of size at the origin: a whole buffer or object.
func Shape(size ...uint64) Box { return Box{Off: make([]uint64, len(size)), Size: size} }

// Check reports what is wrong with b: no dimensions or more than MaxDims,
// offset and size of different lengths, an empty dimension, or an end past
// the largest index.
func (b Box) Check() error {
	if len(b.Off) != len(b.Size) {
		return fmt.Errorf("region %s: %d offsets and %d sizes: %w", b, len(b.Off), len(b.Size), pdc.ErrInvalid)
	}
	if len(b.Size) == 0 || len(b.Size) > MaxDims {
		return fmt.Errorf("region %s: %d dimensions (want 1 to %d): %w", b, len(b.Size), MaxDims, pdc.ErrInvalid)
	}
	for i, s := range b.Size {
		if s == 0 {
			return fmt.Errorf("region %s: dimension %d is empty: %w", b, i, pdc.ErrInvalid)
		}
		if b.Off[i]+s < b.Off[i] {
			return fmt.Errorf("region %s: dimension %d ends past 2^64: %w", b, i, pdc.ErrOutOfRange)
		}
	}
	if _, ok := b.volume(); !ok {
		return fmt.Errorf("region %s: more than 2^64 elements: %w", b, pdc.ErrOutOfRange)
	}
	return nil
}

// Ndim is the number of dimensions.
func (b Box) Ndim() int { return len(b.Size) }

// Volume is the number of elements; boxes that passed Check never overflow.
func (b Box) Volume() uint64 {
	v, _ := b.volume()
	return v
}

func (b Box) volume() (uint64, bool) {
	v := uint64(1)
	for _, s := range b.Size {
		hi, lo := bits.Mul64(v, s)
		if hi != 0 {
			return 0, false
		}
		v = lo
	}
	return v, true
}

// End is one past the last index along dimension i.
func (b Box) End(i int) uint64 { return b.Off[i] + b.Size[i] }

func (b Box) String() string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range b.Size {
		if i > 0 {
			sb.WriteString(", ")
		}
		if i < len(b.Off) {
			fmt.Fprintf(&sb, "%d+%d", b.Off[i], b.Size[i])
		} else {
			fmt.Fprintf(&sb, "?+%d", b.Size[i])
		}
	}
	sb.WriteByte(']')
	return sb.String()
}

// Clone is a copy that shares nothing with b.
func (b Box) Clone() Box {
	return Box{Off: append([]uint64(nil), b.Off...), Size: append([]uint64(nil), b.Size...)}
}

// Equal reports whether a and b are the same box.
func (b Box) Equal(o Box) bool {
	if len(b.Size) != len(o.Size) {
		return false
	}
	for i := range b.Size {
		if b.Off[i] != o.Off[i] || b.Size[i] != o.Size[i] {
			return false
		}
	}
	return true
}

// Contains reports whether o lies wholly inside b.
func (b Box) Contains(o Box) bool {
	if len(b.Size) != len(o.Size) {
		return false
	}
	for i := range b.Size {
		if o.Off[i] < b.Off[i] || o.End(i) > b.End(i) {
			return false
		}
	}
	return true
}

// Intersect is the box where a and b overlap; ok is false if they do not
// (or differ in dimensions).
func Intersect(a, b Box) (Box, bool) {
	if len(a.Size) != len(b.Size) {
		return Box{}, false
	}
	r := Box{Off: make([]uint64, len(a.Size)), Size: make([]uint64, len(a.Size))}
	for i := range a.Size {
		lo, hi := max(a.Off[i], b.Off[i]), min(a.End(i), b.End(i))
		if lo >= hi {
			return Box{}, false
		}
		r.Off[i], r.Size[i] = lo, hi-lo
	}
	return r, true
}

// ErrOutside is returned, wrapped with the region and dims, for a box that
// does not lie inside an object's dims.
var ErrOutside = errors.New("pdc: region outside the object's dims")

// Within checks that b lies inside an object of the given dims: the same
// number of dimensions, and every end within its dim.
func (b Box) Within(dims []uint64) error {
	if err := b.Check(); err != nil {
		return err
	}
	if len(dims) != len(b.Size) {
		return fmt.Errorf("region %s has %d dimensions and the object %d (dims %v): %w: %w",
			b, len(b.Size), len(dims), dims, ErrOutside, pdc.ErrInvalid)
	}
	for i, d := range dims {
		if b.End(i) > d {
			return fmt.Errorf("region %s ends at %d in dimension %d, past the object's dim %d (dims %v): %w: %w",
				b, b.End(i), i, d, dims, ErrOutside, pdc.ErrOutOfRange)
		}
	}
	return nil
}

// Linearize is the row-major index of the element at coord in an array of
// the given dims (coord relative to the array's origin).
func Linearize(dims, coord []uint64) uint64 {
	var idx uint64
	for i, d := range dims {
		idx = idx*d + coord[i]
	}
	return idx
}

// Delinearize is Linearize's inverse: the coordinates of element idx.
func Delinearize(dims []uint64, idx uint64, coord []uint64) []uint64 {
	coord = append(coord[:0], make([]uint64, len(dims))...)
	for i := len(dims) - 1; i >= 0; i-- {
		coord[i] = idx % dims[i]
		idx /= dims[i]
	}
	return coord
}

// Blocks calls fn for each piece of b cut by the regular grid of cells of
// the given block shape anchored at the origin, with the cell's grid
// coordinates, in row-major order of the cells. Pieces cover b exactly and
// do not overlap. It stops early if fn returns false.
func (b Box) Blocks(block []uint64, fn func(cell []uint64, piece Box) bool) error {
	n := len(b.Size)
	if len(block) != n {
		return fmt.Errorf("blocks of region %s: a %d-dimensional block: %w", b, len(block), pdc.ErrInvalid)
	}
	for i, s := range block {
		if s == 0 {
			return fmt.Errorf("blocks of region %s: block dimension %d is empty: %w", b, i, pdc.ErrInvalid)
		}
	}
	first := make([]uint64, n)
	last := make([]uint64, n)
	for i := range n {
		first[i] = b.Off[i] / block[i]
		last[i] = (b.End(i) - 1) / block[i]
	}
	cell := append([]uint64(nil), first...)
	for {
		piece := Box{Off: make([]uint64, n), Size: make([]uint64, n)}
		for i := range n {
			lo := max(b.Off[i], cell[i]*block[i])
			hi := min(b.End(i), (cell[i]+1)*block[i])
			if (cell[i]+1)*block[i] < cell[i]*block[i] { // the last cell before 2^64
				hi = b.End(i)
			}
			piece.Off[i], piece.Size[i] = lo, hi-lo
		}
		if !fn(append([]uint64(nil), cell...), piece) {
			return nil
		}
		i := n - 1
		for ; i >= 0; i-- {
			if cell[i] < last[i] {
				cell[i]++
				break
			}
			cell[i] = first[i]
		}
		if i < 0 {
			return nil
		}
	}
}

// Split cuts b into at most n pieces of nearly equal volume along its
// outermost dimension with more than one element per piece, in order.
// Fewer pieces come back when b is too small.
func (b Box) Split(n int) []Box {
	if n <= 1 {
		return []Box{b.Clone()}
	}
	dim := 0
	for dim < len(b.Size)-1 && b.Size[dim] < uint64(n) {
		dim++
	}
	parts := min(uint64(n), b.Size[dim])
	out := make([]Box, 0, parts)
	per, extra := b.Size[dim]/parts, b.Size[dim]%parts
	off := b.Off[dim]
	for p := uint64(0); p < parts; p++ {
		s := per
		if p < extra {
			s++
		}
		piece := b.Clone()
		piece.Off[dim], piece.Size[dim] = off, s
		out = append(out, piece)
		off += s
	}
	return out
}

// Run is a contiguous stretch of a row-major buffer: Len elements from
// element Off.
type Run struct {
	Off, Len uint64
}

// Runs calls fn with the contiguous runs that sub occupies in a row-major
// buffer shaped like outer (sub inside outer), in increasing order of
// offset, merged where consecutive rows touch. It stops early if fn
// returns false.
func Runs(outer, sub Box, fn func(Run) bool) {
	var it runIter
	it.init(outer, sub)
	for {
		r, ok := it.next()
		if !ok || !fn(r) {
			return
		}
	}
}

// runIter yields the runs of sub in outer one at a time.
type runIter struct {
	sub    Box
	n      int    // dims
	inner  int    // dimensions [0, inner) are walked; the rest form one run
	runLen uint64 // elements per run before merging
	base   uint64 // offset of sub's first element
	done   bool
	// outer's strides, in elements, and the position within sub of the
	// next run in dimensions [0, inner): in the arrays for up to 8 dims,
	// so that walking a small box allocates nothing (a client planning
	// 64k regions did so per region), else in the slices.
	strideA, coordA [8]uint64
	strideS, coordS []uint64
}

func (it *runIter) stride() []uint64 {
	if it.strideS != nil {
		return it.strideS
	}
	return it.strideA[:it.n]
}

func (it *runIter) coord() []uint64 {
	if it.coordS != nil {
		return it.coordS
	}
	return it.coordA[:it.inner]
}

func newRunIter(outer, sub Box) *runIter {
	it := new(runIter)
	it.init(outer, sub)
	return it
}

func (it *runIter) init(outer, sub Box) {
	n := len(outer.Size)
	it.sub, it.n = sub, n
	if n > len(it.strideA) {
		it.strideS, it.coordS = make([]uint64, n), make([]uint64, n)
	}
	// Dimensions from the innermost that sub covers wholly merge into one
	// run with the next dimension out.
	it.inner = n - 1
	it.runLen = sub.Size[it.inner]
	for it.inner > 0 && sub.Size[it.inner] == outer.Size[it.inner] {
		it.inner--
		it.runLen *= sub.Size[it.inner]
	}
	if it.coordS != nil {
		it.coordS = it.coordS[:it.inner]
	}
	stride := it.stride()
	s := uint64(1)
	for i := n - 1; i >= 0; i-- {
		stride[i] = s
		s *= outer.Size[i]
	}
	for i := range n {
		it.base += (sub.Off[i] - outer.Off[i]) * stride[i]
	}
}

// next returns the next run, merged with those that follow it directly.
func (it *runIter) next() (Run, bool) {
	if it.done {
		return Run{}, false
	}
	r := Run{Off: it.at(), Len: it.runLen}
	for it.advance() {
		off := it.at()
		if off != r.Off+r.Len {
			return r, true
		}
		r.Len += it.runLen
	}
	it.done = true
	return r, true
}

func (it *runIter) at() uint64 {
	off := it.base
	stride := it.stride()
	for i, c := range it.coord() {
		off += c * stride[i]
	}
	return off
}

// advance moves to the next run; false at the end.
func (it *runIter) advance() bool {
	coord := it.coord()
	for i := it.inner - 1; i >= 0; i-- {
		coord[i]++
		if coord[i] < it.sub.Size[i] {
			return true
		}
		coord[i] = 0
	}
	return false
}

// Copy copies the elements of sub from src, a row-major buffer shaped
// like srcBox, to dst, a row-major buffer shaped like dstBox, elem bytes
// per element. sub must lie inside both boxes and the buffers must hold
// their boxes.
func Copy(dst []byte, dstBox Box, src []byte, srcBox Box, sub Box, elem int) error {
	if elem <= 0 {
		return fmt.Errorf("copy of region %s: element size %d: %w", sub, elem, pdc.ErrInvalid)
	}
	for _, c := range []struct {
		name string
		box  Box
		buf  []byte
	}{{"source", srcBox, src}, {"destination", dstBox, dst}} {
		if err := c.box.Check(); err != nil {
			return fmt.Errorf("copy: %s: %w", c.name, err)
		}
		if !c.box.Contains(sub) {
			return fmt.Errorf("copy: region %s is not inside the %s %s: %w", sub, c.name, c.box, pdc.ErrOutOfRange)
		}
		hi, lo := bits.Mul64(c.box.Volume(), uint64(elem))
		if hi != 0 || lo > uint64(len(c.buf)) {
			return fmt.Errorf("copy: the %s %s of %d-byte elements needs more than its %d-byte buffer: %w",
				c.name, c.box, elem, len(c.buf), pdc.ErrInvalid)
		}
	}
	e := uint64(elem)
	// Walk both buffers' runs in step: they cover the same elements of sub
	// in the same order, though cut at different places.
	si, di := newRunIter(srcBox, sub), newRunIter(dstBox, sub)
	sr, sok := si.next()
	dr, dok := di.next()
	for sok && dok {
		n := min(sr.Len, dr.Len)
		so, do := sr.Off*e, dr.Off*e
		copy(dst[do:do+n*e], src[so:so+n*e])
		sr.Off, sr.Len = sr.Off+n, sr.Len-n
		dr.Off, dr.Len = dr.Off+n, dr.Len-n
		if sr.Len == 0 {
			sr, sok = si.next()
		}
		if dr.Len == 0 {
			dr, dok = di.next()
		}
	}
	return nil
}

// Subtract is a minus b: at most 2·ndim disjoint boxes that together hold
// exactly the cells of a that are not in b.
func Subtract(a, b Box) []Box {
	in, ok := Intersect(a, b)
	if !ok {
		return []Box{a.Clone()}
	}
	var out []Box
	rest := a.Clone() // the part of a still to cut, narrowed dimension by dimension
	for i := range a.Size {
		if rest.Off[i] < in.Off[i] {
			below := rest.Clone()
			below.Size[i] = in.Off[i] - rest.Off[i]
			out = append(out, below)
		}
		if in.End(i) < rest.End(i) {
			above := rest.Clone()
			above.Off[i], above.Size[i] = in.End(i), rest.End(i)-in.End(i)
			out = append(out, above)
		}
		rest.Off[i], rest.Size[i] = in.Off[i], in.Size[i]
	}
	return out
}
