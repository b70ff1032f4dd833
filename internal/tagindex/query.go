package tagindex

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// Limits on query patterns. A key pattern longer than the longest tag name
// (256 bytes) and its two stars can never match; a value pattern is
// bounded so that a query fits in one small request.
const (
	MaxKeyPattern   = 256 + 2
	MaxValuePattern = 4096
)

// Kind is the shape of a pattern.
type Kind uint8

// Pattern shapes.
const (
	Any    Kind = iota // "*", or no value given
	Exact              // "lit"
	Prefix             // "lit*"
	Suffix             // "*lit"
	Infix              // "*lit*"
)

var kindNames = [...]string{Any: "any", Exact: "exact", Prefix: "prefix", Suffix: "suffix", Infix: "infix"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Pattern is one side of a query.
type Pattern struct {
	Kind Kind
	Lit  string // the literal without its stars; empty for Any
}

// Match reports whether s matches the pattern.
func (p Pattern) Match(s string) bool {
	switch p.Kind {
	case Any:
		return true
	case Exact:
		return s == p.Lit
	case Prefix:
		return strings.HasPrefix(s, p.Lit)
	case Suffix:
		return strings.HasSuffix(s, p.Lit)
	case Infix:
		return strings.Contains(s, p.Lit)
	}
	return false
}

func (p Pattern) String() string {
	switch p.Kind {
	case Any:
		return "*"
	case Prefix:
		return p.Lit + "*"
	case Suffix:
		return "*" + p.Lit
	case Infix:
		return "*" + p.Lit + "*"
	}
	return p.Lit
}

// Query is a parsed kvtag query.
type Query struct {
	Key Pattern
	// Value is the string side of the value. Any when no value was given
	// or the value is a range.
	Value Pattern
	// Eq is set when Value is Exact and reads as a number: numeric tags
	// equal to it match too.
	Eq *Number
	// Range is set for LO..HI; Lo or Hi nil is an open end.
	Range  bool
	Lo, Hi *Number
}

// HasValue reports whether the query constrains values at all.
func (q *Query) HasValue() bool { return q.Range || q.Value.Kind != Any }

func (q *Query) String() string {
	var b strings.Builder
	b.WriteString(q.Key.String())
	switch {
	case q.Range:
		b.WriteByte('=')
		if q.Lo != nil {
			b.WriteString(q.Lo.String())
		}
		b.WriteString("..")
		if q.Hi != nil {
			b.WriteString(q.Hi.String())
		}
	case q.Value.Kind != Any:
		b.WriteByte('=')
		b.WriteString(q.Value.String())
	}
	return b.String()
}

func invalid(q, format string, args ...any) error {
	return fmt.Errorf("query %.80q: %s: %w", q, fmt.Sprintf(format, args...), pdc.ErrInvalid)
}

// Parse parses a query. Errors wrap pdc.ErrInvalid and say what is wrong:
// an empty query or side, a misplaced * (a*b), an unknown operator (<, >,
// !=, ==, ~), a range end that is not a number or an empty range, a
// pattern longer than its limit, or a NUL byte.
func Parse(s string) (*Query, error) {
	if strings.TrimSpace(s) == "" {
		return nil, invalid(s, "empty query; want KEY or KEY=VALUE")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return nil, invalid(s, "contains a NUL byte")
	}
	keyPart, valPart, hasVal := strings.Cut(s, "=")
	if op := strings.IndexAny(keyPart, "<>!~"); op >= 0 {
		return nil, invalid(s, "unknown operator %q; want KEY, KEY=VALUE or KEY=LO..HI", keyPart[op:])
	}
	if hasVal && strings.HasPrefix(valPart, "=") {
		return nil, invalid(s, "unknown operator \"==\"; write KEY=VALUE")
	}
	if len(keyPart) > MaxKeyPattern {
		return nil, invalid(s, "key pattern of %d bytes is over the limit of %d", len(keyPart), MaxKeyPattern)
	}
	if len(valPart) > MaxValuePattern {
		return nil, invalid(s, "value pattern of %d bytes is over the limit of %d", len(valPart), MaxValuePattern)
	}
	if keyPart != "" && strings.TrimSpace(keyPart) == "" {
		return nil, invalid(s, "blank key")
	}
	q := &Query{}
	var err error
	if q.Key, err = parsePattern(s, "key", keyPart); err != nil {
		return nil, err
	}
	if !hasVal {
		return q, nil
	}
	if valPart == "" {
		return nil, invalid(s, "empty value; write the key alone to match any value")
	}
	if lo, hi, ok := strings.Cut(valPart, ".."); ok && !strings.Contains(valPart, "*") {
		q.Range = true
		if lo == "" && hi == "" {
			return nil, invalid(s, "range with neither end; write the key alone to match any value")
		}
		if lo != "" {
			if q.Lo, err = ParseNumber(lo); err != nil {
				return nil, invalid(s, "range start %q is not a number", lo)
			}
		}
		if hi != "" {
			if q.Hi, err = ParseNumber(hi); err != nil {
				return nil, invalid(s, "range end %q is not a number", hi)
			}
		}
		if q.Lo != nil && q.Hi != nil && q.Lo.Cmp(q.Hi) > 0 {
			return nil, invalid(s, "empty range: %s is above %s", lo, hi)
		}
		return q, nil
	}
	if q.Value, err = parsePattern(s, "value", valPart); err != nil {
		return nil, err
	}
	if q.Value.Kind == Exact {
		if n, err := ParseNumber(q.Value.Lit); err == nil {
			q.Eq = n
		}
	}
	return q, nil
}

func parsePattern(q, side, p string) (Pattern, error) {
	if p == "" {
		return Pattern{}, invalid(q, "empty %s", side)
	}
	if p == "*" {
		return Pattern{Kind: Any}, nil
	}
	lead := strings.HasPrefix(p, "*")
	trail := strings.HasSuffix(p, "*")
	lit := strings.TrimSuffix(strings.TrimPrefix(p, "*"), "*")
	if lit == "" {
		return Pattern{}, invalid(q, "%s pattern %q has no text between its stars", side, p)
	}
	if i := strings.IndexByte(lit, '*'); i >= 0 {
		return Pattern{}, invalid(q, "misplaced * in %s pattern %q: a * may only begin or end a pattern", side, p)
	}
	switch {
	case lead && trail:
		return Pattern{Kind: Infix, Lit: lit}, nil
	case lead:
		return Pattern{Kind: Suffix, Lit: lit}, nil
	case trail:
		return Pattern{Kind: Prefix, Lit: lit}, nil
	}
	return Pattern{Kind: Exact, Lit: lit}, nil
}

// Number is a numeric tag value or query bound: a signed or unsigned
// integer, or a float.
type Number struct {
	kind numKind
	i    int64
	u    uint64
	f    float64
}

type numKind uint8

const (
	numInt numKind = iota
	numUint
	numFloat
)

// ParseNumber reads a decimal (or 0x hex) integer or a float.
func ParseNumber(s string) (*Number, error) {
	if i, err := strconv.ParseInt(s, 0, 64); err == nil {
		return &Number{kind: numInt, i: i}, nil
	}
	if u, err := strconv.ParseUint(s, 0, 64); err == nil {
		return &Number{kind: numUint, u: u}, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		return nil, fmt.Errorf("%q is not a number: %w", s, pdc.ErrInvalid)
	}
	return Float(f), nil
}

// Int returns an integer Number.
func Int(i int64) *Number { return &Number{kind: numInt, i: i} }

// Float returns a float Number. Negative zero is zero: it compares equal
// to it, and written out ("-0") it would read back as the integer 0.
func Float(f float64) *Number {
	if f == 0 {
		f = 0
	}
	return &Number{kind: numFloat, f: f}
}

func (n *Number) String() string {
	switch n.kind {
	case numInt:
		return strconv.FormatInt(n.i, 10)
	case numUint:
		return strconv.FormatUint(n.u, 10)
	}
	return strconv.FormatFloat(n.f, 'g', -1, 64)
}

// Float64 is n as a float64 (rounded for integers beyond 2^53).
func (n *Number) Float64() float64 {
	switch n.kind {
	case numInt:
		return float64(n.i)
	case numUint:
		return float64(n.u)
	}
	return n.f
}

// Cmp compares exactly between integers and as float64 when either is a
// float; NaN compares below everything.
func (n *Number) Cmp(m *Number) int {
	if n.kind != numFloat && m.kind != numFloat {
		// Exact integer comparison across signedness.
		nNeg, mNeg := n.kind == numInt && n.i < 0, m.kind == numInt && m.i < 0
		switch {
		case nNeg && !mNeg:
			return -1
		case !nNeg && mNeg:
			return 1
		case nNeg && mNeg:
			return cmp3(n.i, m.i)
		}
		return cmp3(n.asUint(), m.asUint())
	}
	a, b := n.Float64(), m.Float64()
	switch {
	case math.IsNaN(a) && math.IsNaN(b):
		return 0
	case math.IsNaN(a):
		return -1
	case math.IsNaN(b):
		return 1
	}
	return cmp3(a, b)
}

func (n *Number) asUint() uint64 {
	if n.kind == numUint {
		return n.u
	}
	return uint64(n.i)
}

func cmp3[T int64 | uint64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Value is how a tag's value takes part in matching: a number, or text.
type Value struct {
	Num  *Number // set for numeric tags
	Text string  // the text of every other tag, without trailing NULs
}

// ValueOf classifies a stored tag value by its type: integers of 1, 2, 4 or
// 8 bytes and floats of 4 or 8 bytes are numbers; everything else is text
// (a C string's trailing NULs are not part of it).
func ValueOf(t region.Type, v []byte) Value {
	le := binary.LittleEndian
	n := len(v)
	switch {
	case t == region.String || t == region.Char && n != 1:
	case t.FloatingPoint() && n == 8:
		return Value{Num: Float(math.Float64frombits(le.Uint64(v)))}
	case t.FloatingPoint() && n == 4:
		return Value{Num: Float(float64(math.Float32frombits(le.Uint32(v))))}
	case t.Integer() && (n == 1 || n == 2 || n == 4 || n == 8):
		var u uint64
		for i := n - 1; i >= 0; i-- {
			u = u<<8 | uint64(v[i])
		}
		if t.Signed() {
			shift := 64 - 8*n
			return Value{Num: Int(int64(u<<shift) >> shift)}
		}
		if u > math.MaxInt64 {
			return Value{Num: &Number{kind: numUint, u: u}}
		}
		return Value{Num: Int(int64(u))}
	}
	return Value{Text: string(bytes.TrimRight(v, "\x00"))}
}

// MatchValue reports whether a tag with key and value v matches q. A range
// query whose key matches a text tag is an error wrapping pdc.ErrInvalid:
// ranges are for numeric tags.
func (q *Query) MatchValue(key string, v Value) (bool, error) {
	if !q.Key.Match(key) {
		return false, nil
	}
	return q.matchValueOnly(key, v)
}

func (q *Query) matchValueOnly(key string, v Value) (bool, error) {
	switch {
	case q.Range:
		if v.Num == nil {
			return false, RangeOnText(key)
		}
		return q.inRange(v.Num), nil
	case q.Value.Kind == Any:
		return true, nil
	case v.Num != nil:
		return q.Eq != nil && v.Num.Cmp(q.Eq) == 0, nil
	}
	return q.Value.Match(v.Text), nil
}

// RangeOnText is the error for a range query over a text tag.
func RangeOnText(key string) error {
	return fmt.Errorf("tag %q holds text, and a range (LO..HI) matches only numeric tags: %w", key, pdc.ErrInvalid)
}

func (q *Query) inRange(n *Number) bool {
	if n.kind == numFloat && math.IsNaN(n.f) {
		return false // NaN is in no range
	}
	if q.Lo != nil && n.Cmp(q.Lo) < 0 {
		return false
	}
	if q.Hi != nil && n.Cmp(q.Hi) > 0 {
		return false
	}
	return true
}

// Match is MatchValue for a stored tag.
func (q *Query) Match(key string, t region.Type, v []byte) (bool, error) {
	if !q.Key.Match(key) {
		return false, nil
	}
	return q.matchValueOnly(key, ValueOf(t, v))
}
