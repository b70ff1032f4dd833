package dataquery

import (
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// Expr is a predicate as the client builds it, in postfix: comparisons
// (wire.QueryGT..QueryEQ with a value) and the ANDs and ORs joining them,
// before its values are converted to an object's element type (Encode).
// The empty Expr is invalid. An Expr is never changed once made, so it
// may be shared.
type Expr []Node

// Node is a comparison or a join of an Expr.
type Node struct {
	Op  uint32 // wire.QueryGT..wire.QueryOR
	Val Value  // comparisons only
}

// Compare is "element op v".
func Compare(op uint32, v Value) Expr { return Expr{{Op: op, Val: v}} }

// Join is "p op q" for op wire.QueryAND or wire.QueryOR; empty if either
// is.
func Join(p, q Expr, op uint32) Expr {
	if len(p) == 0 || len(q) == 0 {
		return nil
	}
	out := make(Expr, 0, len(p)+len(q)+1)
	out = append(out, p...)
	out = append(out, q...)
	return append(out, Node{Op: op})
}

// Fold joins every one of es by op, left to right; empty if es is.
func Fold(es []Expr, op uint32) Expr {
	if len(es) == 0 {
		return nil
	}
	out := es[0]
	for _, e := range es[1:] {
		out = Join(out, e, op)
	}
	return out
}

func (e Expr) String() string {
	var st []string
	for _, n := range e {
		switch n.Op {
		case wire.QueryAND, wire.QueryOR:
			if len(st) < 2 {
				return "<invalid predicate>"
			}
			sep := " && "
			if n.Op == wire.QueryOR {
				sep = " || "
			}
			a, b := st[len(st)-2], st[len(st)-1]
			st = append(st[:len(st)-2], "("+a+sep+b+")")
		default:
			st = append(st, "x "+opName(n.Op)+" "+n.Val.String())
		}
	}
	if len(st) != 1 {
		return "<invalid predicate>"
	}
	return st[0]
}

// Encode converts e for elements of type t, as the wire carries it.
func (e Expr) Encode(t region.Type) ([]wire.QueryNode, error) {
	if len(e) == 0 {
		return nil, fmt.Errorf("empty predicate: %w", pdc.ErrInvalid)
	}
	out := make([]wire.QueryNode, len(e))
	for i, n := range e {
		out[i].Op = n.Op
		if n.Op == wire.QueryAND || n.Op == wire.QueryOR {
			continue
		}
		b, err := Encode(t, n.Val)
		if err != nil {
			return nil, err
		}
		out[i].Value = b
	}
	return out, nil
}
