package transfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/batch"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// WaitAll waits for transfers together (PDCregion_transfer_wait_all): one
// request per data server. Its error joins those of the transfers that
// failed, whether in this wait or an earlier one. A transfer that another
// call is finishing meanwhile (a Flush, a wait of another goroutine, its
// start) is waited for until that call is done, and ends as it did.
func (e *Engine) WaitAll(ctx context.Context, ts []*Transfer) error {
	ctx = traced(ctx, ts)
	if err := e.settle(ctx); err != nil {
		return err
	}
	waiting, others, ended, err := waitable(ts)
	if err != nil {
		return err
	}
	err = e.waitFor(ctx, waiting, ended)
	releaseAll(waiting)
	if len(others) == 0 {
		return err
	}
	errs := []error{err}
	var again []*Transfer
	for _, t := range others {
		if werr := t.awaitRelease(ctx); werr != nil {
			return errors.Join(err, fmt.Errorf("object %q region %v: %w", t.obj.Meta().Name, t.remote, werr))
		}
		t.mu.Lock()
		state, terr := t.state, t.err
		t.mu.Unlock()
		switch {
		case state == stateStarted:
			again = append(again, t) // that call did not finish it
		case terr != nil:
			errs = append(errs, terr)
		}
	}
	if len(again) > 0 {
		errs = append(errs, e.WaitAll(ctx, again))
	}
	return errors.Join(errs...)
}

// waitFor waits for the transfers waiting, which this call holds busy,
// and finishes those that are done; ended are the errors of the
// transfers listed that had ended before.
func (e *Engine) waitFor(ctx context.Context, waiting []*Transfer, ended []error) error {
	if err := collectStarts(ctx, waiting); err != nil {
		return err
	}
	groups := groupParts(waiting, true)
	servers := make([]int, 0, len(groups))
	for s := range groups {
		servers = append(servers, s)
	}
	err := batch.FanOut(servers, func(server int) error { return e.waitOn(ctx, server, groups[server]) })
	return finishWaited(waiting, ended, err)
}

// waitable sorts ts into the transfers to wait for, each once, which it
// marks busy (the caller releases them); those another call holds busy
// (others); and the errors of those that had ended before, as they did. A
// transfer never started is an error.
func waitable(ts []*Transfer) (waiting, others []*Transfer, ended []error, err error) {
	var listed map[*Transfer]bool // a transfer listed twice is waited once
	if len(ts) > 1 {
		listed = make(map[*Transfer]bool, len(ts))
	}
	for _, t := range ts {
		if listed != nil && listed[t] {
			continue
		}
		if listed != nil {
			listed[t] = true
		}
		t.mu.Lock()
		state, terr, busy := t.state, t.err, t.busy
		if state == stateStarted && !busy {
			t.busy = true
		}
		t.mu.Unlock()
		switch {
		case state == stateCreated:
			releaseAll(waiting)
			return nil, nil, nil, fmt.Errorf("object %q region %v: transfer not started: %w", t.obj.Meta().Name, t.remote, pdc.ErrInvalid)
		case busy:
			// Even if done: the call that finished it may still be
			// copying a read's bytes into its buffer (finish), and it
			// ends as that call leaves it.
			others = append(others, t)
		case state == stateDone || state == stateClosed:
			if terr != nil {
				ended = append(ended, terr)
			}
		default:
			waiting = append(waiting, t)
		}
	}
	return waiting, others, ended, nil
}

// release ends the call that held t busy, waking those waiting for it.
func (t *Transfer) release() {
	t.mu.Lock()
	t.busy = false
	if ch := t.released; ch != nil {
		close(ch)
		t.released = nil
	}
	t.mu.Unlock()
}

func releaseAll(ts []*Transfer) {
	for _, t := range ts {
		t.release()
	}
}

// awaitRelease waits until no call holds t busy, or ctx ends.
func (t *Transfer) awaitRelease(ctx context.Context) error {
	t.mu.Lock()
	for t.busy {
		if t.released == nil {
			t.released = make(chan struct{})
		}
		ch := t.released
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return pdc.CtxErr(ctx)
		}
		t.mu.Lock()
	}
	t.mu.Unlock()
	return nil
}

// waitOn waits for the parts all on server. Every chunk's wait is sent
// at once: the server answers each as soon as its transfers are done, so
// reading one answer overlaps the server's work on the next.
func (e *Engine) waitOn(ctx context.Context, server int, all []partRef) error {
	// All on one connection: its answers are read as they come,
	// whichever the server finishes first; spread over the pool, an
	// answer could wait unread behind another connection's.
	conn, err := e.cl.Conn(ctx, server)
	var gone error
	if err == nil {
		all, gone = e.startedElsewhere(ctx, server, conn.Instance(), all)
		if len(all) == 0 {
			return gone
		}
	}
	// Chunked once the parts of another instance are set aside: the
	// chunks index the parts waited for here.
	chunks := chunk(len(all), waitChunkBytes, func(i int) int {
		if r := all[i]; r.t.access == Read {
			return len(r.part().data)
		}
		return 0
	})
	w := waitRun{e: e, server: server, all: all, chunks: chunks,
		sent: make([]*dataPending, len(chunks)), errs: make([]error, len(chunks))}
	var ln *clientLane
	if err == nil {
		ln, err = e.lane(ctx, server, laneSized(all, Read))
	}
	if ln != nil {
		defer ln.unref()
	}
	for i, ch := range chunks {
		if err != nil {
			w.errs[i] = err
			break
		}
		refs := all[ch[0]:ch[1]]
		var use *laneUse
		if ln != nil {
			// Through the lane while it has room; when it has none,
			// the oldest answer frees some.
			full := false
			for use, full = waitInLane(ln, refs); full && w.ended < i; use, full = waitInLane(ln, refs) {
				w.end(ctx)
			}
		}
		if w.sent[i], w.errs[i] = e.sendWait(ctx, conn, server, refs, use); w.errs[i] != nil {
			break
		}
	}
	for w.ended < len(chunks) {
		w.end(ctx)
	}
	if gone != nil {
		return gone
	}
	return w.first
}

// startedElsewhere ends, unavailable, the parts of all that another
// instance of server (inst is the one that answers now) started: it died
// and was restarted, which knows nothing of them, and gives their ids to
// transfers of its own, so that a wait for them there would be answered
// with another's result. It returns the others, and the error of those it
// ended (nil if none).
func (e *Engine) startedElsewhere(ctx context.Context, server int, inst string, all []partRef) ([]partRef, error) {
	var gone []partRef
	for _, r := range all {
		if r.part().inst != inst {
			gone = append(gone, r)
		}
	}
	if len(gone) == 0 {
		return all, nil
	}
	kept := make([]partRef, 0, len(all)-len(gone))
	for _, r := range all {
		if r.part().inst == inst {
			kept = append(kept, r)
		}
	}
	err := fmt.Errorf("they were started on another instance of the server (%s), which is gone (it restarted): start them again: %w",
		gone[0].part().inst, pdc.ErrUnavailable)
	return kept, e.endWait(ctx, server, gone, nil, err)
}

// waitRun is the chunks of one server's wait, sent and answered in order.
type waitRun struct {
	e      *Engine
	server int
	all    []partRef
	chunks [][2]int
	sent   []*dataPending // per chunk, its wait on the wire
	errs   []error        // per chunk, why it was not sent
	ended  int            // chunks whose answers are in, in order
	first  error          // the first failure
}

// end collects the answer to the oldest chunk not yet ended; a chunk not
// sent ends as the first failure did.
func (w *waitRun) end(ctx context.Context) {
	i, ch := w.ended, w.chunks[w.ended]
	w.ended++
	if w.sent[i] == nil && w.errs[i] == nil {
		w.errs[i] = w.first
	}
	if err := w.e.endWait(ctx, w.server, w.all[ch[0]:ch[1]], w.sent[i], w.errs[i]); err != nil && w.first == nil {
		w.first = err
	}
}

// sendWait sends the DataWait of refs on conn, their reads' bytes coming
// through the lane where use says.
func (e *Engine) sendWait(ctx context.Context, conn *rpc.Conn, server int, refs []partRef, use *laneUse) (*dataPending, error) {
	req := wire.DataIDs{IDs: make([]uint64, len(refs))}
	for i, r := range refs {
		req.IDs[i] = r.part().id
	}
	if use != nil {
		req.Lane, req.LaneOffs = use.l.id, use.offs
	}
	d, err := e.dataSendOn(ctx, conn, server, wire.MethodDataWait, &req, nil, true, readParts(refs), use)
	if err != nil {
		use.settled(err)
	}
	return d, err
}

// endWait receives the answer d to the wait of refs (or takes err, why
// it was not sent) and ends their parts with their results.
func (e *Engine) endWait(ctx context.Context, server int, refs []partRef, d *dataPending, err error) error {
	var res wire.DataResults
	if err == nil {
		res, _, err = d.recv(ctx)
	}
	if err != nil {
		err = fmt.Errorf("wait for %d transfers on %s: %w", len(refs), e.cl.Label(server), err)
		if !errors.Is(err, pdc.ErrTimeout) && !errors.Is(err, pdc.ErrCanceled) {
			// The server is gone or broke the protocol: these
			// transfers end with the error.
			for _, r := range refs {
				r.part().done = true
				r.t.setErr(err)
			}
		}
		return err
	}
	for i, r := range refs {
		r.part().done = true
		if ierr := itemErr(e, server, res.Items[i]); ierr != nil {
			r.t.setErr(fmt.Errorf("object %q region %v: %w", r.t.obj.Meta().Name, r.part().box, ierr))
		}
	}
	return nil
}

// finishWaited finishes the waited transfers that are done and joins the
// errors: those of the transfers ended before, the wait's (err), and, if
// the wait did not fail, those of the transfers that failed in it.
func finishWaited(waiting []*Transfer, ended []error, err error) error {
	errs := ended
	if err != nil {
		errs = append(errs, err)
	}
	for _, t := range waiting {
		if !t.allDone() {
			continue
		}
		t.finish()
		if terr := t.Err(); terr != nil && err == nil {
			errs = append(errs, terr)
		}
	}
	return errors.Join(errs...)
}

func (t *Transfer) allDone() bool {
	for _, p := range t.parts {
		if !p.done {
			return false
		}
	}
	return true
}

// finish puts a read's bytes in place and marks the transfer done.
func (t *Transfer) finish() {
	t.mu.Lock()
	if t.state != stateStarted {
		t.mu.Unlock()
		return
	}
	t.state = stateDone
	err := t.err
	t.mu.Unlock()
	if t.access == Read && err == nil {
		elem := t.obj.elem()
		for _, p := range t.parts {
			if !p.direct {
				r := rel(p.box, t.remote)
				_ = region.Copy(t.linear, region.Shape(t.remote.Size...), p.data, r, r, elem)
			}
		}
		if t.packed {
			_ = region.Copy(t.buf, t.shape, t.linear, t.local, t.local, elem)
		}
	}
	for i := range t.parts {
		if !t.parts[i].direct {
			t.parts[i].data = nil
		}
	}
	t.obj.track(t, false)
}
