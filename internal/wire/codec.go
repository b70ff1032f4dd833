package wire

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pdcgo/pdc"
)

// Message is a header that can be appended to a buffer and decoded from one.
// Unmarshal resets the message first; fields the decoder does not know are
// skipped. Decoded byte slices never alias the input.
type Message interface {
	Marshal(dst []byte) []byte
	Unmarshal(b []byte) error
}

func putUint(b []byte, n protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func putBool(b []byte, n protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return putUint(b, n, 1)
}

func putInt(b []byte, n protowire.Number, v int64) []byte {
	return putUint(b, n, protowire.EncodeZigZag(v))
}

func putBytes(b []byte, n protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func putString(b []byte, n protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, v)
}

// putMsg appends m as a length-delimited field, always (an empty message is
// still an element of a repeated field).
func putMsg(b []byte, n protowire.Number, m Message) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	pos := len(b)
	b = append(b, 0) // length placeholder, fixed up below
	b = m.Marshal(b)
	size := len(b) - pos - 1
	if size < 0x80 {
		b[pos] = byte(size)
		return b
	}
	var lb [binaryMaxVarint]byte
	l := protowire.AppendVarint(lb[:0], uint64(size))
	b = append(b, l[1:]...)
	copy(b[pos+len(l):], b[pos+1:pos+1+size])
	copy(b[pos:], l)
	return b
}

const binaryMaxVarint = 10

// fields iterates over the fields of an encoded message.
type fields struct {
	b   []byte
	msg string // message name, for errors
	err error

	num protowire.Number
	typ protowire.Type
	v   uint64 // varint value
	raw []byte // bytes value
}

// count returns how many fields numbered num are left, so that a repeated
// field can be decoded into a slice made to size: thousands of region
// items appended one by one spent more on growing the slice than on
// decoding. A malformed message counts what precedes the fault; next
// reports the fault.
func (f fields) count(num protowire.Number) int {
	n := 0
	for f.next() {
		if f.num == num {
			n++
		}
	}
	return n
}

// next advances to the next field; false at the end or on error (see err).
func (f *fields) next() bool {
	if f.err != nil || len(f.b) == 0 {
		return false
	}
	num, typ, n := protowire.ConsumeTag(f.b)
	if n < 0 {
		f.fail(protowire.ParseError(n))
		return false
	}
	f.b = f.b[n:]
	f.num, f.typ = num, typ
	switch typ {
	case protowire.VarintType:
		f.v, n = protowire.ConsumeVarint(f.b)
	case protowire.BytesType:
		f.raw, n = protowire.ConsumeBytes(f.b)
	default:
		n = protowire.ConsumeFieldValue(num, typ, f.b)
	}
	if n < 0 {
		f.fail(protowire.ParseError(n))
		return false
	}
	f.b = f.b[n:]
	return true
}

func (f *fields) fail(err error) {
	if f.err == nil {
		f.err = fmt.Errorf("decode %s: field %d: %v: %w", f.msg, f.num, err, pdc.ErrProtocol)
	}
}

// want reports whether the current field has type t; a known field number
// with another type is an error.
func (f *fields) want(t protowire.Type) bool {
	if f.typ != t {
		f.fail(fmt.Errorf("wire type %d, want %d", f.typ, t))
		return false
	}
	return true
}

func (f *fields) uint64() uint64 {
	if !f.want(protowire.VarintType) {
		return 0
	}
	return f.v
}

func (f *fields) uint32() uint32 {
	v := f.uint64()
	if v > math.MaxUint32 {
		f.fail(fmt.Errorf("value %d overflows uint32", v))
		return 0
	}
	return uint32(v)
}

func (f *fields) int64() int64 { return protowire.DecodeZigZag(f.uint64()) }

func (f *fields) bool() bool { return f.uint64() != 0 }

func (f *fields) bytes() []byte {
	if !f.want(protowire.BytesType) {
		return nil
	}
	return append([]byte(nil), f.raw...)
}

// alias is bytes without the copy: the slice aliases the buffer being
// decoded, for payload-sized fields whose receiver copies what it keeps.
func (f *fields) alias() []byte {
	if !f.want(protowire.BytesType) {
		return nil
	}
	return f.raw[:len(f.raw):len(f.raw)]
}

func (f *fields) string() string {
	if !f.want(protowire.BytesType) {
		return ""
	}
	return string(f.raw)
}

func (f *fields) msgBytes() []byte {
	if !f.want(protowire.BytesType) {
		return nil
	}
	return f.raw
}

func (f *fields) sub(m Message) {
	raw := f.msgBytes()
	if f.err != nil {
		return
	}
	if err := m.Unmarshal(raw); err != nil && f.err == nil {
		f.err = err
	}
}

// putPackedUints appends a packed repeated varint field; empty is omitted.
func putPackedUints(b []byte, n protowire.Number, vs []uint64) []byte {
	if len(vs) == 0 {
		return b
	}
	size := 0
	for _, v := range vs {
		size += protowire.SizeVarint(v)
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	for _, v := range vs {
		b = protowire.AppendVarint(b, v)
	}
	return b
}

// packedUints appends the current field's values to dst: packed, or one
// unpacked varint (both forms are valid protobuf).
func (f *fields) packedUints(dst []uint64) []uint64 {
	if f.typ == protowire.VarintType {
		return append(dst, f.v)
	}
	raw := f.msgBytes()
	if dst == nil {
		n := 0 // a varint's last byte is the one under 0x80
		for _, c := range raw {
			if c < 0x80 {
				n++
			}
		}
		if n > 0 {
			dst = make([]uint64, 0, n)
		}
	}
	for len(raw) > 0 && f.err == nil {
		v, n := protowire.ConsumeVarint(raw)
		if n < 0 {
			f.fail(protowire.ParseError(n))
			return dst
		}
		dst = append(dst, v)
		raw = raw[n:]
	}
	return dst
}

func (f *fields) int32() int32 {
	v := f.int64()
	if v < math.MinInt32 || v > math.MaxInt32 {
		f.fail(fmt.Errorf("value %d overflows int32", v))
		return 0
	}
	return int32(v)
}

// bytesOrEmpty is bytes for repeated elements, where an empty element must
// stay an element: it returns a non-nil empty slice for one.
func (f *fields) bytesOrEmpty() []byte {
	if !f.want(protowire.BytesType) {
		return nil
	}
	return append([]byte{}, f.raw...)
}

// putBytesList appends a repeated bytes field, each element (empty ones
// too) as one field.
func putBytesList(b []byte, n protowire.Number, vs [][]byte) []byte {
	for _, v := range vs {
		b = protowire.AppendTag(b, n, protowire.BytesType)
		b = protowire.AppendBytes(b, v)
	}
	return b
}

// putStrings appends a repeated string field, each element (empty ones
// too) as one field.
func putStrings(b []byte, n protowire.Number, ss []string) []byte {
	for _, s := range ss {
		b = protowire.AppendTag(b, n, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	return b
}
