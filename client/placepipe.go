package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// Placements are pipelined too. A region-dynamic or region-local transfer
// needs its object's metadata server before any data server: a write to
// be placed (and recorded), a read to learn where the region's pieces
// are. Start sends that question and returns; the answer is collected,
// and the transfer started on its data servers, by the next call that
// needs it: the next Start, a wait, a status or a close. A program
// starting one region after another thus has one region's placement on
// the wire while the previous region's bytes go to its data server,
// instead of a metadata round trip between every two regions: measured
// with 1 GiB in 1 MiB regions, that round trip, on a machine busy moving
// the bytes, took the writes from about 3.6 GB/s to 2.2.
//
// The order a program sees is kept: every placement sent earlier is
// collected, and its transfer started, before anything else is started or
// waited; only the newest few (placeWindow) stay in flight when a placed
// Start returns, so that a placement slowed by a busy metadata server
// does not stall the bytes (with one in flight, measured with 1 GiB in
// 1 MiB regions on two servers: 3.1-3.2 GB/s written; with four, 3.5).
// An error of a placement, like a data server's, ends its transfer and
// comes with its wait.

// placeCall is a transfer whose placement is on the wire.
type placeCall struct {
	t    *Transfer
	rank int
	pend *rpc.Pending
}

// placeQueue holds the placements sent and not yet collected, oldest
// first. tok is held by the goroutine collecting them, so that they are
// started in order.
type placeQueue struct {
	tok chan struct{}
	mu  sync.Mutex
	q   []*placeCall
}

func (q *placeQueue) token() chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.tok == nil {
		q.tok = make(chan struct{}, 1)
	}
	return q.tok
}

// deferrable reports whether t's placement may stay on the wire after its
// Start returns.
func deferrable(t *Transfer) bool {
	p := t.obj.info.Props
	return (p.Partition == RegionDynamic || p.Partition == RegionLocal) &&
		p.Consistency != ConsistencyPOSIX && t.placed < 0
}

// startPlacing sends t's placement and marks t started; the placements
// before it, but for the newest placeWindow, are collected (see settle)
// before it returns.
func (c *Client) startPlacing(ctx context.Context, t *Transfer) error {
	o := t.obj
	var m wire.Message
	var method wire.Method
	if t.access == Write {
		method = wire.MethodRegionAssign
		m = &wire.RegionBatch{Items: []wire.RegionReq{{Obj: o.info.ID, Off: t.remote.Off, Size: t.remote.Size,
			Candidates: c.candidates(o.info.Props.Partition), Elem: uint32(o.elem())}}}
	} else {
		method = wire.MethodRegionQuery
		m = &wire.RegionReq{Obj: o.info.ID, Off: t.remote.Off, Size: t.remote.Size}
	}
	tok := c.placing.token()
	select {
	case tok <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("object %q region %v: %w", o.info.Name, t.remote, pdc.CtxErr(ctx))
	}
	defer func() { <-tok }()
	conn, err := c.conn(ctx, o.info.Server)
	var p *rpc.Pending
	if err == nil {
		p, err = conn.Send(ctx, method, m.Marshal(nil), nil, nil)
	}
	if err != nil {
		return fmt.Errorf("object %q region %v: place: %w", o.info.Name, t.remote, err)
	}
	pc := &placeCall{t: t, rank: o.info.Server, pend: p}
	t.mu.Lock()
	t.state = stateStarted
	t.placing = pc
	t.mu.Unlock()
	o.track(t, true)
	c.placing.mu.Lock()
	c.placing.q = append(c.placing.q, pc)
	c.placing.mu.Unlock()
	// The earlier ones are started while the newest answers travel. If
	// ctx ends first, they stay for the next caller: t is started either
	// way.
	_ = c.settleLocked(ctx, placeWindow)
	return nil
}

// placeWindow is how many placements a run of Starts leaves on the wire.
// More (16) measured no better, and hold more transfers unstarted.
const placeWindow = 4

// settle collects every placement on the wire and starts its transfer.
// Only ctx's end is an error: a placement that failed ends its transfer.
func (c *Client) settle(ctx context.Context) error {
	c.placing.mu.Lock()
	empty := len(c.placing.q) == 0
	c.placing.mu.Unlock()
	if empty {
		return nil
	}
	tok := c.placing.token()
	select {
	case tok <- struct{}{}:
	case <-ctx.Done():
		return pdc.CtxErr(ctx)
	}
	defer func() { <-tok }()
	return c.settleLocked(ctx, 0)
}

// settleLocked is settle, leaving the keep newest on the wire. The caller
// holds the token.
func (c *Client) settleLocked(ctx context.Context, keep int) error {
	for {
		c.placing.mu.Lock()
		if len(c.placing.q) <= keep {
			c.placing.mu.Unlock()
			return nil
		}
		pc := c.placing.q[0]
		c.placing.mu.Unlock()
		rep, err := pc.pend.Poll(ctx)
		var se *pdc.ServerError
		if err != nil && ctx.Err() != nil && !errors.As(err, &se) {
			// Not answered before our deadline: it stays for later.
			return fmt.Errorf("object %q region %v: place: %w", pc.t.obj.info.Name, pc.t.remote, err)
		}
		c.placing.mu.Lock()
		c.placing.q = c.placing.q[1:]
		c.placing.mu.Unlock()
		t := pc.t
		t.mu.Lock()
		t.placing = nil
		t.mu.Unlock()
		if err == nil {
			err = c.startPlaced(ctx, t, rep)
		}
		if err != nil {
			t.setErr(fmt.Errorf("object %q region %v: %w", t.obj.info.Name, t.remote, err))
			for i := range t.parts {
				if p := &t.parts[i]; p.start == nil && p.id == 0 {
					p.done = true
				}
			}
		}
	}
}

// startPlaced starts t on the data servers its placement answer names.
func (c *Client) startPlaced(ctx context.Context, t *Transfer, rep rpc.Reply) error {
	var res wire.RegionPieces
	if err := res.Unmarshal(rep.Header); err != nil {
		return fmt.Errorf("place: %w", err)
	}
	if t.access == Write {
		if len(res.Items) != 1 {
			return fmt.Errorf("place: %d answers for 1 region: %w", len(res.Items), pdc.ErrProtocol)
		}
		t.placed = int(res.Items[0].Server)
	} else {
		t.located = make([]piece, 0, len(res.Items))
		for _, p := range res.Items {
			t.located = append(t.located, piece{server: int(p.Server), box: region.Box{Off: p.Off, Size: p.Size}})
		}
		t.isLocated = true
	}
	return c.startNow(ctx, []*Transfer{t})
}
