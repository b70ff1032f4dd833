package outbox

import (
	"context"
	"fmt"
	"slices"
)

// Fence returns once every record committed before it was called has been
// delivered to each of its destinations, or ctx ends, with the
// destinations where it could not be: undelivered lists those where a
// delivery of such a record, tried after the fence began, failed. A
// fence that names none guarantees that a query sees the index entries
// of every tag change acknowledged before it.
//
// A destination that is down does not stall the fence: its deliveries
// fail at once, and the fence names it. Each is tried once more after
// the fence began, at once: a destination back from a partition or a
// restart gets what waited for it before the query looks, rather than at
// the deliverer's next retry (a query right after a partition healed
// missed acknowledged tags). Counting a failed try as done instead would
// let a query look at a destination the client reaches but this server
// did not (a restarted server not yet in the server list when the retry
// read it; found by the crash loop), and stop at the first delivery of
// a backlog longer than one.
//
// A destination whose deliveries were applied but could not be recorded
// here (the store fails: a full disk) has them: a fence that needs
// nothing more there returns. What is queued behind them is sent
// meanwhile (acknowledge), and the fence waits for it as for any
// delivery; the recording waits for the disk.
func (ob *Outbox) Fence(ctx context.Context) (undelivered []int, err error) {
	ob.mu.Lock()
	end := ob.mu.next // records before end were committed before the fence
	var waits []chan struct{}
	for _, r := range ob.mu.open {
		if !r.done {
			waits = append(waits, r.tried)
		}
	}
	ob.mu.Unlock()
	defer ob.hurry()()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for tag index updates: %w", ctx.Err())
		}
	}
	// Every record before end has been tried now: it waits in the queues
	// of the destinations that failed, or have not had all of a backlog.
	type watch struct {
		dest int
		q    *destQueue
		base uint64 // attempts begun before this point
	}
	var watches []watch
	ob.mu.Lock()
	for d, q := range ob.mu.queues {
		if q.undeliveredBefore(end) {
			base := q.attempts
			if q.sending {
				base++ // the attempt under way began before
			}
			watches = append(watches, watch{d, q, base})
			// The wake-up sent as the fence began may have been spent
			// by an attempt that counted for the first phase: without
			// another, the deliverer sleeps out its pause (up to 2 s)
			// before the attempt this phase waits for.
			select {
			case q.hurry <- struct{}{}:
			default:
			}
		}
	}
	ob.mu.Unlock()
	for _, w := range watches {
		for {
			ob.mu.Lock()
			held := w.q.undeliveredBefore(end)
			failed := w.q.failing && w.q.attempts > w.base
			tick := w.q.tick
			ob.mu.Unlock()
			if !held {
				break
			}
			if failed {
				undelivered = append(undelivered, w.dest)
				break
			}
			select {
			case <-tick:
			case <-ctx.Done():
				return nil, fmt.Errorf("waiting for tag index updates for metadata server %d: %w", w.dest, ctx.Err())
			}
		}
	}
	slices.Sort(undelivered)
	return undelivered, nil
}

// undeliveredBefore reports whether q holds an item of a record before
// seq that its destination has not applied. Items applied there whose
// recording fails (applied) are delivered: the index there shows them,
// and a query on a server whose disk is full need not fail for them.
// The caller holds outbox.mu.
func (q *destQueue) undeliveredBefore(seq uint64) bool {
	return len(q.items) > q.applied && q.items[q.applied].rec.seq < seq
}

// attempted counts a delivery tried to q, and whether it is under way.
func (ob *Outbox) attempted(q *destQueue, sending bool) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if q.sending = sending; !sending {
		q.attempts++
		close(q.tick)
		q.tick = make(chan struct{})
	}
}

// WaitTried returns once every record has been tried at each of its
// destinations, or ctx ends. Before start there is nothing to wait for:
// the records are delivered at start.
func (ob *Outbox) WaitTried(ctx context.Context, recs []*Record) error {
	ob.mu.Lock()
	started := ob.mu.count > 0
	ob.mu.Unlock()
	if !started {
		return nil
	}
	defer ob.hurry()()
	for _, r := range recs {
		select {
		case <-r.tried:
		case <-ctx.Done():
			return fmt.Errorf("tag index update: %w", ctx.Err())
		}
	}
	return nil
}

// hurry makes the deliverers send what they hold at once instead of
// lingering, until the returned function is called.
func (ob *Outbox) hurry() (done func()) {
	ob.mu.Lock()
	ob.mu.waiters++
	for _, q := range ob.mu.queues {
		select {
		case q.hurry <- struct{}{}:
		default:
		}
	}
	ob.mu.Unlock()
	return func() {
		ob.mu.Lock()
		ob.mu.waiters--
		ob.mu.Unlock()
	}
}
