package dataserver

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync/atomic"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/regionstore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

func (s *Service) wait(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.DataIDs
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	var dst *laneDst
	if m.Lane != 0 {
		if len(m.LaneOffs) != len(m.IDs) {
			return nil, fmt.Errorf("wait for %d transfers names %d places in lane %d: %w", len(m.IDs), len(m.LaneOffs), m.Lane, pdc.ErrInvalid)
		}
		// A lane the client has just replaced (its start connection was
		// dialled again) is gone: the reads go in the answer instead,
		// which the client takes as well.
		if l, err := s.laneOf(req.Client, m.Lane); err == nil {
			defer l.unref()
			dst = &laneDst{lane: l, offs: m.LaneOffs, moved: &s.laneBytes.out}
		}
	}
	return s.collect(ctx, req.Client, m.IDs, false, dst)
}

// laneDst says where in a lane a wait's reads go: offs[i] is the wire
// offset (plus one) of item i's bytes, 0 for the answer's payload.
type laneDst struct {
	lane  *serverLane
	offs  []uint64
	moved *atomic.Uint64 // the service's bytes read into lanes
}

// toLane copies a read's bytes (the slices segs, or data) into its place
// in the lane, and says so in r.
func (d *laneDst) toLane(i int, t *transfer, segs [][]byte, data []byte, r *wire.DataResult) {
	n := t.bytes()
	dst, err := d.lane.span(d.offs[i], n)
	if err != nil {
		r.Code, r.Message = wire.CodeOf(err), fmt.Sprintf("object %d region %v: %v", t.item.Obj, t.box, err)
		return
	}
	d.moved.Add(uint64(n))
	if segs == nil {
		segs = [][]byte{data}
	}
	// A view's file may have been cut since its CRCs were checked: a
	// fault here fails this read, not the process.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			r.Size, r.InLane = 0, false
			r.Code, r.Message = wire.CodeOf(pdc.ErrStale), fmt.Sprintf("object %d region %v: the object changed while being read (%v); read again", t.item.Obj, t.box, p)
		}
	}()
	pos := 0
	for _, b := range segs {
		pos += copy(dst[pos:], b)
	}
	r.Size, r.InLane = uint64(pos), true
}

// collect waits for the transfers ids of client and answers with how each
// ended and the bytes of the reads. Collected transfers are forgotten. If
// ctx ends first, nothing is forgotten and the client may wait again.
func (s *Service) collect(ctx context.Context, client string, ids []uint64, withIDs bool, dst *laneDst) (*rpc.Response, error) {
	ts := make([]*transfer, len(ids))
	s.mu.Lock()
	for i, id := range ids {
		ts[i] = s.lookup(client, id)
	}
	s.mu.Unlock()
	if err := s.awaitDone(ctx, ts); err != nil {
		return nil, err
	}
	res := wire.DataResults{Items: make([]wire.DataResult, len(ids))}
	if withIDs {
		res.IDs = ids
	}
	reads := make([]*transfer, len(ts)) // by item: the reads answered with bytes
	held := s.take(client, ids, ts, res.Items, reads)
	segs, views := s.viewReads(reads)
	payload := answerReads(res.Items, reads, segs, dst)
	resp := rpc.Respond(&res)
	resp.Payload = payload
	if len(held) > 0 || len(views) > 0 {
		resp.Done = func() {
			for _, v := range views {
				v.Release()
			}
			for _, t := range held {
				s.release(t)
			}
		}
	}
	return resp, nil
}

// awaitDone waits for each of ts (nil: unknown) to be done. A read still
// without budget is read now, by this wait, into the answer.
func (s *Service) awaitDone(ctx context.Context, ts []*transfer) error {
	for _, t := range ts {
		if t == nil {
			continue
		}
		if l := t.lead(); l.lazy.Load() == lazyWaiting {
			// Still without budget: read it now, into the answer.
			for _, d := range l.deps {
				select {
				case <-d.done:
				case <-ctx.Done():
					return fmt.Errorf("waiting for transfer %d (object %d region %v): %w", t.id, t.item.Obj, t.box, ctxErr(ctx, ctx.Err()))
				}
			}
			if l.lazy.CompareAndSwap(lazyWaiting, lazyClaimed) {
				s.complete(l, s.do(l))
			}
		}
		select {
		case <-t.done:
		case <-ctx.Done():
			return fmt.Errorf("waiting for transfer %d (object %d region %v): %w", t.id, t.item.Obj, t.box, ctxErr(ctx, ctx.Err()))
		}
	}
	return nil
}

// take forgets the done transfers ts (ids, of client), putting how each
// ended in items and the reads answered with bytes in reads (by item). It
// returns the reads whose budget the answer holds until sent.
func (s *Service) take(client string, ids []uint64, ts []*transfer, items []wire.DataResult, reads []*transfer) (held []*transfer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range ts {
		r := &items[i]
		if t == nil || s.mu.transfers.get(t.id) != t {
			if s.mu.ended[ids[i]] == client {
				// Its client's connections all closed (a reset, a
				// partition) between its start and this wait.
				r.Code = wire.CodeUnavailable
				r.Message = fmt.Sprintf("transfer %d was dropped when every connection of client %s to this server closed; start it again", ids[i], client)
				continue
			}
			// Unknown, or collected meanwhile by another wait.
			r.Code = wire.CodeNotFound
			r.Message = fmt.Sprintf("transfer %d not found on this server: never started, or already waited", ids[i])
			continue
		}
		s.mu.transfers.del(t.id)
		if t.err != nil {
			r.Code = wire.CodeOf(t.err)
			r.Message = t.err.Error()
			if !t.item.Write {
				held = append(held, t)
			}
			continue
		}
		if !t.item.Write {
			reads[i] = t
			held = append(held, t)
		}
	}
	return held
}

// answerReads puts the bytes of reads (by item) into items: into the
// client's lane where dst gives them a place, else into the payload it
// returns, from their views (segs) or their buffers.
func answerReads(items []wire.DataResult, reads []*transfer, segs [][][]byte, dst *laneDst) [][]byte {
	var payload [][]byte
	for i, t := range reads {
		r := &items[i]
		switch {
		case t == nil:
		case t.err != nil:
			r.Code = wire.CodeOf(t.err)
			r.Message = t.err.Error()
		case dst != nil && dst.offs[i] != 0:
			dst.toLane(i, t, segs[i], t.data, r)
		case segs[i] != nil:
			for _, b := range segs[i] {
				r.Size += uint64(len(b))
			}
			payload = append(payload, segs[i]...)
		default:
			r.Size = uint64(len(t.data))
			payload = append(payload, t.data)
		}
	}
	return payload
}

// viewReads makes the views of the view reads among reads (by item; nil
// for none): segs[i] is item i's bytes. A read is done now, at its wait,
// not at its start: if the object's dims changed since, it is read with
// the newest (the elements inside both keep their places), or fails as
// stale if it no longer fits in them; older dims are never applied. The
// reads of one object share one view. A read whose view fails is read
// into a buffer instead, which reports the error of each read on its own
// (a view fails as a whole).
func (s *Service) viewReads(reads []*transfer) (segs [][][]byte, views []*regionstore.View) {
	s.newestLayouts(reads)
	type key struct {
		obj   uint64
		store *regionstore.Store
	}
	var groups []*readGroup
	byObj := map[key]*readGroup{}
	for i, t := range reads {
		if t == nil || !t.view || t.err != nil {
			continue
		}
		k := key{t.item.Obj, t.store}
		g := byObj[k]
		if g == nil {
			g = &readGroup{obj: t.item.Obj, store: t.store}
			byObj[k] = g
			groups = append(groups, g)
		}
		g.items = append(g.items, i)
	}
	if len(groups) == 0 {
		return make([][][]byte, len(reads)), nil
	}
	segs = make([][][]byte, len(reads))
	for _, g := range groups {
		if v := s.viewReadGroup(g, reads, segs); v != nil {
			views = append(views, v)
		}
	}
	return segs, views
}

// newestLayouts moves the view reads among reads to the newest dims of
// their objects, or fails those that no longer fit in them.
func (s *Service) newestLayouts(reads []*transfer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range reads {
		if t == nil || !t.view {
			continue
		}
		if seen, ok := s.mu.layouts[t.item.Obj]; ok && seen.version > t.layout.Version {
			if err := t.box.Within(seen.dims); err != nil {
				t.err = fmt.Errorf("object %d region %v: the object's dims changed to %v before the read was waited; start it again: %w",
					t.item.Obj, t.box, seen.dims, pdc.ErrStale)
				continue
			}
			t.layout.Dims, t.layout.Version = seen.dims, seen.version
		}
	}
}

// readGroup is the view reads of one object in one store: items are
// their places among the reads.
type readGroup struct {
	obj   uint64
	store *regionstore.Store
	items []int
}

// viewReadGroup views the reads of g that share its first read's layout
// and puts each one's bytes in segs; it returns the view, or nil if the
// reads were read into buffers instead (those with another layout are).
func (s *Service) viewReadGroup(g *readGroup, reads []*transfer, segs [][][]byte) *regionstore.View {
	l := reads[g.items[0]].layout
	var boxes []region.Box
	var in []int
	for _, i := range g.items {
		if t := reads[i]; slices.Equal(t.layout.Dims, l.Dims) && t.layout.Elem == l.Elem {
			boxes = append(boxes, t.box)
			in = append(in, i)
		} else {
			s.readInto(t)
		}
	}
	v, err := s.viewGroup(g.store, g.obj, l, boxes, reads, in)
	if errors.Is(err, regionstore.ErrUnmapped) {
		return nil // read into buffers
	}
	if err == nil && tinyRuns(v) {
		// A column of a wide object is a slice per element: each
		// would cost the socket write more than copying it.
		v.Release()
		err = errTinyRuns
	}
	if err != nil {
		for _, i := range in {
			s.readInto(reads[i])
		}
		return nil
	}
	rest := v.Segs
	for k, i := range in {
		segs[i] = rest[:v.Lens[k]:v.Lens[k]]
		rest = rest[v.Lens[k]:]
		if segs[i] == nil {
			segs[i] = [][]byte{} // a view of nothing is still a view
		}
	}
	return v
}

// viewGroup views boxes, the reads in of one object. The first read of
// an object not mapped yet is read into buffers instead, if its reads
// are large enough and the budget has room for them (see
// regionstore.ViewMapped): then the reads are done, their buffers hold
// budget until their answer is written, and it returns
// regionstore.ErrUnmapped.
func (s *Service) viewGroup(st *regionstore.Store, obj uint64, l regionstore.Layout, boxes []region.Box, reads []*transfer, in []int) (*regionstore.View, error) {
	var n int64
	for _, i := range in {
		n += reads[i].bytes()
	}
	if n < minBuffered*int64(len(in)) || n > s.cfg.MaxBytes || !s.budget.TryAcquire(n) {
		return st.ViewAll(obj, l, boxes)
	}
	v, err := st.ViewMapped(obj, l, boxes)
	if !errors.Is(err, regionstore.ErrUnmapped) {
		s.budget.Release(n)
		return v, err
	}
	for _, i := range in {
		t := reads[i]
		t.held = t.bytes()
		s.readInto(t)
	}
	return nil, err
}

// minBuffered is the smallest average read that a first read reads into
// buffers rather than a mapping: each read into a buffer is a pread and
// an allocation of its own, which for reads of a few KiB costs about what
// mapping their pages does.
const minBuffered = 16 << 10

var errTinyRuns = errors.New("view of tiny runs")

// tinyRuns reports whether v is many slices of under 512 bytes on
// average: better gathered into a buffer than sent slice by slice.
func tinyRuns(v *regionstore.View) bool {
	if len(v.Segs) < 64 {
		return false
	}
	n := 0
	for _, b := range v.Segs {
		n += len(b)
	}
	return n/len(v.Segs) < 512
}

// readInto reads a view read into a buffer, as other reads are; its
// error, if any, becomes the read's.
func (s *Service) readInto(t *transfer) {
	if err := s.do(t); err != nil {
		t.err = err
	}
}

// status reports where transfers stand without waiting. A completed write
// is forgotten once reported; a completed read stays until it is waited,
// since its bytes are collected by the wait.
func (s *Service) status(_ context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.DataIDs
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	res := wire.DataResults{Items: make([]wire.DataResult, len(m.IDs))}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, id := range m.IDs {
		r := &res.Items[i]
		t := s.lookup(req.Client, id)
		if t == nil {
			r.State = wire.StateNotFound
			continue
		}
		select {
		case <-t.done:
		default:
			r.State = wire.StatePending
			continue
		}
		r.State = wire.StateComplete
		if t.err != nil {
			r.Code, r.Message = wire.CodeOf(t.err), t.err.Error()
		}
		if t.item.Write {
			s.mu.transfers.del(id)
		}
	}
	return rpc.Respond(&res), nil
}

func (s *Service) flush(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.IDArg
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	s.mu.Lock()
	err := s.deadLocked(m.ID)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := s.awaitSlots(ctx); err != nil {
		return nil, err
	}
	// Writes to slots this server cannot reach failed: what there is to
	// flush is in the others.
	stores, _ := s.allStores()
	for _, st := range stores {
		if err := st.Flush(m.ID); err != nil {
			return nil, err
		}
	}
	return &rpc.Response{}, nil
}

// delete is MethodDataDelete: a client removes the data of an object
// whose metadata it is deleting. It does not refuse the object: a
// container delete sends it before it deletes the metadata, which may then
// fail; the metadata server's tombstone (gone) does, once the metadata is
// gone.
func (s *Service) delete(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.IDArg
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	if err := s.deleteObject(ctx, m.ID); err != nil {
		return nil, err
	}
	return &rpc.Response{}, nil
}

// maxDeleteObjs bounds the objects of one data_delete_objs request.
const maxDeleteObjs = 1 << 16

// deleteObjs removes the data of many objects, a page of a container
// being deleted, with one fsync of the directory (with sync durability).
func (s *Service) deleteObjs(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.ObjIDs
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	if m.Version != wire.PageVersion {
		return nil, fmt.Errorf("delete objects request of version %d; this server speaks version %d: %w", m.Version, wire.PageVersion, pdc.ErrVersion)
	}
	if len(m.IDs) > maxDeleteObjs {
		return nil, fmt.Errorf("delete the data of %d objects; want at most %d: %w", len(m.IDs), maxDeleteObjs, pdc.ErrInvalid)
	}
	if err := s.deleteData(ctx, m.IDs); err != nil {
		return nil, err
	}
	return &rpc.Response{}, nil
}

// deleteObject removes object id's data.
func (s *Service) deleteObject(ctx context.Context, id uint64) error {
	return s.deleteData(ctx, []uint64{id})
}

// deleteData removes the objects' data once the writes queued for them
// are done.
func (s *Service) deleteData(ctx context.Context, ids []uint64) error {
	if err := s.awaitSlots(ctx); err != nil {
		return err
	}
	// Writes still queued would bring the data back after it is gone.
	var pending []*transfer
	s.mu.Lock()
	for _, id := range ids {
		for w := range s.mu.writes[id] {
			pending = append(pending, w)
		}
	}
	s.mu.Unlock()
	for _, w := range pending {
		select {
		case <-w.done:
		case <-ctx.Done():
			if len(ids) == 1 {
				return fmt.Errorf("object %d: waiting for its queued writes before deleting: %w", ids[0], ctxErr(ctx, ctx.Err()))
			}
			return fmt.Errorf("waiting for the queued writes of %d objects before deleting them: %w", len(ids), ctxErr(ctx, ctx.Err()))
		}
	}
	// Slots this server cannot reach are left alone: the objects' data
	// there, if any, is found as orphaned when they come back.
	stores, _ := s.allStores()
	for _, st := range stores {
		if err := st.DeleteMany(ids); err != nil {
			return err
		}
	}
	s.mu.Lock()
	for _, id := range ids {
		delete(s.mu.layouts, id)
		delete(s.mu.confirmed, id)
	}
	s.mu.Unlock()
	return nil
}

// ctxErr turns a context's end into pdc's sentinel.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return pdc.ErrTimeout
	}
	return pdc.ErrCanceled
}
