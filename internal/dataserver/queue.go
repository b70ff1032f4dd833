package dataserver

import (
	"context"
	"slices"

	"github.com/pdcgo/pdc/region"
)

// mergeMax bounds the bytes of writes stored as one.
const mergeMax = 64 << 20

// merge makes leaders of runs of writes, and of reads, in order, that
// continue each other: same object and layout, the same extent in every
// dim but the first, the next rows in the first, and for writes the next
// bytes of the payload. Their union is then a box whose row-major bytes
// are theirs in order, and thousands of small regions become one list I/O.
func merge(order []*transfer, payload, lane []byte) {
	var lead *transfer
	for _, t := range order {
		if lead != nil && continues(lead, t) {
			t.follower, t.leader = true, lead
			if len(lead.followers) == 0 {
				// The leader's own box until now; most transfers
				// lead alone and never pay for the copy.
				lead.ioBox = lead.box.Clone()
			}
			lead.followers = append(lead.followers, t)
			lead.ioBox.Size[0] += t.box.Size[0]
			lead.ioBytes += t.bytes()
			base := payload
			if t.inLane {
				base = lane
			}
			if t.item.Write && base != nil {
				end := t.payOff + uint64(t.bytes())
				lead.ioData = base[lead.payOff:end:end]
			}
			continue
		}
		lead = t
		lead.ioBox = t.box
		lead.ioData = t.data
		lead.ioBytes = t.bytes()
	}
}

// hold gives t's group n bytes of budget, spread over its members so that
// each gives back its share when collected.
func (t *transfer) hold(n int64) {
	for _, u := range t.group() {
		u.held = min(u.bytes(), n)
		n -= u.held
	}
}

func continues(lead, t *transfer) bool {
	a, b := lead.item, t.item
	if lead.view || t.view {
		return false // a view needs no merged I/O
	}
	if a.Write != b.Write || lead.inLane != t.inLane || a.Obj != b.Obj || lead.store != t.store || a.DimsVersion != b.DimsVersion || a.Elem != b.Elem || lead.layout.Mode != t.layout.Mode ||
		!slices.Equal(a.Dims, b.Dims) || lead.ioBox.Ndim() != t.box.Ndim() || lead.ioBytes+t.bytes() > mergeMax {
		return false
	}
	if a.Write && t.payOff != lead.payOff+uint64(lead.ioBytes) {
		return false
	}
	box := lead.ioBox
	for d := 1; d < box.Ndim(); d++ {
		if box.Off[d] != t.box.Off[d] || box.Size[d] != t.box.Size[d] {
			return false
		}
	}
	return t.box.Off[0] == box.Off[0]+box.Size[0]
}

// bytes is the size of t's data.
func (t *transfer) bytes() int64 { return int64(t.box.Volume()) * int64(t.item.Elem) }

// enqueue registers t and hands it to the workers, waiting for queue room
// under ctx, or, if here is set, does a write's I/O itself (startHere). A
// write holds its budget already. A read takes budget only if it is free:
// its buffer holds budget until the client waits for it, and
// the client may wait only after starting more reads, so it never blocks
// on it; without budget it is done when budget frees up, or by the wait
// that claims it first. A read that must wait for earlier writes is handed
// over once they are done, by a goroutine of its own, so that no worker
// ever waits for work still in the queue.
func (s *Service) enqueue(ctx context.Context, t *transfer, here bool) error {
	if t.follower {
		return nil // registered and queued with its leader
	}
	if s.cfg.beforeEnqueue != nil {
		s.cfg.beforeEnqueue(t.item)
	}
	n := min(t.ioBytes, s.cfg.MaxBytes) // one larger than the budget goes alone
	if !t.item.Write && !t.view {
		if s.budget.TryAcquire(n) {
			t.hold(n)
		} else {
			t.lazy.Store(lazyWaiting)
		}
	}
	s.mu.Lock()
	for t.item.Write && !s.mu.closed && !s.leasedLocked(t.item.Obj) {
		// The lease ended while the start waited here, between its
		// writes: confirmed again, not refused (lease.go). Closing,
		// registerLocked refuses it without a question.
		s.mu.Unlock()
		if err := s.renewLeases(ctx, []*transfer{t}); err != nil {
			s.release(t)
			return err
		}
		s.mu.Lock()
	}
	if err := s.registerLocked(t, here); err != nil {
		s.mu.Unlock()
		s.release(t)
		return err
	}
	if t.view {
		if len(t.deps) == 0 {
			s.mu.Unlock()
			s.complete(t, nil)
			return nil
		}
		// Counted before the lock goes, as below: Close waits for
		// deferred once it has marked the service closed under it.
		s.deferred.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.deferred.Done()
			for _, d := range t.deps {
				<-d.done
			}
			t.deps = nil
			s.complete(t, nil)
		}()
		return nil
	}
	if t.lazy.Load() == lazyWaiting {
		s.deferred.Add(1)
		s.mu.Unlock()
		go s.awaitBudget(t, n)
		return nil
	}
	if len(t.deps) > 0 {
		s.deferred.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.deferred.Done()
			for _, d := range t.deps {
				<-d.done
			}
			t.deps = nil
			_ = s.send(s.ctx, t)
		}()
		return nil
	}
	s.mu.Unlock()
	if here && t.item.Write {
		s.complete(t, s.do(t))
		return nil
	}
	return s.send(ctx, t)
}

// registerLocked gives t and its followers their ids and records them,
// with the earlier writes t must wait for (t.deps), unless the service
// is closing, the object is deleted, or t's layout is not the object's. A
// write's dims lease holds: enqueue renews it first (lease.go).
func (s *Service) registerLocked(t *transfer, here bool) error {
	if s.mu.closed {
		return errClosing
	}
	if err := s.deadLocked(t.item.Obj); err != nil {
		return err
	}
	if err := s.observeLayout(t.item, t.floor); err != nil {
		return err
	}
	s.mu.next++
	t.id = s.mu.next
	obj := t.item.Obj
	if t.item.Write {
		ws := s.mu.writes[obj]
		if ws == nil {
			ws = map[*transfer]struct{}{}
			s.mu.writes[obj] = ws
		}
		if !here {
			// Two workers may store two queued writes in either order:
			// one must not overtake the client's earlier writes it
			// overlaps.
			t.deps = earlierOverlapping(ws, t)
			t.queued = true
			s.mu.queued[obj]++
		}
		ws[t] = struct{}{}
	} else {
		t.deps = earlierOverlapping(s.mu.writes[obj], t)
	}
	for _, f := range t.followers {
		s.mu.next++
		f.id = s.mu.next
		s.mu.transfers.put(f.id, f)
	}
	s.mu.transfers.put(t.id, t)
	return nil
}

// earlierOverlapping lists the writes of ws by t's client that overlap t:
// the ones t must wait for.
func earlierOverlapping(ws map[*transfer]struct{}, t *transfer) []*transfer {
	var deps []*transfer
	for w := range ws {
		if w.client == t.client {
			if _, ok := region.Intersect(w.ioBox, t.ioBox); ok {
				deps = append(deps, w)
			}
		}
	}
	return deps
}

// awaitBudget hands a lazy read to the workers once the writes it depends
// on are stored and budget for its bytes is free, unless a wait claimed it
// first.
func (s *Service) awaitBudget(t *transfer, n int64) {
	defer s.deferred.Done()
	for _, d := range t.deps {
		<-d.done
	}
	if err := s.budget.Acquire(s.quit, n); err != nil {
		if t.lazy.CompareAndSwap(lazyWaiting, lazyClaimed) {
			s.fail(t, errClosing)
		}
		return
	}
	if !t.lazy.CompareAndSwap(lazyWaiting, lazyClaimed) {
		s.budget.Release(n)
		return
	}
	t.hold(n)
	_ = s.send(s.ctx, t)
}

// send puts a registered transfer on the queue.
func (s *Service) send(ctx context.Context, t *transfer) error {
	s.sendMu.RLock()
	defer s.sendMu.RUnlock()
	if s.closing.Load() {
		s.fail(t, errClosing)
		return errClosing
	}
	select {
	case s.queue <- t:
		return nil
	case <-ctx.Done():
		err := ctxErr(ctx, ctx.Err())
		s.fail(t, err)
		return err
	}
}

// fail ends a registered transfer that never reached a worker; a client
// waiting for it gets err.
func (s *Service) fail(t *transfer, err error) {
	if t.item.Write {
		s.forgetWrite(t)
	}
	for _, u := range t.group() {
		u.err = err
		s.release(u)
		close(u.done)
	}
}

// complete ends t's I/O (and its followers') with err.
func (s *Service) complete(t *transfer, err error) {
	if t.item.Write {
		s.forgetWrite(t)
	}
	for _, u := range t.group() {
		u.err = err
		if u.item.Write {
			// The bytes are stored: give back the budget they held.
			s.release(u)
		}
		close(u.done)
	}
}

// lead is the transfer that does t's I/O: t, or its leader.
func (t *transfer) lead() *transfer {
	if t.leader != nil {
		return t.leader
	}
	return t
}

// group is t and its followers.
func (t *transfer) group() []*transfer {
	if len(t.followers) == 0 {
		return []*transfer{t}
	}
	return append([]*transfer{t}, t.followers...)
}
