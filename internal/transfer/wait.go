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
// failed, whether in this wait or an earlier one.
func (e *Engine) WaitAll(ctx context.Context, ts []*Transfer) error {
	ctx = traced(ctx, ts)
	if err := e.settle(ctx); err != nil {
		return err
	}
	waiting, ended, err := waitable(ts)
	if err != nil {
		return err
	}
	if err := collectStarts(ctx, waiting); err != nil {
		return err
	}
	groups := groupParts(waiting, true)
	servers := make([]int, 0, len(groups))
	for s := range groups {
		servers = append(servers, s)
	}
	err = batch.FanOut(servers, func(server int) error { return e.waitOn(ctx, server, groups[server]) })
	return finishWaited(waiting, ended, err)
}

// waitable sorts ts into the transfers to wait for, each once, and the
// errors of those that had ended before, as they did. A transfer never
// started is an error.
func waitable(ts []*Transfer) (waiting []*Transfer, ended []error, err error) {
	var listed map[*Transfer]bool // a transfer listed twice is waited once
	if len(ts) > 1 {
		listed = make(map[*Transfer]bool, len(ts))
	}
	for _, t := range ts {
		t.mu.Lock()
		state, terr := t.state, t.err
		t.mu.Unlock()
		switch state {
		case stateCreated:
			return nil, nil, fmt.Errorf("object %q region %v: transfer not started: %w", t.obj.Meta().Name, t.remote, pdc.ErrInvalid)
		case stateDone, stateClosed:
			if terr != nil && (listed == nil || !listed[t]) {
				ended = append(ended, terr)
				if listed != nil {
					listed[t] = true
				}
			}
			continue
		}
		if listed != nil {
			if listed[t] {
				continue
			}
			listed[t] = true
		}
		waiting = append(waiting, t)
	}
	return waiting, ended, nil
}

// waitOn waits for the parts all on server. Every chunk's wait is sent
// at once: the server answers each as soon as its transfers are done, so
// reading one answer overlaps the server's work on the next.
func (e *Engine) waitOn(ctx context.Context, server int, all []partRef) error {
	chunks := chunk(len(all), waitChunkBytes, func(i int) int {
		if r := all[i]; r.t.access == Read {
			return len(r.part().data)
		}
		return 0
	})
	w := waitRun{e: e, server: server, all: all, chunks: chunks,
		sent: make([]*dataPending, len(chunks)), errs: make([]error, len(chunks))}
	// All on one connection: its answers are read as they come,
	// whichever the server finishes first; spread over the pool, an
	// answer could wait unread behind another connection's.
	conn, err := e.cl.Conn(ctx, server)
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
	return w.first
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
