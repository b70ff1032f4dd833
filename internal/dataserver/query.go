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
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil, errClosing
	}
	if err := s.deadLocked(m.Obj); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	err = s.observeLayout(wire.DataItem{Obj: m.Obj, Dims: m.Dims, DimsVersion: m.DimsVersion})
	// Like a read, a query runs after the writes to the object that the
	// same client started before it.
	var deps []*transfer
	for w := range s.mu.writes[m.Obj] {
		if w.client == req.Client {
			deps = append(deps, w)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	for _, w := range deps {
		select {
		case <-w.done:
		case <-ctx.Done():
			return nil, ctxErr(ctx, ctx.Err())
		}
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
	words := make([]uint64, (chunkElems*int64(elem)+7)/8) // aligned for every element type
	buf := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)
	mask := make([]bool, chunkElems)

	res := wire.DataQueryResult{Selection: m.Return >= wire.QuerySelection}
	if m.Return == wire.QueryValues {
		res.ValueSize = uint32(elem)
	}
	per := uint64(res.ValueSize)
	if res.Selection {
		per += 8
	}
	var idx, vals []byte
	coord := make([]uint64, len(m.Dims))
	for _, box := range q.boxes {
		var cerr error
		chunks(box, uint64(chunkElems), func(c region.Box) bool {
			if err := ctx.Err(); err != nil {
				cerr = ctxErr(ctx, err)
				return false
			}
			n := int(c.Volume())
			data := buf[:n*elem]
			if err := store.Read(m.Obj, q.layout, c, data); err != nil {
				cerr = fmt.Errorf("query object %d region %v: %w", m.Obj, c, err)
				return false
			}
			out := mask[:n]
			q.prog.Match(data, out)
			if per == 0 {
				res.Hits += countTrue(out)
				return true
			}
			// Hits of one row of the last dim are contiguous in the
			// object: its linear index is computed once per row.
			last := len(coord) - 1
			rowLen := c.Size[last]
			row, base := ^uint64(0), uint64(0)
			for i, hit := range out {
				if !hit {
					continue
				}
				res.Hits++
				if res.Hits*per > uint64(s.cfg.MaxTransfer) {
					cerr = fmt.Errorf("query object %d: more than %d hits, whose selection exceeds %d bytes: restrict the query or ask for the count: %w",
						m.Obj, res.Hits-1, s.cfg.MaxTransfer, pdc.ErrTooLarge)
					return false
				}
				if r := uint64(i) / rowLen; r != row {
					row = r
					rest := r
					for d := last - 1; d >= 0; d-- {
						coord[d] = c.Off[d] + rest%c.Size[d]
						rest /= c.Size[d]
					}
					coord[last] = c.Off[last]
					base = region.Linearize(m.Dims, coord)
				}
				idx = binary.LittleEndian.AppendUint64(idx, base+uint64(i)%rowLen)
				if res.ValueSize != 0 {
					vals = append(vals, data[i*elem:(i+1)*elem]...)
				}
			}
			return true
		})
		if cerr != nil {
			return nil, cerr
		}
	}
	resp := rpc.Respond(&res)
	if len(idx) > 0 {
		resp.Payload = [][]byte{idx}
		if len(vals) > 0 {
			resp.Payload = append(resp.Payload, vals)
		}
	}
	return resp, nil
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
	q := &checkedQuery{prog: prog, layout: regionstore.Layout{Dims: m.Dims, Elem: prog.Elem(), Mode: mode}}
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
