package client

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dataquery"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// Op compares an element with a value (pdc_query_op_t).
type Op int

// Comparison operators, in pdc_query_op_t order.
const (
	GT Op = 1 + iota // PDC_GT
	LT               // PDC_LT
	GE               // PDC_GTE
	LE               // PDC_LTE
	EQ               // PDC_EQ
)

func (op Op) String() string {
	switch op {
	case GT:
		return ">"
	case LT:
		return "<"
	case GE:
		return ">="
	case LE:
		return "<="
	case EQ:
		return "=="
	}
	return fmt.Sprintf("op(%d)", int(op))
}

// Number is a Go type a comparison value may have.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr | ~float32 | ~float64
}

// Pred is a predicate over the elements of an object: comparisons (Gt, Lt,
// Ge, Le, Eq, Where) combined with And and Or. The zero Pred is invalid.
// Values are converted to the object's element type when the query runs:
// any number for float objects (rounded to float32 for float32), whole
// numbers in range for integer objects. A Pred is immutable and may be
// shared.
type Pred struct{ e dataquery.Expr }

// Where compares each element with v by op.
func Where[T Number](op Op, v T) Pred {
	var val dataquery.Value
	switch {
	case isFloat(v):
		val = dataquery.Value{Kind: dataquery.KindFloat, F: float64(v)}
	case v < 0:
		val = dataquery.Value{Kind: dataquery.KindInt, I: int64(v)}
	default:
		val = dataquery.Value{Kind: dataquery.KindUint, U: uint64(v)}
	}
	return Pred{dataquery.Compare(uint32(op), val)}
}

// isFloat reports whether T is a float type.
func isFloat[T Number](v T) bool {
	var z T
	z = 1
	z /= 2
	return z != 0
}

// Gt is "element > v".
func Gt[T Number](v T) Pred { return Where(GT, v) }

// Lt is "element < v".
func Lt[T Number](v T) Pred { return Where(LT, v) }

// Ge is "element >= v".
func Ge[T Number](v T) Pred { return Where(GE, v) }

// Le is "element <= v".
func Le[T Number](v T) Pred { return Where(LE, v) }

// Eq is "element == v".
func Eq[T Number](v T) Pred { return Where(EQ, v) }

// WhereTyped compares each element with value, an element of type t
// (little-endian): the form of PDCquery_create.
func WhereTyped(op Op, t region.Type, value []byte) (Pred, error) {
	v, err := dataquery.Decode(t, value)
	if err != nil {
		return Pred{}, err
	}
	if op < GT || op > EQ {
		return Pred{}, fmt.Errorf("query operator %d: %w", int(op), pdc.ErrInvalid)
	}
	return Pred{dataquery.Compare(uint32(op), v)}, nil
}

// And is p and q.
func (p Pred) And(q Pred) Pred { return Pred{dataquery.Join(p.e, q.e, wire.QueryAND)} }

// Or is p or q.
func (p Pred) Or(q Pred) Pred { return Pred{dataquery.Join(p.e, q.e, wire.QueryOR)} }

// Len is the number of nodes of p: its comparisons and the ANDs and ORs
// joining them. Servers evaluate predicates of at most 1024 nodes; p.And(p)
// has twice as many as p, plus one.
func (p Pred) Len() int { return len(p.e) }

// And is every one of ps (which must not be empty).
func And(ps ...Pred) Pred { return fold(ps, wire.QueryAND) }

// Or is any one of ps (which must not be empty).
func Or(ps ...Pred) Pred { return fold(ps, wire.QueryOR) }

func fold(ps []Pred, op uint32) Pred {
	es := make([]dataquery.Expr, len(ps))
	for i, p := range ps {
		es[i] = p.e
	}
	return Pred{dataquery.Fold(es, op)}
}

func (p Pred) String() string { return p.e.String() }

// DataQueryOption changes what Object.Query covers or returns.
type DataQueryOption func(*dataQueryOptions)

type dataQueryOptions struct {
	within *region.Box
	ret    uint32
}

// Within restricts a query to a region of the object (PDCquery_sel_region).
func Within(box region.Box) DataQueryOption {
	return func(o *dataQueryOptions) { b := box.Clone(); o.within = &b }
}

// WithSelection asks for the hits' positions, not only their number.
func WithSelection() DataQueryOption {
	return func(o *dataQueryOptions) { o.ret = max(o.ret, wire.QuerySelection) }
}

// WithValues asks for the hits' positions and values.
func WithValues() DataQueryOption {
	return func(o *dataQueryOptions) { o.ret = wire.QueryValues }
}

// QueryResult is what a data query found.
type QueryResult struct {
	// Hits is the number of elements that satisfy the predicate.
	Hits uint64
	// Selection holds the hits' row-major (linear) indices in the object,
	// ascending: with WithSelection or WithValues.
	Selection []uint64
	// Values holds the hits' elements, in Selection's order, in the
	// object's element type: with WithValues.
	Values []byte
	// Dims are the object's dims the indices refer to.
	Dims []uint64
}

// Coord returns the coordinates of hit i.
func (r *QueryResult) Coord(i int) []uint64 {
	return region.Delinearize(r.Dims, r.Selection[i], nil)
}

// Query finds the elements of the object that satisfy pred
// (PDCquery_create ... PDCquery_get_nhits/get_selection/get_data). It is
// evaluated on the data servers that hold the object's parts, in
// parallel, and only the hits travel. Parts of the object never written
// read as zeros, so they match a predicate zero satisfies. Like a read,
// the query sees this client's writes started before it, and other
// clients' writes that were waited for. Errors wrap
// pdc.ErrInvalid for a predicate the object's type cannot take (strings
// and raw bytes cannot be queried; a fraction over an integer type) or a
// region outside its dims, and pdc.ErrTooLarge when a selection does not
// fit in one answer (restrict it with Within, or ask only for the count).
// Safe for concurrent use with other calls on other objects.
func (o *Object) Query(ctx context.Context, pred Pred, opts ...DataQueryOption) (*QueryResult, error) {
	var qo dataQueryOptions
	for _, opt := range opts {
		opt(&qo)
	}
	// Like a read, the query comes after this client's writes started
	// before it: every queued start placed and sent, and every start
	// answered, so that the data servers have registered the writes
	// (which the query then waits for) and the metadata server has
	// recorded where a region-dynamic or region-local write goes.
	if err := o.c.xfer.Settle(ctx); err != nil {
		return nil, fmt.Errorf("object %q: query %s: %w", o.meta().Name, pred, err)
	}
	if err := o.c.xfer.CollectStarts(ctx); err != nil {
		return nil, fmt.Errorf("object %q: query %s: %w", o.meta().Name, pred, err)
	}
	res, err := o.query(ctx, pred, qo)
	if errors.Is(err, pdc.ErrStale) || errors.Is(err, pdc.ErrOutOfRange) && qo.within == nil {
		// Another client changed the dims: look again, once. A data
		// server says so (stale); a metadata server asked where the
		// regions of a region-dynamic or region-local object went says
		// the whole object, as this handle last saw it, is past its end.
		// Within, out of range, is the caller's to fix.
		if _, rerr := o.Refresh(ctx); rerr != nil {
			return nil, rerr
		}
		res, err = o.query(ctx, pred, qo)
	}
	if err != nil {
		return nil, fmt.Errorf("object %q: query %s: %w", o.meta().Name, pred, err)
	}
	return res, nil
}

func (o *Object) query(ctx context.Context, pred Pred, qo dataQueryOptions) (*QueryResult, error) {
	typ := o.meta().Props.Type
	nodes, err := pred.e.Encode(typ)
	if err != nil {
		return nil, err
	}
	prog, err := dataquery.Compile(typ, nodes)
	if err != nil {
		return nil, err
	}
	dims, area, err := o.queryArea(ctx, qo)
	if err != nil {
		return nil, err
	}
	elem := typ.Size()
	out := &QueryResult{Dims: dims}
	if area.Volume() == 0 {
		return out, nil
	}
	pieces, err := o.x.ReadPieces(ctx, area)
	if err != nil {
		return nil, err
	}
	var parts []dataquery.Hits
	if prog.MatchesZero() {
		held := make([]region.Box, len(pieces))
		for i, pc := range pieces {
			held[i] = pc.Box
		}
		zero, err := dataquery.ZeroHits(area, held, dims, qo.ret, elem)
		if err != nil {
			return nil, err
		}
		parts = append(parts, zero...)
	}
	var within *wire.QueryBox
	if qo.within != nil {
		within = &wire.QueryBox{Off: area.Off, Size: area.Size}
	}
	calls := dataquery.Calls(len(pieces), func(i int) (int, int, region.Box) { return pieces[i].Server, pieces[i].Slot, pieces[i].Box })
	got := make([]dataquery.Hits, len(calls))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, cl := range calls {
		g.Go(func() error {
			m := wire.DataQuery{Version: wire.QueryVersion, Obj: o.meta().ID, Dims: o.meta().Props.Dims, DimsVersion: o.meta().DimsVersion,
				Type: uint32(typ), Storage: uint32(o.meta().Props.Storage), Nodes: nodes, Boxes: cl.Boxes, Within: within, Return: qo.ret,
				Slot: uint32(cl.Slot) + 1}
			h, err := o.c.dataQueryCall(gctx, cl.Server, &m)
			if err != nil {
				return err
			}
			got[i] = h
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	parts = append(parts, got...)
	out.Hits, out.Selection, out.Values = dataquery.Merge(parts, qo.ret, elem)
	return out, nil
}

// queryArea is the object's dims and the region a query covers: Within's,
// checked against the dims (looked up again if it lies outside them), or
// the whole object, whose dims must then be fixed.
func (o *Object) queryArea(ctx context.Context, qo dataQueryOptions) ([]uint64, region.Box, error) {
	if qo.within == nil {
		dims := slices.Clone(o.meta().Props.Dims)
		if len(dims) == 0 || slices.Contains(dims, Unlimited) {
			return nil, region.Box{}, fmt.Errorf("dims %v are not fixed: give a region with Within: %w", dims, pdc.ErrInvalid)
		}
		return dims, region.Shape(dims...), nil
	}
	area := *qo.within
	if err := area.Check(); err != nil {
		return nil, area, fmt.Errorf("region: %w", err)
	}
	if err := o.x.CheckRemote(ctx, area); err != nil {
		return nil, area, err
	}
	return slices.Clone(o.meta().Props.Dims), area, nil
}

func (c *Client) dataQueryCall(ctx context.Context, server int, m *wire.DataQuery) (dataquery.Hits, error) {
	conn, err := c.conn(ctx, server)
	if err != nil {
		return dataquery.Hits{}, err
	}
	rep, err := conn.Call(ctx, wire.MethodDataQuery, m.Marshal(nil), nil, nil)
	if err != nil {
		return dataquery.Hits{}, err
	}
	var res wire.DataQueryResult
	if err := res.Unmarshal(rep.Header); err != nil {
		return dataquery.Hits{}, fmt.Errorf("%s: %w", c.label(server), err)
	}
	want := m.Return >= wire.QuerySelection
	if res.Selection != want || (m.Return == wire.QueryValues) != (res.ValueSize != 0) {
		return dataquery.Hits{}, fmt.Errorf("%s: the answer does not carry what was asked: %w", c.label(server), pdc.ErrProtocol)
	}
	idx, vals, err := wire.ParseQueryResult(&res, rep.Payload)
	if err != nil {
		return dataquery.Hits{}, fmt.Errorf("%s: %w", c.label(server), err)
	}
	return dataquery.Hits{N: res.Hits, Idx: idx, Vals: vals}, nil
}
