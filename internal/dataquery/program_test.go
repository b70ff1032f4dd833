package dataquery_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dataquery"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

var numeric = []region.Type{region.Int, region.Float, region.Double, region.Char, region.Boolean, region.Short, region.Uint,
	region.Int64, region.Uint64, region.Int16, region.Int8, region.Uint8, region.Uint16, region.Int32, region.Uint32,
	region.Long, region.SizeT}

// cmp compares two values of one kind: -1, 0, 1, or 2 if unordered (NaN).
func cmp(a, b dataquery.Value) int {
	switch a.Kind {
	case dataquery.KindInt:
		return sign(a.I < b.I, a.I > b.I)
	case dataquery.KindUint:
		return sign(a.U < b.U, a.U > b.U)
	}
	if math.IsNaN(a.F) || math.IsNaN(b.F) {
		return 2
	}
	return sign(a.F < b.F, a.F > b.F)
}

func sign(lt, gt bool) int {
	if lt {
		return -1
	}
	if gt {
		return 1
	}
	return 0
}

// naive evaluates a postfix predicate element by element through Decode.
func naive(t *testing.T, typ region.Type, nodes []wire.QueryNode, elem []byte) bool {
	x, err := dataquery.Decode(typ, elem)
	if err != nil {
		t.Fatal(err)
	}
	var st []bool
	for _, n := range nodes {
		switch n.Op {
		case wire.QueryAND, wire.QueryOR:
			a, b := st[len(st)-2], st[len(st)-1]
			st = st[:len(st)-2]
			if n.Op == wire.QueryAND {
				st = append(st, a && b)
			} else {
				st = append(st, a || b)
			}
			continue
		}
		v, err := dataquery.Decode(typ, n.Value)
		if err != nil {
			t.Fatal(err)
		}
		c := cmp(x, v)
		var r bool
		switch n.Op {
		case wire.QueryGT:
			r = c == 1
		case wire.QueryLT:
			r = c == -1
		case wire.QueryGTE:
			r = c == 1 || c == 0
		case wire.QueryLTE:
			r = c == -1 || c == 0
		case wire.QueryEQ:
			r = c == 0
		}
		st = append(st, r)
	}
	return st[0]
}

// randTree builds a random postfix predicate of up to depth levels whose
// values are drawn from data, so that comparisons hit both ways and EQ
// matches.
func randTree(r *rand.Rand, elem int, data []byte, depth int) []wire.QueryNode {
	if depth == 0 || r.IntN(3) == 0 {
		i := r.IntN(len(data) / elem)
		v := append([]byte(nil), data[i*elem:(i+1)*elem]...)
		return []wire.QueryNode{{Op: uint32(1 + r.IntN(5)), Value: v}}
	}
	out := append(randTree(r, elem, data, depth-1), randTree(r, elem, data, depth-1)...)
	return append(out, wire.QueryNode{Op: uint32(6 + r.IntN(2))})
}

func TestMatchAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range numeric {
		elem := typ.Size()
		n := 1003                // not a multiple of 8: the masks' tails
		buf := make([]uint64, n) // aligned
		data := unsafeBytes(buf)[:n*elem]
		for i := range data {
			data[i] = byte(r.IntN(4)) // few distinct values: many ties
		}
		if typ.FloatingPoint() {
			// Real floats, with NaN, infinities and signed zeros.
			special := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 0.5, -1}
			for i := range n {
				f := special[r.IntN(len(special))]
				if r.IntN(2) == 0 {
					f = float64(r.IntN(5)) - 2
				}
				b, _ := dataquery.Encode(typ, dataquery.Value{Kind: dataquery.KindFloat, F: f})
				copy(data[i*elem:], b)
			}
		}
		for range 50 {
			nodes := randTree(r, elem, data, 3)
			p, err := dataquery.Compile(typ, nodes)
			if err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			out := make([]bool, n)
			p.Match(data, out)
			for i := range n {
				if want := naive(t, typ, nodes, data[i*elem:(i+1)*elem]); out[i] != want {
					t.Fatalf("%s %v element %d (% x): got %v, want %v", typ, nodes, i, data[i*elem:(i+1)*elem], out[i], want)
				}
			}
			if want := naive(t, typ, nodes, make([]byte, elem)); p.MatchesZero() != want {
				t.Fatalf("%s %v: zero matches %v, want %v", typ, nodes, p.MatchesZero(), want)
			}
		}
	}
}

func TestCompileRejects(t *testing.T) {
	v4 := []byte{0, 0, 0, 0}
	for _, c := range []struct {
		name  string
		typ   region.Type
		nodes []wire.QueryNode
	}{
		{"string", region.String, []wire.QueryNode{{Op: wire.QueryEQ, Value: []byte{1}}}},
		{"bytes", region.VoidPtr, []wire.QueryNode{{Op: wire.QueryEQ, Value: []byte{1}}}},
		{"unknown type", region.Type(99), []wire.QueryNode{{Op: wire.QueryEQ, Value: v4}}},
		{"empty", region.Int, nil},
		{"short value", region.Int, []wire.QueryNode{{Op: wire.QueryEQ, Value: []byte{1}}}},
		{"unknown op", region.Int, []wire.QueryNode{{Op: 99, Value: v4}}},
		{"and of one", region.Int, []wire.QueryNode{{Op: wire.QueryEQ, Value: v4}, {Op: wire.QueryAND}}},
		{"two left", region.Int, []wire.QueryNode{{Op: wire.QueryEQ, Value: v4}, {Op: wire.QueryEQ, Value: v4}}},
		{"too many", region.Int, make([]wire.QueryNode, dataquery.MaxNodes+1)},
	} {
		if _, err := dataquery.Compile(c.typ, c.nodes); !errors.Is(err, pdc.ErrInvalid) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestEncode(t *testing.T) {
	ok := []struct {
		typ region.Type
		v   dataquery.Value
	}{
		{region.Uint8, dataquery.Value{Kind: dataquery.KindInt, I: 255}},
		{region.Int8, dataquery.Value{Kind: dataquery.KindFloat, F: -128}},
		{region.Uint64, dataquery.Value{Kind: dataquery.KindUint, U: math.MaxUint64}},
		{region.Int64, dataquery.Value{Kind: dataquery.KindInt, I: math.MinInt64}},
		{region.Float, dataquery.Value{Kind: dataquery.KindFloat, F: 0.1}},
		{region.Double, dataquery.Value{Kind: dataquery.KindInt, I: -3}},
	}
	for _, c := range ok {
		b, err := dataquery.Encode(c.typ, c.v)
		if err != nil || len(b) != c.typ.Size() {
			t.Fatalf("%s %v: %v %v", c.typ, c.v, b, err)
		}
		back, err := dataquery.Decode(c.typ, b)
		if err != nil {
			t.Fatal(err)
		}
		if c.typ.Integer() && back.String() != c.v.String() {
			t.Fatalf("%s %v decodes to %v", c.typ, c.v, back)
		}
	}
	bad := []struct {
		typ region.Type
		v   dataquery.Value
	}{
		{region.Uint8, dataquery.Value{Kind: dataquery.KindInt, I: 256}},
		{region.Uint8, dataquery.Value{Kind: dataquery.KindInt, I: -1}},
		{region.Int8, dataquery.Value{Kind: dataquery.KindInt, I: 128}},
		{region.Int, dataquery.Value{Kind: dataquery.KindFloat, F: 0.5}},
		{region.Int64, dataquery.Value{Kind: dataquery.KindUint, U: math.MaxUint64}},
		{region.Uint32, dataquery.Value{Kind: dataquery.KindFloat, F: math.NaN()}},
		{region.String, dataquery.Value{Kind: dataquery.KindInt, I: 1}},
	}
	for _, c := range bad {
		if _, err := dataquery.Encode(c.typ, c.v); !errors.Is(err, pdc.ErrInvalid) {
			t.Errorf("%s %v: %v", c.typ, c.v, err)
		}
	}
}

// FuzzCompile: Compile never panics on any tree, fails only with
// ErrInvalid, and what it accepts evaluates.
func FuzzCompile(f *testing.F) {
	f.Add(int32(0), []byte{1, 4, 0, 0, 0, 0})
	f.Add(int32(1), []byte{1, 4, 0, 0, 0, 0, 2, 4, 1, 1, 1, 1, 6, 0})
	f.Fuzz(func(t *testing.T, typ int32, b []byte) {
		var nodes []wire.QueryNode
		for len(b) >= 2 {
			op, n := uint32(b[0]), int(b[1])
			b = b[2:]
			n = min(n, len(b))
			nodes = append(nodes, wire.QueryNode{Op: op, Value: b[:n]})
			b = b[n:]
		}
		p, err := dataquery.Compile(region.Type(typ), nodes)
		if err != nil {
			if !errors.Is(err, pdc.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		buf := make([]uint64, 4)
		p.Match(unsafeBytes(buf), make([]bool, 32/p.Elem()))
		_ = p.MatchesZero()
	})
}
