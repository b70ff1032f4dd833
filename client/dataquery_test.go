package client

import (
	"errors"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

type celsius float32
type count uint16

func TestPredString(t *testing.T) {
	for _, c := range []struct {
		p    Pred
		want string
	}{
		{Gt(0.5), "x > 0.5"},
		{Lt(celsius(-1.5)), "x < -1.5"},
		{Eq(count(7)), "x == 7"},
		{Ge(-3).And(Le(uint64(1) << 63)), "(x >= -3 && x <= 9223372036854775808)"},
		{Or(Lt(1), Gt(2), Eq(0)), "((x < 1 || x > 2) || x == 0)"},
		{And(), "<invalid predicate>"},
		{Gt(1).And(Pred{}), "<invalid predicate>"},
	} {
		if got := c.p.String(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

func TestPredEncode(t *testing.T) {
	nodes, err := Gt(1).Or(Eq(celsius(2.5))).e.Encode(region.Double)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 || nodes[2].Op != wire.QueryOR || len(nodes[0].Value) != 8 || nodes[2].Value != nil {
		t.Fatalf("nodes %+v", nodes)
	}
	if _, err := Eq(celsius(2.5)).e.Encode(region.Int); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("fraction over int: %v", err)
	}
	p, err := WhereTyped(GE, region.Int16, []byte{0xff, 0xff})
	if err != nil || p.String() != "x >= -1" {
		t.Fatalf("typed: %v %v", p, err)
	}
	if _, err := WhereTyped(Op(9), region.Int16, []byte{0, 0}); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("bad op: %v", err)
	}
	if _, err := WhereTyped(EQ, region.Int16, []byte{0}); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("short value: %v", err)
	}
}
