package transfer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/batch"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// StartAll starts transfers together (PDCregion_transfer_start_all): the
// parts of all of them go in one request per data server, writes first.
// Transfers of objects with POSIX consistency are done when it returns.
func (e *Engine) StartAll(ctx context.Context, ts []*Transfer) error {
	ctx = traced(ctx, ts)
	if err := startable(ts); err != nil {
		return err
	}
	defer releaseAll(ts)
	if len(ts) == 1 && deferrable(ts[0]) {
		return e.startPlacing(ctx, ts[0])
	}
	if err := e.settle(ctx); err != nil {
		return err
	}
	return e.startNow(ctx, ts, false)
}

// DoAll starts ts and returns once they are done: what StartAll and then
// WaitAll do, but each data server gets one request that it answers once
// the transfers are done (as a start with POSIX consistency), sent from
// the caller's goroutine. That is a round trip less than a start and its
// wait, and no hand-off to the placer: for a caller that waits at once
// (Object.Write, a Python assignment), the start's asynchrony buys
// nothing.
func (e *Engine) DoAll(ctx context.Context, ts []*Transfer) error {
	ctx = traced(ctx, ts)
	if err := startable(ts); err != nil {
		return err
	}
	defer releaseAll(ts)
	if err := e.settle(ctx); err != nil {
		return err
	}
	if err := e.startNow(ctx, ts, true); err != nil {
		// A waited start leaves no part under way, even cut short: the
		// parts a server answered are done, the others ended with err
		// (markStarted). Nothing holds the transfers' buffers any more.
		_ = finishWaitedStarts(ts, true)
		if len(ts) == 1 {
			err = fmt.Errorf("object %q region %v: %w", ts[0].obj.Meta().Name, ts[0].remote, err)
		}
		return err
	}
	return nil
}

// startable refuses ts if one of them is under way (or a wait is still
// finishing it) or listed twice, and clears the errors of those that ran
// before: a transfer started again ends as this run does. It marks ts
// busy: the caller releases them (releaseAll) when it returns, so that a
// wait meanwhile (a Flush's) leaves their parts to it.
func startable(ts []*Transfer) error {
	// A transfer listed twice is seen holding this call's mark already:
	// marks rather than a set of the transfers seen, which for 65536
	// regions cost more than the rest of this check.
	// Each is checked and held in one lock, so that two calls starting
	// one transfer at once cannot both pass; those held are let go if a
	// later one is refused.
	mark := startMarks.Add(1)
	for i, t := range ts {
		t.mu.Lock()
		state, twice, busy := t.state, t.mark == mark, t.busy
		t.mark = mark
		ok := state != stateStarted && !twice && !busy
		if ok {
			t.busy = true
		}
		t.mu.Unlock()
		if !ok {
			releaseAll(ts[:i])
			return fmt.Errorf("object %q region %v: transfer already started: %w", t.obj.Meta().Name, t.remote, pdc.ErrInvalid)
		}
	}
	for _, t := range ts {
		t.mu.Lock()
		t.err = nil
		t.mu.Unlock()
	}
	return nil
}

// startMarks numbers the calls of startable.
var startMarks atomic.Uint64

// startNow is StartAll once the transfers queued before are started:
// locate the regions that need their metadata servers, plan every
// transfer, send its parts to their data servers, and note what went.
// With waited (DoAll), or for objects with POSIX consistency, each
// server answers once its parts are done, and the transfers are
// finished when it returns.
func (e *Engine) startNow(ctx context.Context, ts []*Transfer, waited bool) error {
	if len(ts) > 1 {
		if err := e.locateBatch(ctx, ts); err != nil {
			return err
		}
	}
	for _, t := range ts {
		if err := t.plan(ctx); err != nil {
			return err
		}
	}
	groups, servers := startGroups(ts)
	posix := waited
	for _, t := range ts {
		posix = posix || t.obj.Meta().POSIX
	}
	err := batch.FanOut(servers, func(server int) error { return e.startOn(ctx, server, groups[server], posix) })
	markStarted(ts, err)
	if err != nil {
		return err
	}
	if posix {
		return finishWaitedStarts(ts, waited)
	}
	return nil
}

// locateBatch has the metadata servers place the region-dynamic and
// region-local writes among ts and locate the reads, a request per
// server rather than per region as plan would.
func (e *Engine) locateBatch(ctx context.Context, ts []*Transfer) error {
	if err := e.placeAll(ctx, ts); err != nil {
		for _, t := range ts {
			if kindOf(t) == placeWrite {
				t.located, t.isLocated = nil, false
			}
		}
		return err
	}
	return e.locateAll(ctx, ts)
}

// startGroups lists the planned parts of ts by data server, writes first
// (so that reads of the same call see them), and the servers.
func startGroups(ts []*Transfer) (map[int][]partRef, []int) {
	groups := groupParts(ts, false)
	for server, refs := range groups {
		slices.SortStableFunc(refs, func(a, b partRef) int {
			return boolInt(a.t.access != Write) - boolInt(b.t.access != Write)
		})
		groups[server] = refs
	}
	servers := make([]int, 0, len(groups))
	for s := range groups {
		servers = append(servers, s)
	}
	return groups, servers
}

// startOn starts refs on server in chunks, in order, so that the writes
// are registered before the reads that must see them: pipelined, or
// waited for each if posix.
func (e *Engine) startOn(ctx context.Context, server int, all []partRef, posix bool) error {
	for _, ch := range chunk(len(all), chunkBytes, func(i int) int {
		if r := all[i]; r.t.access == Write || posix {
			return len(r.part().data)
		}
		return 0
	}) {
		refs := all[ch[0]:ch[1]]
		var err error
		if posix {
			err = e.startWaited(ctx, server, refs)
		} else {
			err = e.sendStart(ctx, server, refs)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// startWaited starts refs on server and waits until the server has done
// them (POSIX consistency, DoAll). A server that finds the dims out of date
// gets the request again, once, without the regions now outside them,
// which end alone. A connection found broken under the request (reset,
// closed) gets it again once, on a new one, if a second copy cannot undo
// anything: when the request only reads, or when none of it was written
// to the old connection (sendFailed). A request of writes that may have
// gone out whole is not sent again: the server may still read the first
// copy from the old connection after a later write of the caller's to
// the same place, and store the old bytes over the new ones. The caller
// hears that the server was unavailable and decides.
func (e *Engine) startWaited(ctx context.Context, server int, refs []partRef) error {
	if err := e.makeRoom(ctx, server, refs, 0); err != nil {
		return err
	}
	// An earlier start of writes to the same objects, if refused as
	// stale, is sent again when collected: before these writes, which
	// it would otherwise overwrite.
	if dims := refsDims(refs); dims != nil {
		for _, sc := range e.starts.writing(server, dims, nil, true) {
			if err := sc.collect(ctx); err != nil && ctx.Err() != nil {
				return fmt.Errorf("start %d transfers on %s: %w", len(refs), e.cl.Label(server), pdc.CtxErr(ctx))
			}
		}
	}
	res, err := e.startCall(ctx, server, refs, nil)
	var se *pdc.ServerError
	var unsent notSent
	var sent sentOn
	if errors.Is(err, pdc.ErrUnavailable) && !errors.As(err, &se) && ctx.Err() == nil {
		switch {
		case errors.As(err, &unsent) || !writes(refs):
			res, err = e.startCall(ctx, server, refs, nil)
		case errors.As(err, &sent):
			// Writes go again only on a connection that fenced the old
			// one: the server has then either stored the first copy, in
			// order before this one, or dropped it.
			res, err = e.startCall(ctx, server, refs, &sent)
		}
	}
	if errors.Is(err, pdc.ErrStale) {
		ok, rerr := refreshDims(ctx, refs)
		if rerr != nil {
			return rerr
		}
		if refs = ok; len(refs) == 0 {
			return nil
		}
		res, err = e.startCall(ctx, server, refs, nil)
	}
	if err != nil {
		return fmt.Errorf("start %d transfers on %s: %w", len(refs), e.cl.Label(server), err)
	}
	if len(res.IDs) != len(refs) {
		return fmt.Errorf("%s answered %d ids for %d transfers: %w", e.cl.Label(server), len(res.IDs), len(refs), pdc.ErrProtocol)
	}
	for i, r := range refs {
		r.part().id = res.IDs[i]
		r.part().done = true
		if ierr := itemErr(e, server, res.Items[i]); ierr != nil {
			r.t.setErr(ierr)
		}
	}
	return nil
}

// refsDims is, for each object that refs write, its dims version.
func refsDims(refs []partRef) map[uint64]uint64 {
	var out map[uint64]uint64
	for _, r := range refs {
		if r.t.access == Write {
			if out == nil {
				out = map[uint64]uint64{}
			}
			out[r.t.obj.Meta().ID] = r.t.obj.Meta().DimsVersion
		}
	}
	return out
}

// startCall is one waited DataStart of refs on server, through the lane
// if there is one. again, if set, is an earlier call of the same refs
// whose answer was lost: the call is made only on a connection that
// fenced again's, and otherwise fails with again's error.
func (e *Engine) startCall(ctx context.Context, server int, refs []partRef, again *sentOn) (wire.DataResults, error) {
	if err := pdc.CtxErr(ctx); err != nil {
		return wire.DataResults{}, err // and takes no lane space
	}
	// The reads' bytes may come through the lane too: the start is waited.
	ln, err := e.lane(ctx, server, laneSized(refs, Write)+laneSized(refs, Read))
	if err != nil {
		return wire.DataResults{}, notSent{err}
	}
	m, payload, use := buildStart(refs, true, ln)
	if ln != nil {
		ln.unref() // use holds its own
	}
	conn, err := e.cl.StartConn(ctx, server)
	if err != nil {
		use.settled(err)
		return wire.DataResults{}, notSent{err}
	}
	if again != nil && !conn.Fences(again.conn) {
		use.settled(again.error)
		return wire.DataResults{}, again.error
	}
	d, err := e.dataSendOn(ctx, conn, server, wire.MethodDataStart, &m, payload, true, readParts(refs), use)
	if err != nil {
		// rpc.Conn.Send fails only before any byte went out, or when
		// ctx ended (which no retry follows).
		use.settled(err)
		return wire.DataResults{}, notSent{err}
	}
	res, _, err := d.recv(ctx) // settles use
	if err != nil {
		return res, sentOn{err, conn}
	}
	return res, nil
}

// notSent is an error met before any byte of a request was written.
type notSent struct{ error }

func (e notSent) Unwrap() error { return e.error }

// sentOn is an error met after a request went out on conn.
type sentOn struct {
	error
	conn *rpc.Conn
}

func (e sentOn) Unwrap() error { return e.error }

// writes reports whether refs carry a write.
func writes(refs []partRef) bool {
	for _, r := range refs {
		if r.t.access == Write {
			return true
		}
	}
	return false
}

// markStarted marks ts started, and tracked by their objects, after their
// parts were sent; if that failed (err), the parts no server took end
// with it.
func markStarted(ts []*Transfer, err error) {
	for _, t := range ts {
		t.mu.Lock()
		t.state = stateStarted
		t.mu.Unlock()
		if err != nil {
			// Parts no server took (no id) are over: their wait reports
			// why, rather than "not found".
			for i := range t.parts {
				// start first: a part sent has its id and done written
				// by whoever collects its answer.
				if p := &t.parts[i]; p.start == nil && p.id == 0 && !p.done {
					p.done = true
					t.setErr(fmt.Errorf("object %q region %v: not started: %w", t.obj.Meta().Name, p.box, err))
				}
			}
		}
		t.obj.track(t, true)
		if t.access == Write {
			t.obj.wroteTo(t.parts)
		}
	}
}

// finishWaitedStarts finishes the transfers of ts whose starts were
// waited (all, or those with POSIX consistency) and returns their errors.
func finishWaitedStarts(ts []*Transfer, all bool) error {
	var errs []error
	for _, t := range ts {
		if all || t.obj.Meta().POSIX {
			t.finish()
			if err := t.Err(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if !all && len(errs) > 0 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// placeAll has the metadata servers place the region-dynamic and
// region-local writes among ts, in one request per metadata server (and
// per MaxBatch regions), instead of one round trip per region as plan
// would.
func (e *Engine) placeAll(ctx context.Context, ts []*Transfer) error {
	groups := map[int][]int{}
	for i, t := range ts {
		if kindOf(t) == placeWrite && !t.isLocated {
			groups[t.obj.Meta().Server] = append(groups[t.obj.Meta().Server], i)
		}
	}
	return batch.InChunks(groups, func(i int) int { return regionSize(ts[i]) }, func(rank int, idx []int) error {
		writes := make([]*Transfer, len(idx))
		for k, i := range idx {
			writes[k] = ts[i]
		}
		req := e.assignAll(writes)
		res, err := e.calls().RegionPlace(ctx, rank, req)
		if err != nil {
			return fmt.Errorf("place %d regions: %w", len(idx), err)
		}
		if len(res.Items) != len(idx) {
			return fmt.Errorf("place: %d answers for %d regions: %w", len(res.Items), len(idx), pdc.ErrProtocol)
		}
		for k, i := range idx {
			ts[i].locate(res.Items[k].Pieces)
		}
		return nil
	})
}

// regionSize is about how many bytes t's region takes in a request.
func regionSize(t *Transfer) int { return 20*len(t.remote.Off) + 32 }

// locateAll looks up where the regions of the region-dynamic and
// region-local reads among ts are, one request per metadata server (and
// MaxBatch regions). A read its server could not locate is left for plan,
// which asks again and fails with the reason.
func (e *Engine) locateAll(ctx context.Context, ts []*Transfer) error {
	groups := map[int][]int{}
	for i, t := range ts {
		if kindOf(t) == placeRead && !t.isLocated {
			groups[t.obj.Meta().Server] = append(groups[t.obj.Meta().Server], i)
		}
	}
	return batch.InChunks(groups, func(i int) int { return regionSize(ts[i]) }, func(rank int, idx []int) error {
		reads := make([]*Transfer, len(idx))
		for k, i := range idx {
			reads[k] = ts[i]
		}
		res, err := e.calls().RegionQueryAll(ctx, rank, queryAll(reads))
		if err != nil {
			return fmt.Errorf("look up %d regions: %w", len(idx), err)
		}
		if len(res.Items) != len(reads) {
			return fmt.Errorf("look up: %d answers for %d regions: %w", len(res.Items), len(reads), pdc.ErrProtocol)
		}
		for k, t := range reads {
			if it := &res.Items[k]; it.Code == wire.CodeOK {
				t.locate(it.Pieces)
			}
		}
		return nil
	})
}

// partRef is one part of a transfer.
type partRef struct {
	t *Transfer
	p int
}

func (r partRef) part() *part { return &r.t.parts[r.p] }

// groupParts lists the parts of ts by data server, in order, leaving out
// done parts if told to. Each server's list is made to size: start_all of
// 64k small regions spent more growing them than filling them.
func groupParts(ts []*Transfer, undone bool) map[int][]partRef {
	n := map[int]int{}
	for _, t := range ts {
		for i := range t.parts {
			if !undone || !t.parts[i].done {
				n[t.parts[i].server]++
			}
		}
	}
	groups := make(map[int][]partRef, len(n))
	for server, k := range n {
		groups[server] = make([]partRef, 0, k)
	}
	for _, t := range ts {
		for i := range t.parts {
			if p := &t.parts[i]; !undone || !p.done {
				groups[p.server] = append(groups[p.server], partRef{t, i})
			}
		}
	}
	return groups
}

// buildStart is the DataStart request of refs, and its payload: the
// writes' bytes, in order.
func buildStart(refs []partRef, wait bool, ln *clientLane) (wire.DataStart, [][]byte, *laneUse) {
	m := wire.DataStart{Items: make([]wire.DataItem, len(refs)), Wait: wait}
	payload := make([][]byte, 0, len(refs))
	var use *laneUse
	if ln != nil {
		ln.refs.Add(1) // the use's own
		use = &laneUse{l: ln}
	}
	for i, r := range refs {
		o, p := r.t.obj, r.part()
		m.Items[i] = wire.DataItem{Obj: o.Meta().ID, Write: r.t.access == Write, Off: p.box.Off, Size: p.box.Size,
			Dims: o.Meta().Dims, DimsVersion: o.Meta().DimsVersion, Elem: uint32(o.elem()), Storage: uint32(o.Meta().Storage),
			Slot: uint32(p.slot) + 1}
		if r.t.access != Write {
			// A waited start's answer carries the reads: into the lane
			// where it has room, as a wait's (dataPending.recv).
			if wait && use != nil && len(p.data) >= laneMin {
				if sp, ok := use.alloc(len(p.data)); ok {
					ln.warm.Ensure(ln.mem, sp.End())
					if use.offs == nil {
						use.offs = make([]uint64, len(refs))
					}
					use.offs[i] = uint64(sp.Off) + 1
					m.Items[i].Lane = use.offs[i]
				}
			}
			continue
		}
		if use != nil && len(p.data) >= laneMin {
			if sp, ok := use.alloc(len(p.data)); ok {
				ln.warm.Ensure(ln.mem, sp.End())
				copy(ln.mem[sp.Off:sp.Off+len(p.data)], p.data)
				m.Items[i].Lane = uint64(sp.Off) + 1
				r.t.obj.e.lanes.written.Add(int64(len(p.data)))
				continue
			}
		}
		payload = append(payload, p.data)
	}
	if use != nil && len(use.spans) == 0 {
		use.done()
		use = nil
	}
	if use != nil {
		m.Lane = ln.id
	}
	return m, payload, use
}

// refreshDims looks up the objects of refs again after a data server found
// their dims out of date. It ends the parts whose remote region no longer
// fits, each with its own error, and returns the others, to start again.
func refreshDims(ctx context.Context, refs []partRef) ([]partRef, error) {
	seen := map[*Object]bool{}
	ok := make([]partRef, 0, len(refs))
	for _, r := range refs {
		o := r.t.obj
		if !seen[o] {
			if _, err := o.refresh(ctx); err != nil {
				return nil, err
			}
			seen[o] = true
		}
		if err := r.t.remote.Within(o.Meta().Dims); err != nil {
			r.part().done = true
			r.t.setErr(fmt.Errorf("object %q: remote region: %w", o.Meta().Name, err))
			continue
		}
		ok = append(ok, r)
	}
	return ok, nil
}

// Bounds of one data request: messages of a few tens of MiB keep the
// server storing one while the next arrives, and far from the frame limit.
const (
	chunkBytes = 64 << 20
	chunkItems = 8192
	// waitChunkBytes bounds the reads' bytes one wait answers. The waits
	// are sent at once, so smaller answers cost little, and a data server
	// checks an answer's CRCs just before it sends it, so the bytes may
	// still be in the CPU caches when they go. Measured with 1 GiB read
	// in 1 and 16 MiB regions: 8 MiB answers 1.6-2.0 GB/s, 64 MiB
	// 1.65-1.85, 2 MiB (more answers checked at once) 1.5-1.8.
	waitChunkBytes = 8 << 20
)

// chunk splits n items, of size(i) bytes each, into consecutive [start,
// end) ranges of at most chunkItems items and limit bytes (an item
// larger than that goes alone).
func chunk(n, limit int, size func(i int) int) [][2]int {
	var out [][2]int
	start, bytes := 0, 0
	for i := range n {
		sz := size(i)
		if i > start && (i-start == chunkItems || bytes+sz > limit) {
			out = append(out, [2]int{start, i})
			start, bytes = i, 0
		}
		bytes += sz
	}
	if n > start {
		out = append(out, [2]int{start, n})
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readParts lists, per ref, its part if it is a read, nil if a write.
func readParts(refs []partRef) []*part {
	out := make([]*part, len(refs))
	for i, r := range refs {
		if r.t.access == Read {
			out[i] = r.part()
		}
	}
	return out
}

func (t *Transfer) setErr(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

func itemErr(e *Engine, server int, r wire.DataResult) error {
	if r.Code == wire.CodeOK {
		return nil
	}
	return &pdc.ServerError{Server: e.cl.Label(server), Method: "data_wait", Msg: r.Message, Err: r.Code.Err()}
}
