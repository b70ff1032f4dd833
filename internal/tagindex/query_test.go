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

// The grammar's cases are data: testdata/query.txt (TestQueryScenarios).
// Here: what a text file cannot hold.
func TestParse(t *testing.T) {
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
