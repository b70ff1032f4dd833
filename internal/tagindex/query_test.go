package tagindex

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

func MustParse(s string) *Query {
	q, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return q
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // Query.String()
		key  Kind
		val  Kind
	}{
		{"abcd=1234", "abcd=1234", Exact, Exact},
		{"ab*=12*", "ab*=12*", Prefix, Prefix},
		{"*cd=*34", "*cd=*34", Suffix, Suffix},
		{"*bc*=*23*", "*bc*=*23*", Infix, Infix},
		{"key", "key", Exact, Any},
		{"key*", "key*", Prefix, Any},
		{"*", "*", Any, Any},
		{"key=*", "key", Exact, Any},
		{"*=v", "*=v", Any, Exact},
		{"k=10..20", "k=10..20", Exact, Any},
		{"k=..20", "k=..20", Exact, Any},
		{"k=-1.5..", "k=-1.5..", Exact, Any},
		{"k=a=b", "k=a=b", Exact, Exact},
		{"k=x..y*", "k=x..y*", Exact, Prefix},
	} {
		q, err := Parse(c.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.in, err)
		}
		if q.String() != c.want || q.Key.Kind != c.key || q.Value.Kind != c.val {
			t.Errorf("Parse(%q) = %q (key %s, value %s); want %q (%s, %s)", c.in, q, q.Key.Kind, q.Value.Kind, c.want, c.key, c.val)
		}
	}
	if q := MustParse("k=1234"); q.Eq == nil || q.Eq.Cmp(Int(1234)) != 0 {
		t.Errorf("k=1234: Eq = %v", q.Eq)
	}
	if q := MustParse("k=12a"); q.Eq != nil {
		t.Errorf("k=12a: Eq = %v", q.Eq)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, says string }{
		{"", "empty query"},
		{"   ", "empty query"},
		{"=v", "empty key"},
		{"k=", "empty value"},
		{"a*b", "misplaced *"},
		{"k=a*b", "misplaced *"},
		{"**", "no text between its stars"},
		{"k=***", "misplaced *"},
		{"*a**", "misplaced *"},
		{"k>5", "unknown operator"},
		{"k>=5", "unknown operator"},
		{"k!=5", "unknown operator"},
		{"k<5", "unknown operator"},
		{"k~x", "unknown operator"},
		{"k==5", "unknown operator"},
		{"k=..", "neither end"},
		{"k=a..5", "not a number"},
		{"k=5..b", "not a number"},
		{"k=9..1", "empty range"},
		{strings.Repeat("k", MaxKeyPattern+1), "over the limit"},
		{"k=" + strings.Repeat("v", MaxValuePattern+1), "over the limit"},
		{"k\x00", "NUL"},
	} {
		_, err := Parse(c.in)
		if err == nil || !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Parse(%.40q) = %v; want an invalid-argument error saying %q", c.in, err, c.says)
		}
	}
}

func i64(v int64) []byte   { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
func f64(v float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)) }

func TestMatch(t *testing.T) {
	type tag struct {
		key string
		typ region.Type
		val []byte
	}
	str := func(k, v string) tag { return tag{k, region.String, []byte(v)} }
	num := func(k string, v int64) tag { return tag{k, region.Int64, i64(v)} }
	for _, c := range []struct {
		q    string
		t    tag
		want bool
	}{
		{"abcd=1234", str("abcd", "1234"), true},
		{"ab*=12*", str("abcd", "1234"), true},
		{"*cd=*34", str("abcd", "1234"), true},
		{"*bc*=*23*", str("abcd", "1234"), true},
		{"*bc*=*24*", str("abcd", "1234"), false},
		{"abcd=1234", num("abcd", 1234), true},
		{"abcd=1234.0", num("abcd", 1234), true},
		{"abcd=12*", num("abcd", 1234), false}, // numbers match exactly
		{"abcd=0x4d2", num("abcd", 1234), true},
		{"abcd", num("abcd", 1), true},
		{"abc", num("abcd", 1), false},
		{"k=1..2", num("k", 2), true},
		{"k=1..2", num("k", 3), false},
		{"k=..2", num("k", -100), true},
		{"k=3..", num("k", 3), true},
		{"k=0.5..1.5", tag{"k", region.Double, f64(1.0)}, true},
		{"k=..5", tag{"k", region.Double, f64(math.NaN())}, false},
		{"k=v", tag{"k", region.String, []byte("v\x00")}, true}, // C string with its NUL
		{"k=-1", tag{"k", region.Int8, []byte{0xff}}, true},
		{"k=255", tag{"k", region.Uint8, []byte{0xff}}, true},
		{"k=18446744073709551615", tag{"k", region.Uint64, i64(-1)}, true},
		{"k=0..9223372036854775807", tag{"k", region.Uint64, i64(-1)}, false},
	} {
		q := MustParse(c.q)
		got, err := q.Match(c.t.key, c.t.typ, c.t.val)
		if err != nil || got != c.want {
			t.Errorf("%q on %s=%v (%s): %v, %v; want %v", c.q, c.t.key, c.t.val, c.t.typ, got, err, c.want)
		}
	}
	if _, err := MustParse("k=1..2").Match("k", region.String, []byte("x")); !errors.Is(err, pdc.ErrInvalid) {
		t.Errorf("range on a text tag: %v", err)
	}
}

func TestNumberCmp(t *testing.T) {
	big := &Number{kind: numUint, u: math.MaxUint64}
	for _, c := range []struct {
		a, b *Number
		want int
	}{
		{Int(-1), big, -1},
		{big, Int(math.MaxInt64), 1},
		{Int(3), Float(3), 0},
		{Float(2.5), Int(3), -1},
		{Float(math.NaN()), Int(0), -1},
	} {
		if got := c.a.Cmp(c.b); got != c.want {
			t.Errorf("%v cmp %v = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"abcd=1234", "ab*=12*", "*cd=*34", "*bc*=*23*", "k=1..2", "k", "a*b", "k=..", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			if !errors.Is(err, pdc.ErrInvalid) {
				t.Fatalf("Parse(%q): %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		// The canonical form parses to the same query.
		q2, err := Parse(q.String())
		if err != nil || q2.String() != q.String() {
			t.Fatalf("Parse(%q) = %q, which parses to %v, %v", s, q, q2, err)
		}
	})
}
