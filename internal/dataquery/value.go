package dataquery

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// Kind is which field of a Value holds it.
type Kind uint8

// Kinds.
const (
	KindInt Kind = iota
	KindUint
	KindFloat
)

// Value is a number as the caller gave it, before it meets an element
// type.
type Value struct {
	Kind Kind
	I    int64
	U    uint64
	F    float64
}

func (v Value) String() string {
	switch v.Kind {
	case KindUint:
		return strconv.FormatUint(v.U, 10)
	case KindFloat:
		return strconv.FormatFloat(v.F, 'g', -1, 64)
	}
	return strconv.FormatInt(v.I, 10)
}

// base is the Go type that holds elements of t, as a Kind and a bit size.
func base(t region.Type) (k Kind, bits int, err error) {
	switch t {
	case region.Int, region.Int32:
		return KindInt, 32, nil
	case region.Char, region.Int8:
		return KindInt, 8, nil
	case region.Short, region.Int16:
		return KindInt, 16, nil
	case region.Int64, region.Long:
		return KindInt, 64, nil
	case region.Boolean, region.Uint8:
		return KindUint, 8, nil
	case region.Uint16:
		return KindUint, 16, nil
	case region.Uint, region.Uint32:
		return KindUint, 32, nil
	case region.Uint64, region.SizeT:
		return KindUint, 64, nil
	case region.Float:
		return KindFloat, 32, nil
	case region.Double:
		return KindFloat, 64, nil
	}
	return 0, 0, fmt.Errorf("cannot query elements of type %s: only numeric types can be compared: %w", t, pdc.ErrInvalid)
}

// Numeric reports whether elements of t can be queried.
func Numeric(t region.Type) bool {
	_, _, err := base(t)
	return err == nil
}

// Encode converts v to an element of type t, little-endian. Floats are
// rounded to float32 for float32 elements; an integer element type takes
// only whole numbers in its range (an error wrapping pdc.ErrInvalid
// otherwise: "x > 0.5" over ints is better written "x > 0").
func Encode(t region.Type, v Value) ([]byte, error) {
	k, bits, err := base(t)
	if err != nil {
		return nil, err
	}
	size := bits / 8
	out := make([]byte, 8)
	bad := func() ([]byte, error) {
		return nil, fmt.Errorf("value %s is not a %s element (a whole number in its range): %w", v, t, pdc.ErrInvalid)
	}
	switch k {
	case KindFloat:
		var f float64
		switch v.Kind {
		case KindInt:
			f = float64(v.I)
		case KindUint:
			f = float64(v.U)
		default:
			f = v.F
		}
		if bits == 32 {
			binary.LittleEndian.PutUint32(out, math.Float32bits(float32(f)))
		} else {
			binary.LittleEndian.PutUint64(out, math.Float64bits(f))
		}
		return out[:size], nil
	case KindInt:
		var i int64
		switch v.Kind {
		case KindInt:
			i = v.I
		case KindUint:
			if v.U > math.MaxInt64 {
				return bad()
			}
			i = int64(v.U)
		default:
			if v.F != math.Trunc(v.F) || v.F < math.MinInt64 || v.F >= math.MaxInt64 {
				return bad()
			}
			i = int64(v.F)
		}
		if bits < 64 && (i < -(1<<(bits-1)) || i >= 1<<(bits-1)) {
			return bad()
		}
		binary.LittleEndian.PutUint64(out, uint64(i))
		return out[:size], nil
	default:
		var u uint64
		switch v.Kind {
		case KindInt:
			if v.I < 0 {
				return bad()
			}
			u = uint64(v.I)
		case KindUint:
			u = v.U
		default:
			if v.F != math.Trunc(v.F) || v.F < 0 || v.F >= math.MaxUint64 {
				return bad()
			}
			u = uint64(v.F)
		}
		if bits < 64 && u >= 1<<bits {
			return bad()
		}
		binary.LittleEndian.PutUint64(out, u)
		return out[:size], nil
	}
}

// Decode reads an element of type t (little-endian, t.Size() bytes) as a
// Value.
func Decode(t region.Type, b []byte) (Value, error) {
	k, bits, err := base(t)
	if err != nil {
		return Value{}, err
	}
	if len(b) != bits/8 {
		return Value{}, fmt.Errorf("a %s value is %d bytes, not %d: %w", t, bits/8, len(b), pdc.ErrInvalid)
	}
	var raw [8]byte
	copy(raw[:], b)
	u := binary.LittleEndian.Uint64(raw[:])
	switch k {
	case KindFloat:
		if bits == 32 {
			return Value{Kind: KindFloat, F: float64(math.Float32frombits(uint32(u)))}, nil
		}
		return Value{Kind: KindFloat, F: math.Float64frombits(u)}, nil
	case KindInt:
		shift := 64 - bits
		return Value{Kind: KindInt, I: int64(u<<shift) >> shift}, nil
	}
	return Value{Kind: KindUint, U: u}, nil
}
