package transfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// WaitAll waits for transfers together (PDCregion_transfer_wait_all): one
// request per data server. Its error joins those of the transfers that
// failed, whether in this wait or an earlier one.
func (e *Engine) WaitAll(ctx context.Context, ts []*Transfer) error {
	if err := e.settle(ctx); err != nil {
		return err
	}
	var waiting []*Transfer
	var ended []error             // of transfers that had ended before, as they did
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
			return fmt.Errorf("object %q region %v: transfer not started: %w", t.obj.Meta().Name, t.remote, pdc.ErrInvalid)
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
	if err := collectStarts(ctx, waiting); err != nil {
		return err
	}
	groups := groupParts(waiting, true)
	servers := make([]int, 0, len(groups))
	for s := range groups {
		servers = append(servers, s)
	}
	sendWait := func(conn *rpc.Conn, server int, refs []partRef, use *laneUse) (*dataPending, error) {
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
	endWait := func(server int, refs []partRef, d *dataPending, err error) error {
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
	err := fanOut(servers, func(server int) error {
		// Every chunk's wait is sent at once: the server answers each as
		// soon as its transfers are done, so reading one answer overlaps
		// the server's work on the next.
		all := groups[server]
		chunks := chunk(len(all), waitChunkBytes, func(i int) int {
			if r := all[i]; r.t.access == Read {
				return len(r.part().data)
			}
			return 0
		})
		sent := make([]*dataPending, len(chunks))
		errs := make([]error, len(chunks))
		// All on one connection: its answers are read as they come,
		// whichever the server finishes first; spread over the pool, an
		// answer could wait unread behind another connection's.
		conn, err := e.cl.Conn(ctx, server)
		var ln *clientLane
		if err == nil {
			ln, err = e.lane(ctx, server, all, Read)
		}
		if ln != nil {
			defer ln.unref()
		}
		var first error
		ended := 0 // chunks whose answers are in, in order
		end := func() {
			i, ch := ended, chunks[ended]
			ended++
			if sent[i] == nil && errs[i] == nil {
				errs[i] = first // not sent: ends as the first failure did
			}
			if err := endWait(server, all[ch[0]:ch[1]], sent[i], errs[i]); err != nil && first == nil {
				first = err
			}
		}
		for i, ch := range chunks {
			if err != nil {
				errs[i] = err
				break
			}
			refs := all[ch[0]:ch[1]]
			var use *laneUse
			if ln != nil {
				// Through the lane while it has room; when it has none,
				// the oldest answer frees some.
				full := false
				for use, full = waitInLane(ln, refs); full && ended < i; use, full = waitInLane(ln, refs) {
					end()
				}
			}
			if sent[i], errs[i] = sendWait(conn, server, refs, use); errs[i] != nil {
				break
			}
		}
		for ended < len(chunks) {
			end()
		}
		return first
	})
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
