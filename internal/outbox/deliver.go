package outbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pdcgo/pdc/internal/postings"
)

// linger is how long a deliverer waits for more records to join a
// delivery when nobody waits for it: one-at-a-time tag writes then share
// deliveries (a round trip and a commit at each end) instead of paying one
// each. Queries fence, so they never see the delay.
const linger = 2 * time.Millisecond

// lingerFor waits, after records arrived in q, for linger or until
// somebody waits for deliveries or a delivery's worth is queued. It
// returns false if the outbox closed.
func (ob *Outbox) lingerFor(q *destQueue) bool {
	ob.mu.Lock()
	skip := ob.mu.waiters > 0 || q.size >= MaxDelivery/2
	ob.mu.Unlock()
	if skip {
		return true
	}
	t := time.NewTimer(linger)
	defer t.Stop()
	select {
	case <-t.C:
	case <-q.hurry:
	case <-ob.ctx.Done():
		return false
	}
	return true
}

// take returns the items at the head of q that its destination has not
// applied (those past q.applied), up to MaxDelivery bytes.
func (ob *Outbox) take(q *destQueue) ([]*item, *postings.Ops) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	var items []*item
	size := 0
	for _, it := range q.items[q.applied:] {
		if len(items) > 0 && size+it.size > MaxDelivery {
			break
		}
		items = append(items, it)
		size += it.size
	}
	if len(items) == 1 {
		return items, &items[0].ops
	}
	var ops postings.Ops
	for _, it := range items {
		ops.Append(&it.ops)
	}
	return items, &ops
}

// markTriedLocked records one try of it.
func (ob *Outbox) markTriedLocked(it *item) {
	if it.tried {
		return
	}
	it.tried = true
	it.rec.untried--
	if it.rec.untried == 0 {
		ob.triedLocked(it.rec)
	}
}

// done records that q's first len(items) items were applied: it deletes
// the records every destination has applied, with their marks, marks the
// others' parts that are now applied whole, and takes the items off q.
// items are always q's head, every item applied and not yet recorded
// (acknowledge): a part is marked, or its record deleted, in the batch
// that records every part sent before it to this destination, never
// after a newer one. While the store cannot record, the parts behind are
// sent meanwhile; a crash before they are recorded sends all of them
// again, in order, so what the destination applied last is still the
// newest.
//
// Under doneMu, the batch goes into the store's log before anything
// changes in memory: the deliverers of two destinations acknowledging one
// record at once must not log its deletion before the other's mark (which
// would outlive it). If that fails, nothing changed and done returns the
// error. The wait for the log's sync (sync durability) comes after, out of
// doneMu; the log is synced in its order, so a mark is never durable
// after a later deletion.
func (ob *Outbox) done(q *destQueue, items []*item) error {
	wait, err := ob.record(q, items)
	if err != nil {
		return err
	}
	if err := wait(); err != nil {
		// Memory already follows the log, and deliveries go on. The log
		// syncs in its order and its failure is sticky: nothing logged
		// after this is durable either, so after a crash the records
		// acknowledged from now on come back with this one, and are
		// delivered again in their order. Records committed from now on
		// are held until a later one is durable (commitChanges holds
		// those whose sync failed).
		ob.log.Error("could not sync the record of delivered tag index updates", "err", err)
	}
	return nil
}

// record is done's step under doneMu: it logs the batch and changes
// memory, and returns the wait for the log's sync.
func (ob *Outbox) record(q *destQueue, items []*item) (wait func() error, err error) {
	ob.doneMu.Lock()
	defer ob.doneMu.Unlock()
	ob.mu.Lock()
	count := ob.mu.count
	left := map[*Record]int{} // unacked after these items
	for _, it := range items {
		if _, ok := left[it.rec]; !ok {
			left[it.rec] = it.rec.unacked
		}
		left[it.rec]--
	}
	var gone, marks [][]byte
	for _, it := range items {
		r := it.rec
		switch {
		case left[r] == 0:
			if _, ok := left[r]; ok {
				delete(left, r) // its keys go once
				gone = append(gone, RecordKey(r.seq, r.obj))
				for d := range r.skip {
					gone = append(gone, MarkKey(r.seq, d))
				}
				for _, d := range r.acked {
					gone = append(gone, MarkKey(r.seq, d))
				}
			}
		case it.last:
			marks = append(marks, MarkKey(r.seq, it.dest))
		}
	}
	ob.mu.Unlock()
	wait = noWait
	if len(gone) > 0 || len(marks) > 0 {
		if wait, err = ob.store.Write(gone, marks, MarkValue(count)); err != nil {
			return nil, fmt.Errorf("record the delivery of %d outbox items: %w", len(items), err)
		}
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	q.items = q.items[len(items):]
	for _, it := range items {
		q.size -= it.size
	}
	q.failing, q.unrecorded, q.applied = false, nil, 0
	for _, it := range items {
		ob.markTriedLocked(it)
		it.rec.unacked--
		if it.last && it.rec.unacked > 0 {
			it.rec.acked = append(it.rec.acked, it.dest)
		}
	}
	return wait, nil
}

// acknowledge records, with done, that destination d applied the n items
// just sent, with those it applied before that are not recorded yet
// (q.applied). While the store fails (a full disk), it notes them as
// applied and returns, if items wait behind them, for the deliverer to
// send those: a fence then needs nothing that stays unsent until the
// disk has room, and a query answers. With nothing behind, it retries
// with a growing pause. Applied items are never sent again: a retry
// would apply an old change after a newer one (for this server's own
// part, which tag writes change directly, it would). Their changes are in
// place at d, so they count as tried at once. It returns false if the
// outbox closed.
func (ob *Outbox) acknowledge(d int, q *destQueue, n int) bool {
	var pause time.Duration
	for {
		items := ob.appliedItems(q, n)
		err := ob.done(q, items)
		if err == nil {
			return true
		}
		ob.log.Warn("could not record delivered tag index updates; retrying", "server", d, "err", err)
		if more := ob.unrecorded(q, len(items), err); more {
			return true
		}
		n = 0
		if !ob.backOff(q, &pause) {
			return false
		}
	}
}

// appliedItems returns q's items applied and not recorded, and the n
// sent just after them.
func (ob *Outbox) appliedItems(q *destQueue, n int) []*item {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	return slices.Clone(q.items[:q.applied+n])
}

// backOff grows pause (50 ms to 2 s) and waits for it, or until a fence
// or a writer waits for q's deliveries. It returns false if the outbox
// closed meanwhile.
func (ob *Outbox) backOff(q *destQueue, pause *time.Duration) bool {
	*pause = min(max(2**pause, 50*time.Millisecond), 2*time.Second)
	t := time.NewTimer(*pause)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-q.hurry:
		return true
	case <-ob.ctx.Done():
		return false
	}
}

// unrecorded notes that q's first n items were applied at its
// destination and could not be recorded (err), and wakes the fences
// waiting for q: those items are delivered. It reports whether items
// wait behind them.
func (ob *Outbox) unrecorded(q *destQueue, n int, err error) (more bool) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	q.unrecorded, q.applied = err, n
	for _, it := range q.items {
		ob.markTriedLocked(it)
	}
	close(q.tick)
	q.tick = make(chan struct{})
	return len(q.items) > n
}

func (ob *Outbox) failed(q *destQueue) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	q.failing = true
	for _, it := range q.items {
		ob.markTriedLocked(it)
	}
}

// deliveryTimeout bounds one delivery.
const deliveryTimeout = 30 * time.Second

func (ob *Outbox) send(d int, ops *postings.Ops) error {
	ob.mu.Lock()
	peers := ob.mu.peers
	ob.mu.Unlock()
	if peers == nil {
		return fmt.Errorf("no route to metadata server %d", d)
	}
	ctx, cancel := context.WithTimeout(ob.ctx, deliveryTimeout)
	defer cancel()
	return peers.Apply(ctx, d, ops)
}

func noWait() error { return nil }

// run delivers q's items to destination d, in order, retrying with a
// growing pause while d fails, until the outbox closes.
func (ob *Outbox) run(d int, q *destQueue) {
	defer ob.wg.Done()
	var pause time.Duration
	failing := false
	for {
		select {
		case <-q.wake:
		case <-ob.ctx.Done():
			return
		}
		if !ob.lingerFor(q) {
			return
		}
		for ob.ctx.Err() == nil {
			items, ops := ob.take(q)
			if len(items) == 0 {
				break
			}
			ob.attempted(q, true)
			err := ob.send(d, ops)
			if err == nil {
				ok := ob.acknowledge(d, q, len(items))
				ob.attempted(q, false)
				if !ok {
					return
				}
				if failing {
					ob.log.Info("tag index updates reach metadata server again", "server", d)
					failing = false
				}
				pause = 0
				continue
			}
			if ob.ctx.Err() != nil {
				ob.attempted(q, false)
				return
			}
			if !failing {
				ob.log.Warn("tag index updates for metadata server wait in the outbox; retrying", "server", d, "err", err)
				failing = true
			}
			ob.failed(q)
			ob.attempted(q, false)
			if !ob.backOff(q, &pause) {
				return
			}
		}
	}
}
