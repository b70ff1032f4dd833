package dataserver

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/bufpool"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// firstTouchHere bounds how long startHere holds a connection's reader
// to ask whether an object seen for the first time still exists (one
// round trip to its metadata server, usually well under a millisecond).
const firstTouchHere = 200 * time.Millisecond

// startHere stores a request of writes on the goroutine that read its
// header, each as its bytes arrive, and answers once they are stored,
// when nothing stands in their way: no write of their objects is queued
// for the workers (which they must not overtake; writes being stored as
// they arrive on other connections are concurrent with them, as any two
// clients' writes are, and the object's lock orders them). Anything
// else, reads included, goes to start. Handing the bytes to a worker would gather them in a buffer
// first, which falls out of the CPU cache before the worker stores it,
// and add two thread hand-offs per request: measured with 1 GiB in 1 MiB
// regions, a fifth of the data server's time; in 16 MiB regions more.
// Here each bufferful is stored from one small buffer while the next
// waits in the socket. The budget is not taken: no more than that buffer
// is held.
func (s *Service) startHere(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.DataStart
	inLane, ok := s.canStartHere(ctx, req, &m)
	if !ok {
		return nil, rpc.ErrElsewhere
	}
	if inLane {
		return s.storeFromLane(ctx, req, &m)
	}
	ts := make([]*transfer, len(m.Items))
	if err := s.checkHere(req, m.Items, ts); err != nil {
		return nil, err
	}
	merge(ts, nil, nil)
	if err := s.storeHere(ctx, req, ts); err != nil {
		return nil, err
	}
	return s.started(ctx, req.Client, ts, m.Wait)
}

// canStartHere decodes the start into m and says whether startHere may
// take it, and whether its bytes are all in the client's lane. Anything
// it cannot take, malformed starts included, goes to start, which
// reports it.
func (s *Service) canStartHere(ctx context.Context, req *rpc.Request, m *wire.DataStart) (inLane, ok bool) {
	if s.cfg.beforeIO != nil {
		return false, false // the knob holds I/O in the workers
	}
	if req.Behind() || !s.slotsSet() {
		// An earlier start of this connection is not registered yet:
		// this one must not overtake it. Or the server is still
		// starting: start waits for it.
		return false, false
	}
	if err := m.Unmarshal(req.Header); err != nil || len(m.Items) == 0 {
		return false, false // start reports it
	}
	inLane = m.Lane != 0 && req.BodyLen == 0
	if !inLane && req.BodyLen == 0 {
		return false, false
	}
	for _, it := range m.Items {
		if !it.Write || inLane != (it.Lane != 0) {
			return false, false
		}
	}
	if known, err := s.admitNow(m.Items); err != nil {
		return false, false // start refuses a deleted object
	} else if !known {
		// An object seen for the first time: its metadata server is
		// asked here, on the reader, for a short while. Sent to the
		// workers, this start would have every later start of the
		// object follow it there while it is queued, which under a
		// full pipeline is all of them: 4 KiB writes lost a fifth of
		// their rate so. A question that takes longer goes on in start.
		actx, cancel := context.WithTimeout(ctx, firstTouchHere)
		err := s.admit(actx, m.Items)
		cancel()
		if err != nil {
			return false, false
		}
	}
	if s.mustConfirm(m.Items) {
		// Dims that may cut stored data, or whose lease ended: their
		// metadata server is asked here, on the reader, as for an
		// object seen for the first time, so that this start is not
		// overtaken by the next ones.
		// A refusal, or a question that takes longer, goes to start,
		// which asks again and reports it.
		ts := make([]*transfer, len(m.Items))
		for i, it := range m.Items {
			ts[i] = &transfer{item: it}
		}
		actx, cancel := context.WithTimeout(ctx, firstTouchHere)
		err := s.confirmDims(actx, ts)
		cancel()
		if err != nil {
			return false, false
		}
	}
	return inLane, !s.queuedFor(m.Items)
}

// queuedFor says whether a write of one of the items' objects is queued
// for the workers, or the service is closed.
func (s *Service) queuedFor(items []wire.DataItem) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return true
	}
	for _, it := range items {
		if s.mu.queued[it.Obj] > 0 {
			return true
		}
	}
	return false
}

// checkHere checks the writes of a start taken here, into ts, and places
// each in the request's body, which must carry exactly their bytes.
func (s *Service) checkHere(req *rpc.Request, items []wire.DataItem, ts []*transfer) error {
	slab := make([]transfer, len(items))
	var pos uint64
	for i, it := range items {
		t, err := s.check(req.Client, it, &slab[i])
		if err != nil {
			return fmt.Errorf("transfer %d of %d: %w", i+1, len(items), err)
		}
		t.payOff = pos
		pos += uint64(t.bytes())
		ts[i] = t
	}
	if pos != uint64(req.BodyLen) {
		return fmt.Errorf("the writes cover %d bytes, the request carries %d: %w", pos, req.BodyLen, pdc.ErrInvalid)
	}
	floorVersions(ts)
	return nil
}

// storeHere stores the writes ts from the request's body as it arrives,
// one bufferful at a time. On a failure the writes it took are
// forgotten.
func (s *Service) storeHere(ctx context.Context, req *rpc.Request, ts []*transfer) error {
	scratch := bufpool.Get(hereChunk)
	defer bufpool.Put(scratch)
	body := &bodyReader{r: req.Body}
	for i, t := range ts {
		if t.follower {
			continue // stored with its leader
		}
		src := io.LimitReader(body, t.ioBytes)
		t.src, t.scratch = src, scratch
		err := s.enqueue(ctx, t, true)
		t.src, t.scratch = nil, nil
		if err == nil && body.err == nil {
			// A store that failed part way left the rest of its bytes.
			_, _ = io.Copy(io.Discard, src)
		}
		if err == nil && body.err != nil {
			err = body.err // the client is gone, or broke the stream
		}
		if err != nil {
			s.forget(req.Client, ts[:i+1])
			return fmt.Errorf("transfer %d of %d (object %d region %v): %w", i+1, len(ts), t.item.Obj, t.box, err)
		}
	}
	return nil
}

// hereChunk is the buffer startHere stores a request's bytes through: a
// few bufferfuls fit in the CPU's L2 cache with the socket's.
const hereChunk = 512 << 10

// bodyReader remembers the first error of a request's body.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

func (s *Service) start(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	msg := &payload{buf: req.Payload, release: req.Release}
	msg.refs.Store(1) // this handler's
	defer msg.unref()
	var m wire.DataStart
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	if err := s.awaitSlots(ctx); err != nil {
		return nil, err
	}
	if err := s.admit(ctx, m.Items); err != nil {
		return nil, err
	}
	// Writes whose bytes are in the client's lane refer to it through
	// laneMsg as the others refer to the payload through msg.
	var ln *serverLane
	var laneMsg *payload
	if m.Lane != 0 {
		l, err := s.laneOf(req.Client, m.Lane)
		switch {
		case err == nil:
			ln, laneMsg = l, &payload{lane: l}
			laneMsg.refs.Store(1)
			defer laneMsg.unref()
		case writesInLane(m.Items):
			return nil, err
		}
		// A lane that holds only places for reads, and that the client
		// has just replaced: the reads go in the answer, as a wait's do.
	}
	ts := make([]*transfer, len(m.Items))
	if err := s.checkStart(req, m.Items, ln, ts); err != nil {
		return nil, err
	}
	if err := s.confirmDims(ctx, ts); err != nil {
		return nil, err
	}
	dst, err := readsToLane(m, ln, &s.laneBytes.out)
	if err != nil {
		return nil, err
	}
	// Writes first, so that reads of the same request see them.
	order := make([]*transfer, 0, len(ts))
	for _, t := range ts {
		if t.item.Write {
			order = append(order, t)
		}
	}
	for _, t := range ts {
		if !t.item.Write {
			order = append(order, t)
		}
	}
	bindPayload(ts, req.Payload, msg, laneMsg)
	var laneMem []byte
	if ln != nil {
		laneMem = ln.mem
	}
	merge(order, req.Payload, laneMem)
	if err := s.enqueueStart(ctx, req, order, ts); err != nil {
		return nil, err
	}
	return s.startedInto(ctx, req.Client, ts, m.Wait, dst)
}

// writesInLane says whether a write of items has its bytes in a lane.
func writesInLane(items []wire.DataItem) bool {
	for _, it := range items {
		if it.Write && it.Lane != 0 {
			return true
		}
	}
	return false
}

// readsToLane is where a waited start's reads go in the client's lane ln:
// a read item's Lane is its place there (plus one), as a DataWait's
// LaneOffs are. nil if none has one, or ln is gone (the answer carries
// them). Only a waited start may name places for reads: the answer of
// another carries no bytes.
func readsToLane(m wire.DataStart, ln *serverLane, moved *atomic.Uint64) (*laneDst, error) {
	var offs []uint64
	for i, it := range m.Items {
		if it.Write || it.Lane == 0 {
			continue
		}
		if !m.Wait {
			return nil, fmt.Errorf("transfer %d of %d is a read with a place in a lane, in a start that is not waited: %w", i+1, len(m.Items), pdc.ErrInvalid)
		}
		if offs == nil {
			offs = make([]uint64, len(m.Items))
		}
		offs[i] = it.Lane
	}
	if offs == nil || ln == nil {
		return nil, nil
	}
	return &laneDst{lane: ln, offs: offs, moved: moved}, nil
}

// checkStart checks the items of a start, into ts; a write whose bytes
// are in the client's lane ln gets its span there. The other writes'
// bytes must be exactly the request's payload.
func (s *Service) checkStart(req *rpc.Request, items []wire.DataItem, ln *serverLane, ts []*transfer) error {
	slab := make([]transfer, len(items))
	var writeBytes uint64
	for i, it := range items {
		t, err := s.check(req.Client, it, &slab[i])
		if err != nil {
			return fmt.Errorf("transfer %d of %d: %w", i+1, len(items), err)
		}
		switch {
		case it.Write && it.Lane != 0:
			if ln == nil {
				return fmt.Errorf("transfer %d of %d: its bytes are in a lane, and the request names none: %w", i+1, len(items), pdc.ErrInvalid)
			}
			if t.data, err = ln.span(it.Lane, t.bytes()); err != nil {
				return fmt.Errorf("transfer %d of %d (object %d region %v): %w", i+1, len(items), it.Obj, t.box, err)
			}
			s.laneBytes.in.Add(uint64(t.bytes()))
			t.inLane, t.payOff = true, it.Lane-1
		case it.Write:
			writeBytes += uint64(t.bytes())
		}
		ts[i] = t
	}
	if writeBytes != uint64(len(req.Payload)) {
		return fmt.Errorf("the writes cover %d bytes, the request carries %d: %w", writeBytes, len(req.Payload), pdc.ErrInvalid)
	}
	floorVersions(ts)
	return nil
}

// floorVersions gives each of ts the dims version its object's files were
// last used with: after a restart, the only record of the newest dims,
// below which a start is refused as stale as it is below the newest seen
// since (observeLayout). The store is asked once per run of transfers of
// one object. A store that cannot answer leaves 0: its own call on the
// object reports why.
func floorVersions(ts []*transfer) {
	var last *transfer
	for _, t := range ts {
		if last != nil && last.item.Obj == t.item.Obj && last.store == t.store {
			t.floor = last.floor
			continue
		}
		t.floor, _ = t.store.Version(t.item.Obj)
		last = t
	}
}

// bindPayload points each write of ts at its bytes: in body, held by
// msg, or in the client's lane, held by laneMsg.
func bindPayload(ts []*transfer, body []byte, msg, laneMsg *payload) {
	var pos uint64
	for _, t := range ts {
		switch {
		case t.inLane:
			t.msg = laneMsg
			laneMsg.refs.Add(1)
		case t.item.Write:
			n := uint64(t.bytes())
			t.data = body[pos : pos+n : pos+n]
			t.payOff = pos
			t.msg = msg
			msg.refs.Add(1)
			pos += n
		}
	}
}

// enqueueStart registers the transfers of a start (ts, and in order the
// order they are queued in) after the client's earlier starts, and
// queues them. The writes from the lane are stored before it returns:
// the client reuses the lane's space once answered.
func (s *Service) enqueueStart(ctx context.Context, req *rpc.Request, order, ts []*transfer) error {
	// A client's starts are registered in the order they arrived, each
	// after the ones before it: a write must not overtake an earlier
	// one it overlaps, nor a read the writes it must see.
	if s.cfg.beforeTurn != nil {
		s.cfg.beforeTurn()
	}
	if err := req.WaitTurn(ctx); err != nil {
		for _, t := range order {
			s.release(t)
		}
		return err
	}
	// The payload's memory is on the RPC server's payload budget until
	// msg gives it back: its writes take none of ours. Were they to wait
	// for ours, held by reads their client has yet to collect, they would
	// hold that budget while the client's collecting waits sat unread
	// behind payloads waiting for it.
	if err := s.acquire(ctx, order, req.Release == nil); err != nil {
		for _, t := range order {
			s.release(t)
		}
		return err
	}
	// The leases may have ended while the start waited here: it is
	// confirmed again before anything of it is registered (lease.go).
	if err := s.renewLeases(ctx, order); err != nil {
		for _, t := range order {
			s.release(t)
		}
		return err
	}
	for i, t := range order {
		if err := s.enqueue(ctx, t, false); err != nil {
			// The ones already queued run, but the client never learns
			// their ids: nothing of theirs may stay held.
			for _, rest := range order[i+1:] {
				s.release(rest)
			}
			s.forget(req.Client, order[:i+1])
			// The client reuses its lane's space once answered.
			if werr := storedFromLane(ctx, ts); werr != nil {
				return werr
			}
			return fmt.Errorf("transfer %d of %d (object %d region %v): %w", i+1, len(order), t.item.Obj, t.box, err)
		}
	}
	req.EndTurn()
	// The client reuses its lane's space once answered: the writes from
	// it are stored first.
	if err := storedFromLane(ctx, ts); err != nil {
		s.forget(req.Client, order)
		return err
	}
	return nil
}

// storedFromLane waits until the writes among ts whose bytes are in a
// lane are no longer reading them: stored, failed, or never queued. If
// ctx ends first, the client gets no answer and does not reuse the space.
func storedFromLane(ctx context.Context, ts []*transfer) error {
	for _, t := range ts {
		if !t.inLane || t.lead().id == 0 {
			continue
		}
		select {
		case <-t.lead().done:
		case <-ctx.Done():
			return fmt.Errorf("storing writes from the lane: %w", ctxErr(ctx, ctx.Err()))
		}
	}
	return nil
}

// storeFromLane is startHere for writes whose bytes are all in the
// client's lane: each is stored from there, and the answer tells the client
// that it may reuse the space.
func (s *Service) storeFromLane(ctx context.Context, req *rpc.Request, m *wire.DataStart) (*rpc.Response, error) {
	ln, err := s.laneOf(req.Client, m.Lane)
	if err != nil {
		return nil, err
	}
	defer ln.unref()
	ts, slab := make([]*transfer, len(m.Items)), make([]transfer, len(m.Items))
	for i, it := range m.Items {
		t, err := s.check(req.Client, it, &slab[i])
		if err != nil {
			return nil, fmt.Errorf("transfer %d of %d: %w", i+1, len(m.Items), err)
		}
		if t.data, err = ln.span(it.Lane, t.bytes()); err != nil {
			return nil, fmt.Errorf("transfer %d of %d (object %d region %v): %w", i+1, len(m.Items), it.Obj, t.box, err)
		}
		s.laneBytes.in.Add(uint64(t.bytes()))
		t.inLane, t.payOff = true, it.Lane-1
		ts[i] = t
	}
	floorVersions(ts)
	merge(ts, nil, ln.mem)
	for i, t := range ts {
		err := s.enqueue(ctx, t, true)
		t.data, t.ioData = nil, nil // stored: the lane is the client's again
		for _, f := range t.followers {
			f.data = nil
		}
		if err != nil {
			s.forget(req.Client, ts[:i+1])
			return nil, fmt.Errorf("transfer %d of %d (object %d region %v): %w", i+1, len(ts), t.item.Obj, t.box, err)
		}
	}
	return s.started(ctx, req.Client, ts, m.Wait)
}

// started answers a DataStart whose transfers ts are registered: with
// their ids, or, if the client asked to wait, with how they ended.
func (s *Service) started(ctx context.Context, client string, ts []*transfer, wait bool) (*rpc.Response, error) {
	return s.startedInto(ctx, client, ts, wait, nil)
}

// startedInto is started, with the reads of a waited start put in the
// client's lane where dst says.
func (s *Service) startedInto(ctx context.Context, client string, ts []*transfer, wait bool, dst *laneDst) (*rpc.Response, error) {
	ids := make([]uint64, len(ts))
	for i, t := range ts {
		ids[i] = t.id
	}
	if !wait {
		return rpc.Respond(&wire.DataIDs{IDs: ids}), nil
	}
	resp, err := s.collect(ctx, client, ids, true, dst)
	if err != nil {
		// Unlike a DataWait, the client has no ids to wait again with.
		s.forget(client, ts)
	}
	return resp, err
}

// acquire takes the budget for a request's writes, all at once, waiting
// for room: their bytes are here already, and the budget bounds how many
// wait in memory for the disk. A request larger than the whole budget
// takes all of it and goes alone. Reads take theirs in enqueue. Writes
// whose payload is on the RPC server's budget already (not unbudgeted)
// take none.
func (s *Service) acquire(ctx context.Context, ts []*transfer, unbudgeted bool) error {
	var total int64
	for _, t := range ts {
		if t.item.Write && !t.inLane {
			total += t.bytes()
		}
	}
	if total == 0 || !unbudgeted {
		return nil
	}
	grant := min(total, s.cfg.MaxBytes)
	if s.quit.Err() != nil {
		return errClosing
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.quit, cancel)()
	if err := s.budget.Acquire(actx, grant); err != nil {
		if ctx.Err() == nil && s.quit.Err() != nil {
			return errClosing
		}
		return fmt.Errorf("waiting for room: %w", ctxErr(ctx, err))
	}
	for _, t := range ts {
		if t.item.Write && !t.inLane {
			t.held = min(t.bytes(), grant)
			grant -= t.held
		}
	}
	return nil
}

// forget drops registered transfers of client whose results nobody will
// collect, with their followers (registered with them, and no more
// collectable: a request that failed part way gives forget its transfers
// up to the one that failed, whose followers come after it); their budget
// and buffers go back once their I/O is done.
func (s *Service) forget(client string, ts []*transfer) {
	var gone []*transfer
	s.mu.Lock()
	for _, t := range ts {
		gone = s.forgetLocked(t, gone)
		for _, f := range t.followers {
			gone = s.forgetLocked(f, gone)
		}
	}
	s.mu.Unlock()
	s.drop(client, gone)
}

// forgetLocked drops t if it is registered, adding it to gone. s.mu is
// held.
func (s *Service) forgetLocked(t *transfer, gone []*transfer) []*transfer {
	if t.id != 0 && s.mu.transfers.get(t.id) == t {
		s.mu.transfers.del(t.id)
		gone = append(gone, t)
	}
	return gone
}

// drop gives back what forgotten transfers hold once their I/O is done; a
// read still waiting for budget is not done at all.
func (s *Service) drop(client string, gone []*transfer) {
	for _, t := range gone {
		if l := t.lead(); l.lazy.CompareAndSwap(lazyWaiting, lazyClaimed) {
			s.fail(l, fmt.Errorf("client %s will not collect it: %w", client, pdc.ErrCanceled))
			continue
		}
		go s.releaseWhenDone(t)
	}
}
