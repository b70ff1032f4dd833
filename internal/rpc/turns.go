package rpc

import (
	"context"
	"slices"
	"sync"

	"github.com/pdcgo/pdc"
)

// turns keeps the requests of TryHere methods on one connection in
// the order they arrived, for the part of their work that must keep it
// (a data server registers a client's writes in the order it sent them).
// Every such request takes a ticket when it is read; here runs while the
// reading goroutine waits, so it is in order by itself, and can see
// whether an earlier request it declined is still short of its turn's
// end (Request.Behind); h, on a goroutine of its own, waits for its turn
// (Request.WaitTurn) and ends it (Request.EndTurn) or returns.
type turns struct {
	mu     sync.Mutex
	issued uint64
	open   []uint64      // tickets not ended, ascending
	wake   chan struct{} // closed when the first open ticket changes
}

func (t *turns) take() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.issued++
	t.open = append(t.open, t.issued)
	return t.issued
}

// end ends ticket n's turn; ending one twice does nothing.
func (t *turns) end(n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := slices.BinarySearch(t.open, n)
	if !ok {
		return
	}
	t.open = slices.Delete(t.open, i, i+1)
	if i == 0 && t.wake != nil {
		close(t.wake)
		t.wake = nil
	}
}

// behind reports whether a ticket before n is open.
func (t *turns) behind(n uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.open) > 0 && t.open[0] < n
}

// wait returns once no ticket before n is open, or ctx ends.
func (t *turns) wait(ctx context.Context, n uint64) error {
	for {
		t.mu.Lock()
		if len(t.open) == 0 || t.open[0] >= n {
			t.mu.Unlock()
			return nil
		}
		if t.wake == nil {
			t.wake = make(chan struct{})
		}
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return pdc.CtxErr(ctx)
		}
	}
}

// Behind reports whether a request that arrived on this connection before
// r, of a method registered with TryHere, has not ended its turn:
// a here handler that must keep the order declines r (ErrElsewhere) then,
// and its h waits for the turn.
func (r *Request) Behind() bool {
	return r.ticket != 0 && r.conn.turns.behind(r.ticket)
}

// WaitTurn returns once every request that arrived on this connection
// before r, of a method registered with TryHere, has ended its
// turn, or ctx ends. For h of such a method, before the work that must
// keep the order in which the requests arrived.
func (r *Request) WaitTurn(ctx context.Context) error {
	if r.ticket == 0 {
		return nil
	}
	return r.conn.turns.wait(ctx, r.ticket)
}

// EndTurn lets the requests that arrived after r take their turns. A turn
// ends by itself when here answers the request or h returns.
func (r *Request) EndTurn() {
	if r.ticket != 0 {
		r.conn.turns.end(r.ticket)
	}
}
