package dataquery

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// MaxNodes bounds the nodes of one predicate.
const MaxNodes = 1024

// Program is a predicate compiled for one element type. It is not safe
// for concurrent use: it keeps scratch space between calls of Match.
type Program struct {
	typ   region.Type
	elem  int
	steps []step
	depth int      // the most masks live at once
	stack [][]bool // scratch, len depth
}

type step struct {
	op   uint32
	leaf func(data []byte, out []bool) // leaves
}

type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Compile checks a postfix predicate and compiles it for elements of
// type t. Errors wrap pdc.ErrInvalid and say which node is wrong.
func Compile(t region.Type, nodes []wire.QueryNode) (*Program, error) {
	k, bits, err := base(t)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("empty predicate: %w", pdc.ErrInvalid)
	}
	if len(nodes) > MaxNodes {
		return nil, fmt.Errorf("predicate of %d nodes, at most %d: %w", len(nodes), MaxNodes, pdc.ErrInvalid)
	}
	p := &Program{typ: t, elem: bits / 8}
	live := 0
	for i, n := range nodes {
		switch n.Op {
		case wire.QueryGT, wire.QueryLT, wire.QueryGTE, wire.QueryLTE, wire.QueryEQ:
			if len(n.Value) != p.elem {
				return nil, fmt.Errorf("predicate node %d: a %s value is %d bytes, not %d: %w", i+1, t, p.elem, len(n.Value), pdc.ErrInvalid)
			}
			p.steps = append(p.steps, step{op: n.Op, leaf: leafFor(k, bits, n.Op, n.Value)})
			live++
			p.depth = max(p.depth, live)
		case wire.QueryAND, wire.QueryOR:
			if live < 2 {
				return nil, fmt.Errorf("predicate node %d: %s needs two operands before it: %w", i+1, opName(n.Op), pdc.ErrInvalid)
			}
			p.steps = append(p.steps, step{op: n.Op})
			live--
		default:
			return nil, fmt.Errorf("predicate node %d: unknown operator %d: %w", i+1, n.Op, pdc.ErrInvalid)
		}
	}
	if live != 1 {
		return nil, fmt.Errorf("predicate leaves %d values, not one (missing AND/OR): %w", live, pdc.ErrInvalid)
	}
	p.stack = make([][]bool, p.depth)
	return p, nil
}

func opName(op uint32) string {
	switch op {
	case wire.QueryGT:
		return ">"
	case wire.QueryLT:
		return "<"
	case wire.QueryGTE:
		return ">="
	case wire.QueryLTE:
		return "<="
	case wire.QueryEQ:
		return "=="
	case wire.QueryAND:
		return "AND"
	case wire.QueryOR:
		return "OR"
	}
	return fmt.Sprintf("op(%d)", op)
}

// Elem is the size of one element in bytes.
func (p *Program) Elem() int { return p.elem }

// Match sets out[i] to whether element i of data satisfies the
// predicate. data holds len(out) elements in the host's byte order
// (little-endian on every platform pdc supports) and must be aligned to
// the element size. Neither is retained.
func (p *Program) Match(data []byte, out []bool) {
	n := len(out)
	if len(p.steps) == 1 {
		p.steps[0].leaf(data[:n*p.elem], out)
		return
	}
	p.stack[0] = out
	for i := 1; i < p.depth; i++ {
		if cap(p.stack[i]) < n {
			p.stack[i] = make([]bool, n)
		}
		p.stack[i] = p.stack[i][:n]
	}
	top := 0
	for _, s := range p.steps {
		switch s.op {
		case wire.QueryAND:
			combineMasks(p.stack[top-2], p.stack[top-1], true)
			top--
		case wire.QueryOR:
			combineMasks(p.stack[top-2], p.stack[top-1], false)
			top--
		default:
			s.leaf(data[:n*p.elem], p.stack[top])
			top++
		}
	}
	p.stack[0] = nil
}

// MatchesZero reports whether an element that was never written (zero)
// satisfies the predicate.
func (p *Program) MatchesZero() bool {
	var zero [1]uint64
	out := []bool{false}
	p.Match(unsafe.Slice((*byte)(unsafe.Pointer(&zero[0])), 8)[:p.elem], out)
	return out[0]
}

func leafFor(k Kind, bits int, op uint32, v []byte) func([]byte, []bool) {
	var raw [8]byte
	copy(raw[:], v)
	u := binary.LittleEndian.Uint64(raw[:])
	switch {
	case k == KindFloat && bits == 32:
		return leaf(op, math.Float32frombits(uint32(u)))
	case k == KindFloat:
		return leaf(op, math.Float64frombits(u))
	case k == KindInt && bits == 8:
		return leaf(op, int8(u))
	case k == KindInt && bits == 16:
		return leaf(op, int16(u))
	case k == KindInt && bits == 32:
		return leaf(op, int32(u))
	case k == KindInt:
		return leaf(op, int64(u))
	case bits == 8:
		return leaf(op, uint8(u))
	case bits == 16:
		return leaf(op, uint16(u))
	case bits == 32:
		return leaf(op, uint32(u))
	}
	return leaf(op, u)
}

// view is data as elements of T; data must be aligned for T.
func view[T number](data []byte) []T {
	var z T
	n := len(data) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(data))), n)
}

func leaf[T number](op uint32, v T) func([]byte, []bool) {
	switch op {
	case wire.QueryGT:
		return func(data []byte, out []bool) {
			for i, x := range view[T](data)[:len(out)] {
				out[i] = x > v
			}
		}
	case wire.QueryLT:
		return func(data []byte, out []bool) {
			for i, x := range view[T](data)[:len(out)] {
				out[i] = x < v
			}
		}
	case wire.QueryGTE:
		return func(data []byte, out []bool) {
			for i, x := range view[T](data)[:len(out)] {
				out[i] = x >= v
			}
		}
	case wire.QueryLTE:
		return func(data []byte, out []bool) {
			for i, x := range view[T](data)[:len(out)] {
				out[i] = x <= v
			}
		}
	}
	return func(data []byte, out []bool) {
		for i, x := range view[T](data)[:len(out)] {
			out[i] = x == v
		}
	}
}

// combineMasks sets a to a AND b (and) or a OR b, eight entries at a time:
// a bool is one byte holding 0 or 1, so bitwise and/or of the bytes is the
// logical one.
func combineMasks(a, b []bool, and bool) {
	n := len(a) / 8 * 8
	if n > 0 {
		aw := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(a))), n/8)
		bw := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n/8)
		if and {
			for i := range aw {
				aw[i] &= bw[i]
			}
		} else {
			for i := range aw {
				aw[i] |= bw[i]
			}
		}
	}
	for i := n; i < len(a); i++ {
		if and {
			a[i] = a[i] && b[i]
		} else {
			a[i] = a[i] || b[i]
		}
	}
}
