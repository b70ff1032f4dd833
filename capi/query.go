package capi

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// Data queries (PDCquery_*): value ranges over an object's data, evaluated
// on the data servers. A query is a handle of kindQuery holding an
// immutable predicate, the object it is over and the region it is
// restricted to; pdc_query_t in C is a small C struct naming that handle
// (pdc_query.c), so C never holds a Go pointer. A query belongs to its
// object's connection: PDCclose frees it.

// queryState is the state of a kindQuery handle.
type queryState struct {
	objID  uint64      // the object's handle
	qobj   *handle     // its handle (the object may be closed since)
	pred   client.Pred // read only
	within *region.Box // PDCquery_sel_region; guarded by Lib.mu
}

// QueryCreate is PDCquery_create: elements of the object objID compared
// by op (PDC_GT 1 ... PDC_EQ 5) with value, an element of type typ, which
// must be the object's type.
func (l *Lib) QueryCreate(objID uint64, op, typ int, value []byte) uint64 {
	call := fmt.Sprintf("PDCquery_create(obj %d, %s, %s)", objID, queryOpName(op), typeName(typ))
	return l.runID(call, func() (uint64, error) {
		if op < int(client.GT) || op > int(client.EQ) {
			return 0, fmt.Errorf("unknown pdc_query_op_t %d: want PDC_GT (1), PDC_LT (2), PDC_GTE (3), PDC_LTE (4) or PDC_EQ (5): %w", op, pdc.ErrInvalid)
		}
		if !region.Type(typ).Valid() {
			return 0, fmt.Errorf("unknown pdc_var_type_t %d: %w", typ, pdc.ErrInvalid)
		}
		if value == nil {
			return 0, fmt.Errorf("value is NULL: %w", pdc.ErrInvalid)
		}
		var oh *handle
		var pred client.Pred
		err := l.objDo(objID, func(_ context.Context, h *handle) error {
			oh = h
			ot := h.obj.Info().Props.Type
			if region.Type(typ) != ot {
				return fmt.Errorf("object %q holds %s (pdc_var_type_t %d), the value is %s (%d): pass a value of the object's type: %w",
					h.obj.Name(), ot, int(ot), region.Type(typ), typ, pdc.ErrInvalid)
			}
			var err error
			pred, err = client.WhereTyped(client.Op(op), region.Type(typ), value)
			if err != nil {
				return fmt.Errorf("object %q: %w", h.obj.Name(), err)
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		return l.add(&handle{kind: kindQuery, conn: oh.conn, queryState: queryState{objID: objID, qobj: oh, pred: pred}})
	})
}

func queryOpName(op int) string {
	switch op {
	case 1:
		return "PDC_GT"
	case 2:
		return "PDC_LT"
	case 3:
		return "PDC_GTE"
	case 4:
		return "PDC_LTE"
	case 5:
		return "PDC_EQ"
	}
	return fmt.Sprintf("op %d", op)
}

// getQuery returns the query id; 0 is a NULL pdc_query_t.
func (l *Lib) getQuery(id uint64, what string) (*handle, error) {
	if id == 0 {
		return nil, fmt.Errorf("%s is NULL: %w", what, pdc.ErrInvalid)
	}
	h, err := l.get(id, kindQuery)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return h, nil
}

// QueryAnd is PDCquery_and: elements that satisfy both q1 and q2.
func (l *Lib) QueryAnd(q1, q2 uint64) uint64 {
	return l.queryCombine("PDCquery_and", q1, q2, client.Pred.And)
}

// QueryOr is PDCquery_or: elements that satisfy q1 or q2.
func (l *Lib) QueryOr(q1, q2 uint64) uint64 {
	return l.queryCombine("PDCquery_or", q1, q2, client.Pred.Or)
}

// queryCombine makes a new query of q1 and q2, which must be over the same
// object; it is restricted to their region (PDCquery_sel_region), which
// must be the same if both have one. q1 and q2 stay valid and unchanged.
func (l *Lib) queryCombine(name string, q1, q2 uint64, op func(p, q client.Pred) client.Pred) uint64 {
	return l.runID(fmt.Sprintf("%s(query %d, query %d)", name, q1, q2), func() (uint64, error) {
		a, err := l.getQuery(q1, "q1")
		if err != nil {
			return 0, err
		}
		b, err := l.getQuery(q2, "q2")
		if err != nil {
			return 0, err
		}
		if a.qobj != b.qobj {
			return 0, fmt.Errorf("q1 is over object %d, q2 over object %d: a query is over one object: %w", a.objID, b.objID, pdc.ErrInvalid)
		}
		// Checked here: each combination copies both sides, so
		// PDCquery_and(q, q) repeated doubles the query, and would
		// exhaust memory long before a server refused it.
		if n := a.pred.Len() + b.pred.Len() + 1; n > client.MaxPredicateNodes {
			return 0, fmt.Errorf("the query would have %d comparisons, ANDs and ORs, over the servers' limit of %d: %w", n, client.MaxPredicateNodes, pdc.ErrTooLarge)
		}
		l.mu.Lock()
		within := a.within
		if within == nil {
			within = b.within
		} else if b.within != nil && (!slices.Equal(a.within.Off, b.within.Off) || !slices.Equal(a.within.Size, b.within.Size)) {
			l.mu.Unlock()
			return 0, fmt.Errorf("q1 is restricted to region %v, q2 to %v: %w", *a.within, *b.within, pdc.ErrInvalid)
		}
		l.mu.Unlock()
		return l.add(&handle{kind: kindQuery, conn: a.conn, queryState: queryState{objID: a.objID, qobj: a.qobj, pred: op(a.pred, b.pred), within: within}})
	})
}

// QuerySelRegion is PDCquery_sel_region: the query looks only at the
// region offset/size of its object, which must lie inside the object's
// dims. offset and size are nil for NULL.
func (l *Lib) QuerySelRegion(id uint64, offset, size []uint64) int {
	return l.run(fmt.Sprintf("PDCquery_sel_region(query %d, %s, %s)", id, fmtDims(offset), fmtDims(size)), func() error {
		h, err := l.getQuery(id, "query")
		if err != nil {
			return err
		}
		if offset == nil || size == nil {
			return fmt.Errorf("obj_region, its offset or its size is NULL, or its ndim is not 1 to %d: %w", region.MaxDims, pdc.ErrInvalid)
		}
		box, err := region.New(slices.Clone(offset), slices.Clone(size))
		if err != nil {
			return err
		}
		err = l.objDo(h.objID, func(ctx context.Context, o *handle) error {
			return checkDimsNow(ctx, o.obj, func(dims []uint64) error {
				if len(dims) != box.Ndim() {
					return fmt.Errorf("region %v has %d dims, object %q %d: %w", box, box.Ndim(), o.obj.Name(), len(dims), pdc.ErrInvalid)
				}
				for i, d := range dims {
					if d != client.Unlimited && box.End(i) > d {
						return fmt.Errorf("region %v ends at %d in dimension %d, past object %q's %d: %w", box, box.End(i), i, o.obj.Name(), d, pdc.ErrInvalid)
					}
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
		l.mu.Lock()
		h.within = &box
		l.mu.Unlock()
		return nil
	})
}

// queryRun runs query id on its object.
func (l *Lib) queryRun(id uint64, opts ...client.DataQueryOption) (*client.QueryResult, error) {
	h, err := l.getQuery(id, "query")
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if h.within != nil {
		opts = append(opts, client.Within(*h.within))
	}
	l.mu.Unlock()
	var res *client.QueryResult
	err = l.objDo(h.objID, func(ctx context.Context, o *handle) error {
		res, err = o.obj.Query(ctx, h.pred, opts...)
		return err
	})
	return res, err
}

// QueryNHits is PDCquery_get_nhits: how many elements satisfy the query.
func (l *Lib) QueryNHits(id uint64) (uint64, int) {
	var n uint64
	rc := l.run(fmt.Sprintf("PDCquery_get_nhits(query %d)", id), func() error {
		res, err := l.queryRun(id)
		if err == nil {
			n = res.Hits
		}
		return err
	})
	return n, rc
}

// Selection is what PDCquery_get_selection returns: the hits' coordinates,
// NDim per hit, hits in row-major order.
type Selection struct {
	NDim   int
	NHits  uint64
	Coords []uint64
}

// QueryGetSelection is PDCquery_get_selection.
func (l *Lib) QueryGetSelection(id uint64) (Selection, int) {
	var sel Selection
	rc := l.run(fmt.Sprintf("PDCquery_get_selection(query %d)", id), func() error {
		res, err := l.queryRun(id, client.WithSelection())
		if err != nil {
			return err
		}
		sel.NDim, sel.NHits = len(res.Dims), res.Hits
		sel.Coords = make([]uint64, 0, len(res.Selection)*len(res.Dims))
		for i := range res.Selection {
			sel.Coords = append(sel.Coords, res.Coord(i)...)
		}
		return nil
	})
	return sel, rc
}

// QueryGetData is PDCquery_get_data: the values of the hits of sel (of
// query sel's query id) in the object objID, in the selection's order, as
// elements of that object's type. For the queried object the query runs
// again with values: it fails if it no longer hits sel.NHits elements (the
// data changed since PDCquery_get_selection). Another object (PDC's way of
// reading, say, the energy where the temperature matched) must have as
// many dims, each holding the coordinates; the bounding box of the hits is
// read, which must fit in maxQueryBox (1 GiB). fill gets the values; it is
// called only if all is well.
func (l *Lib) QueryGetData(objID, id uint64, sel Selection, fill func(vals []byte) error) int {
	return l.run(fmt.Sprintf("PDCquery_get_data(obj %d, selection of query %d, %d hits)", objID, id, sel.NHits), func() error {
		h, err := l.getQuery(id, "the selection's query_id")
		if err != nil {
			return err
		}
		if objID == h.objID {
			res, err := l.queryRun(id, client.WithValues())
			if err != nil {
				return err
			}
			if res.Hits != sel.NHits {
				return fmt.Errorf("the query hits %d elements now, the selection holds %d: the data changed since PDCquery_get_selection: %w", res.Hits, sel.NHits, pdc.ErrStale)
			}
			return fill(res.Values)
		}
		if sel.NHits == 0 {
			return fill(nil)
		}
		if want, ok := mulOK(sel.NHits, uint64(sel.NDim)); sel.NDim < 1 || !ok || uint64(len(sel.Coords)) != want {
			return fmt.Errorf("the selection's ndim %d and nhits %d do not match its coords: %w", sel.NDim, sel.NHits, pdc.ErrInvalid)
		}
		return l.objDo(objID, func(ctx context.Context, o *handle) error {
			return readAt(ctx, o, sel, fill)
		})
	})
}

// maxQueryBox bounds the box PDCquery_get_data reads from another object
// (pdc_query.h promises 1 GiB): it is allocated whole.
const maxQueryBox = 1 << 30

// checkDimsNow runs check on the object's dims as the handle has them
// and, if that fails, on its dims as its server has them now: another
// process may have changed them since this one opened it.
func checkDimsNow(ctx context.Context, o *client.Object, check func(dims []uint64) error) error {
	if check(o.Info().Props.Dims) == nil {
		return nil
	}
	dims, err := o.Dims(ctx)
	if err != nil {
		return err
	}
	return check(dims)
}

// readAt reads the elements of object o at sel's coordinates.
func readAt(ctx context.Context, o *handle, sel Selection, fill func(vals []byte) error) error {
	err := checkDimsNow(ctx, o.obj, func(dims []uint64) error {
		if len(dims) != sel.NDim {
			return fmt.Errorf("object %q has %d dims, the selection %d: %w", o.obj.Name(), len(dims), sel.NDim, pdc.ErrInvalid)
		}
		for i, c := range sel.Coords {
			if d := i % sel.NDim; dims[d] != client.Unlimited && c >= dims[d] {
				return fmt.Errorf("hit %d is at %d in dimension %d, past object %q's %d: %w", i/sel.NDim, c, d, o.obj.Name(), dims[d], pdc.ErrInvalid)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	info := o.obj.Info().Props
	lo := slices.Clone(sel.Coords[:sel.NDim])
	hi := slices.Clone(lo)
	for i, c := range sel.Coords {
		d := i % sel.NDim
		lo[d], hi[d] = min(lo[d], c), max(hi[d], c)
	}
	size := make([]uint64, sel.NDim)
	elem := uint64(max(info.Type.Size(), 1))
	n, ok := elem, true
	for d := range size {
		size[d] = hi[d] - lo[d] + 1
		if ok {
			n, ok = mulOK(n, size[d])
		}
	}
	if !ok || n > maxQueryBox {
		return fmt.Errorf("the hits span a box %v of %d-byte elements of object %q, over the limit of 1 GiB: restrict the query (PDCquery_sel_region): %w",
			size, elem, o.obj.Name(), pdc.ErrTooLarge)
	}
	box, err := region.New(lo, size)
	if err != nil {
		return err
	}
	buf := make([]byte, n)
	if err := o.obj.Read(ctx, box, buf); err != nil {
		return err
	}
	vals := make([]byte, 0, sel.NHits*elem)
	for i := uint64(0); i < sel.NHits; i++ {
		var at uint64
		for d := range size {
			at = at*size[d] + sel.Coords[i*uint64(sel.NDim)+uint64(d)] - lo[d]
		}
		vals = append(vals, buf[at*elem:(at+1)*elem]...)
	}
	return fill(vals)
}

// QueryFree is PDCquery_free (and each step of PDCquery_free_all): it
// releases the query. Queries made from it with PDCquery_and/or stay
// valid. A query PDCclose released already is no error.
func (l *Lib) QueryFree(id uint64) int {
	return l.run(fmt.Sprintf("PDCquery_free(query %d)", id), func() error {
		if id == 0 {
			return nil
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		_, err := l.lookupLocked(id, kindQuery)
		switch {
		case err == nil:
			delete(l.mu.handles, id)
		case errors.Is(err, pdc.ErrClosed):
			// PDCclose freed it: freeing the C struct is all that is left.
			err = nil
		}
		return err
	})
}
