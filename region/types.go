package region

import (
	"fmt"
	"strings"
)

// Type is an element type. Values follow PDC's pdc_var_type_t, so they
// cross the C API unchanged.
type Type int32

// Element types, in pdc_var_type_t order.
const (
	Int     Type = iota // PDC_INT: int32
	Float               // PDC_FLOAT: float32
	Double              // PDC_DOUBLE: float64
	Char                // PDC_CHAR: int8 text
	String              // PDC_STRING: bytes of text
	Boolean             // PDC_BOOLEAN: one byte
	Short               // PDC_SHORT: int16
	Uint                // PDC_UINT: uint32
	Int64               // PDC_INT64
	Uint64              // PDC_UINT64
	Int16               // PDC_INT16
	Int8                // PDC_INT8
	Uint8               // PDC_UINT8
	Uint16              // PDC_UINT16
	Int32               // PDC_INT32
	Uint32              // PDC_UINT32
	Long                // PDC_LONG: int64 on LP64
	VoidPtr             // PDC_VOID_PTR: raw bytes
	SizeT               // PDC_SIZE_T: uint64 on LP64
	typeCount

	// Unknown is PDC_UNKNOWN.
	Unknown Type = -1
)

var typeNames = [...]string{
	Int: "int", Float: "float32", Double: "float64", Char: "char", String: "string", Boolean: "bool",
	Short: "short", Uint: "uint", Int64: "int64", Uint64: "uint64", Int16: "int16", Int8: "int8",
	Uint8: "uint8", Uint16: "uint16", Int32: "int32", Uint32: "uint32", Long: "long", VoidPtr: "bytes",
	SizeT: "size_t",
}

var typeSizes = [...]int{
	Int: 4, Float: 4, Double: 8, Char: 1, String: 1, Boolean: 1, Short: 2, Uint: 4, Int64: 8, Uint64: 8,
	Int16: 2, Int8: 1, Uint8: 1, Uint16: 2, Int32: 4, Uint32: 4, Long: 8, VoidPtr: 1, SizeT: 8,
}

// Valid reports whether t is a known element type.
func (t Type) Valid() bool { return t >= 0 && t < typeCount }

// Size is the size of one element in bytes (1 for string and raw bytes).
func (t Type) Size() int {
	if !t.Valid() {
		return 0
	}
	return typeSizes[t]
}

func (t Type) String() string {
	if !t.Valid() {
		return fmt.Sprintf("type(%d)", int32(t))
	}
	return typeNames[t]
}

// Integer reports whether t holds integers.
func (t Type) Integer() bool {
	switch t {
	case Int, Short, Uint, Int64, Uint64, Int16, Int8, Uint8, Uint16, Int32, Uint32, Long, SizeT, Char, Boolean:
		return true
	}
	return false
}

// Signed reports whether t is a signed integer type.
func (t Type) Signed() bool {
	switch t {
	case Int, Short, Int64, Int16, Int8, Int32, Long, Char:
		return true
	}
	return false
}

// FloatingPoint reports whether t is float32 or float64.
func (t Type) FloatingPoint() bool { return t == Float || t == Double }

// ParseType parses a type name as String prints it, or a common alias
// (int32/float/double/float32/float64/byte/u8...).
func ParseType(s string) (Type, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	aliases := map[string]Type{"float": Float, "double": Double, "byte": Uint8, "u8": Uint8, "i32": Int32,
		"i64": Int64, "u32": Uint32, "u64": Uint64, "f32": Float, "f64": Double, "boolean": Boolean,
		"void_ptr": VoidPtr, "raw": VoidPtr}
	if t, ok := aliases[k]; ok {
		return t, nil
	}
	for t, n := range typeNames {
		if n == k {
			return Type(t), nil
		}
	}
	return Unknown, fmt.Errorf("unknown element type %q (known: %s)", s, strings.Join(typeNames[:], ", "))
}
