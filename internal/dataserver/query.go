package dataserver

import (
	"context"
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dataquery"
	"github.com/pdcgo/pdc/internal/regionstore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// queryChunk bounds the bytes of elements a query reads at a time.
const queryChunk = 4 << 20

// maxQueryBoxes bounds the boxes of one query.
const maxQueryBoxes = 1 << 16

// query evaluates a predicate over the parts of an object this server
// holds (MethodDataQuery). It reads them in chunks of at most queryChunk
// bytes, each held against the data budget while it is evaluated, so a
// query's memory is that chunk plus its answer; the answer (indices and
// values) is bounded by MaxTransfer. Parts never written read as zeros,
// and so match a predicate that zero satisfies. It runs after the writes
// to the object that the same client started before it (as a read does),
// and sees the writes of other clients that were waited for.
func (s *Service) query(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.DataQuery
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	q, err := s.checkQuery(&m)
	if err != nil {
		return nil, err
	}
	if err := s.awaitSlots(ctx); err != nil {
		return nil, err
	}
	store, err := s.slotStore(m.Slot)
	if err != nil {
		return nil, fmt.Errorf("query object %d: %w", m.Obj, err)
	}
	if err := s.admitIDs(ctx, []uint64{m.Obj}); err != nil {
		return nil, err
	}
	floor, _ := store.Version(m.Obj) // the query's own read reports a store that cannot answer
	qt := &transfer{item: wire.DataItem{Obj: m.Obj, Dims: m.Dims, DimsVersion: m.DimsVersion}, floor: floor}
	if err := s.confirmDims(ctx, []*transfer{qt}); err != nil {
		return nil, err
	}
	if err := s.afterOwnWrites(ctx, req.Client, &m, floor); err != nil {
		return nil, err
	}

	elem := q.prog.Elem()
	chunkBytes := int64(queryChunk)
	if s.cfg.queryChunk > 0 {
		chunkBytes = s.cfg.queryChunk
	}
	chunkElems := max(chunkBytes/int64(elem), 1)
	grant := min(chunkElems*int64(elem), s.cfg.MaxBytes)
	if err := s.acquireQuery(ctx, grant); err != nil {
		return nil, err
	}
	defer s.budget.Release(grant)
	e := newQueryEval(store, &m, q, chunkElems, uint64(s.cfg.MaxTransfer))
	for _, box := range q.boxes {
		var cerr error
		chunks(box, uint64(chunkElems), func(c region.Box) bool {
			cerr = e.chunk(ctx, c)
			return cerr == nil
		})
		if cerr != nil {
			return nil, cerr
		}
	}
	resp := rpc.Respond(&e.res)
	if len(e.idx) > 0 {
		resp.Payload = [][]byte{e.idx}
		if len(e.vals) > 0 {
			resp.Payload = append(resp.Payload, e.vals)
		}
	}
	return resp, nil
}

// afterOwnWrites waits, like a read, for the writes to the query's object
// that the same client started before it, once the object is known not
// deleted and the query's layout is recorded.
func (s *Service) afterOwnWrites(ctx context.Context, client string, m *wire.DataQuery, floor uint64) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return errClosing
	}
	if err := s.deadLocked(m.Obj); err != nil {
		s.mu.Unlock()
		return err
	}
	err := s.observeLayout(wire.DataItem{Obj: m.Obj, Dims: m.Dims, DimsVersion: m.DimsVersion}, floor)
	var deps []*transfer
	for w := range s.mu.writes[m.Obj] {
		if w.client == client {
			deps = append(deps, w)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	for _, w := range deps {
		select {
		case <-w.done:
		case <-ctx.Done():
			return ctxErr(ctx, ctx.Err())
		}
	}
	return nil
}

// queryEval evaluates a query chunk by chunk, gathering its answer.
type queryEval struct {
	store       *regionstore.Store
	m           *wire.DataQuery
	q           *checkedQuery
	elem        int
	maxTransfer uint64
	per         uint64 // answer bytes per hit: index and value
	buf         []byte // a chunk's elements
	mask        []bool // which of them match
	coord       []uint64

	res       wire.DataQueryResult
	idx, vals []byte
}

func newQueryEval(store *regionstore.Store, m *wire.DataQuery, q *checkedQuery, chunkElems int64, maxTransfer uint64) *queryEval {
	elem := q.prog.Elem()
	words := make([]uint64, (chunkElems*int64(elem)+7)/8) // aligned for every element type
	e := &queryEval{
		store: store, m: m, q: q, elem: elem, maxTransfer: maxTransfer,
		buf:   unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8),
		mask:  make([]bool, chunkElems),
		coord: make([]uint64, len(m.Dims)),
		res:   wire.DataQueryResult{Selection: m.Return >= wire.QuerySelection},
	}
	if m.Return == wire.QueryValues {
		e.res.ValueSize = uint32(elem)
	}
	e.per = uint64(e.res.ValueSize)
	if e.res.Selection {
		e.per += 8
	}
	return e
}

// chunk reads the elements of c and matches them, counting or
// gathering the hits.
func (e *queryEval) chunk(ctx context.Context, c region.Box) error {
	if err := ctx.Err(); err != nil {
		return ctxErr(ctx, err)
	}
	n := int(c.Volume())
	data := e.buf[:n*e.elem]
	if err := e.store.Read(e.m.Obj, e.q.layout, c, data); err != nil {
		return fmt.Errorf("query object %d region %v: %w", e.m.Obj, c, err)
	}
	out := e.mask[:n]
	e.q.prog.Match(data, out)
	if e.per == 0 {
		e.res.Hits += countTrue(out)
		return nil
	}
	return e.gather(c, data, out)
}

// gather appends the linear index, and the value if asked for, of each
// hit of chunk c, within MaxTransfer.
func (e *queryEval) gather(c region.Box, data []byte, out []bool) error {
	// Hits of one row of the last dim are contiguous in the object: its
	// linear index is computed once per row.
	coord, elem := e.coord, e.elem
	last := len(coord) - 1
	rowLen := c.Size[last]
	row, base := ^uint64(0), uint64(0)
	for i, hit := range out {
		if !hit {
			continue
		}
		e.res.Hits++
		if e.res.Hits*e.per > e.maxTransfer {
			return fmt.Errorf("query object %d: more than %d hits, whose selection exceeds %d bytes: restrict the query or ask for the count: %w",
				e.m.Obj, e.res.Hits-1, e.maxTransfer, pdc.ErrTooLarge)
		}
		if r := uint64(i) / rowLen; r != row {
			row = r
			rest := r
			for d := last - 1; d >= 0; d-- {
				coord[d] = c.Off[d] + rest%c.Size[d]
				rest /= c.Size[d]
			}
			coord[last] = c.Off[last]
			base = region.Linearize(e.m.Dims, coord)
		}
		e.idx = binary.LittleEndian.AppendUint64(e.idx, base+uint64(i)%rowLen)
		if e.res.ValueSize != 0 {
			e.vals = append(e.vals, data[i*elem:(i+1)*elem]...)
		}
	}
	return nil
}

type checkedQuery struct {
	prog   *dataquery.Program
	layout regionstore.Layout
	boxes  []region.Box // restricted to Within
}

// checkQuery validates a query request: every error names what was wrong
// and wraps pdc.ErrInvalid (or ErrProtocol for a version this server does
// not speak).
func (s *Service) checkQuery(m *wire.DataQuery) (*checkedQuery, error) {
	if m.Version != wire.QueryVersion {
		return nil, fmt.Errorf("data query version %d, this server speaks %d: %w", m.Version, wire.QueryVersion, pdc.ErrProtocol)
	}
	if m.Type > 1<<16 {
		return nil, fmt.Errorf("query object %d: element type %d: %w", m.Obj, m.Type, pdc.ErrInvalid)
	}
	typ := region.Type(m.Type)
	prog, err := dataquery.Compile(typ, m.Nodes)
	if err != nil {
		return nil, fmt.Errorf("query object %d: %w", m.Obj, err)
	}
	if len(m.Dims) == 0 || len(m.Dims) > region.MaxDims {
		return nil, fmt.Errorf("query object %d: %d dims: %w", m.Obj, len(m.Dims), pdc.ErrInvalid)
	}
	if len(m.Boxes) > maxQueryBoxes {
		return nil, fmt.Errorf("query object %d: %d boxes, at most %d: %w", m.Obj, len(m.Boxes), maxQueryBoxes, pdc.ErrInvalid)
	}
	if m.Return > wire.QueryValues {
		return nil, fmt.Errorf("query object %d: unknown return kind %d: %w", m.Obj, m.Return, pdc.ErrInvalid)
	}
	var mode regionstore.Mode
	switch m.Storage {
	case 0, uint32(regionstore.ByOffset):
		mode = regionstore.ByOffset
	case uint32(regionstore.ByRegion):
		mode = regionstore.ByRegion
	default:
		return nil, fmt.Errorf("query object %d: unknown storage mode %d: %w", m.Obj, m.Storage, pdc.ErrInvalid)
	}
	inBox := func(what string, qb wire.QueryBox) (region.Box, error) {
		b := region.Box{Off: qb.Off, Size: qb.Size}
		if err := b.Check(); err != nil {
			return b, fmt.Errorf("query object %d: %s: %w", m.Obj, what, err)
		}
		if b.Ndim() != len(m.Dims) {
			return b, fmt.Errorf("query object %d: %s %v has %d dims, the object %d: %w", m.Obj, what, b, b.Ndim(), len(m.Dims), pdc.ErrInvalid)
		}
		if err := b.Within(m.Dims); err != nil {
			return b, fmt.Errorf("query object %d: %s: %w", m.Obj, what, err)
		}
		return b, nil
	}
	q := &checkedQuery{prog: prog, layout: regionstore.Layout{Dims: m.Dims, Elem: prog.Elem(), Mode: mode, Version: m.DimsVersion}}
	var within region.Box
	if m.Within != nil {
		if within, err = inBox("query region", *m.Within); err != nil {
			return nil, err
		}
	}
	for i, qb := range m.Boxes {
		b, err := inBox(fmt.Sprintf("part %d", i+1), qb)
		if err != nil {
			return nil, err
		}
		if m.Within != nil {
			var ok bool
			if b, ok = region.Intersect(b, within); !ok {
				continue
			}
		}
		q.boxes = append(q.boxes, b)
	}
	return q, nil
}

// acquireQuery takes n bytes of the data budget for a query's chunk.
func (s *Service) acquireQuery(ctx context.Context, n int64) error {
	if s.quit.Err() != nil {
		return errClosing
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.quit, cancel)()
	if err := s.budget.Acquire(actx, n); err != nil {
		if ctx.Err() == nil && s.quit.Err() != nil {
			return errClosing
		}
		return fmt.Errorf("query waiting for room: %w", ctxErr(ctx, err))
	}
	return nil
}

// chunks calls fn with sub-boxes of box, in row-major order, of at most
// limit elements each (limit >= 1): runs of whole rows of the first dim
// where they fit, else the same split of each row. It stops when fn
// returns false, and reports whether it ran to the end.
func chunks(box region.Box, limit uint64, fn func(region.Box) bool) bool {
	if box.Volume() <= limit {
		return fn(box)
	}
	row := box.Volume() / box.Size[0]
	if row <= limit {
		step := limit / row
		for r := uint64(0); r < box.Size[0]; r += step {
			c := box.Clone()
			c.Off[0] += r
			c.Size[0] = min(step, box.Size[0]-r)
			if !fn(c) {
				return false
			}
		}
		return true
	}
	// A row of the first dim is too large: split each one along the
	// rest of the dims.
	for r := uint64(0); r < box.Size[0]; r++ {
		inner := region.Box{Off: box.Off[1:], Size: box.Size[1:]}
		ok := chunks(inner, limit, func(c region.Box) bool {
			return fn(region.Box{Off: append([]uint64{box.Off[0] + r}, c.Off...), Size: append([]uint64{1}, c.Size...)})
		})
		if !ok {
			return false
		}
	}
	return true
}

// countTrue counts the set entries of mask, without a branch per entry.
func countTrue(mask []bool) uint64 {
	var n uint64
	for _, b := range mask {
		n += uint64(*(*uint8)(unsafe.Pointer(&b)))
	}
	return n
}
