package dataserver

import (
	"context"
	"fmt"
	"time"

	"github.com/pdcgo/pdc/internal/wire"
)

// Dims leases (docs/design/0006-region-io.md, "Dims leases"). A data
// server learns that an object's dims changed from the transfers it
// serves and from the cuts its metadata server pushes. A cut that cannot
// be pushed (this server cut off from the metadata server, both reached
// by clients) left this server taking writes at the dims the cut
// replaced: a handle opened before the shrink wrote rows past it, was
// acknowledged, and the rows were gone once the cut was delivered
// (TestStaleWriteAcrossCut in internal/e2e/hosts).
//
// So a write is registered only while its object's dims were confirmed
// with its metadata server (Lives) by a question sent less than the
// lease (wire.DimsLease) ago; the first touch of an object confirms them,
// and a write whose lease has ended confirms them again first
// (confirmDims), one question per object and lease however many writes
// come; so does one whose lease ended while it waited here
// (renewLeases), which is not refused for that. A metadata server
// answers a set dims whose cut some data server did not apply only once
// wire.DimsLeaseWait has passed since it committed it: every lease
// confirmed before the commit has ended by then, and a question answered
// after it tells the new version, which refuses the older writes as
// stale. A server cut off from the metadata
// server cannot confirm, and refuses the write with pdc.ErrUnavailable
// naming the metadata server.

// now is the time on the service's monotonic clock.
func (s *Service) now() time.Duration { return time.Since(s.epoch) }

// leases says whether writes need a lease: only an Objects that tells
// dims (Lives) can confirm them.
func (s *Service) leases() bool {
	_, ok := s.cfg.Objects.(Lives)
	return ok
}

// leasedLocked reports whether a write of object obj may be registered
// now: its dims lease holds, or no lease is needed. s.mu is held.
func (s *Service) leasedLocked(obj uint64) bool {
	return !s.leases() || s.heldLocked(obj, s.now())
}

// renewLeases returns once the dims leases of every write of ts hold at
// one time, confirming again those that ended (confirmDims, as often as
// an answer comes too late to renew them). A start taken by the workers'
// path is checked so, whole, before any of it is registered; and a write
// whose lease ended just before its registration is renewed there
// (enqueue), not refused.
//
// A start may wait here longer than the lease its dims were confirmed
// with: for the client's earlier starts, for budget, for room in the
// queue between its writes, for the I/O of its earlier writes on the
// connection's reader. It was refused as stale for that alone, after the
// writes before the one refused were registered and stored, while the
// client's next start of the same objects at the same dims, confirmed
// anew, was taken; the client sends a refused start again only after the
// ones it takes to be refused with it, and the resent one stored its
// older bytes over the newer (TestLeaseEndsWhileStartWaits). Now a start
// is refused only for dims that are no longer its object's, and then,
// from the version the question learned, every later start at those dims
// is refused too. A write is still registered only under a lease that
// holds, so the metadata server's wait for the leases after a cut it
// could not push stays sound.
func (s *Service) renewLeases(ctx context.Context, ts []*transfer) error {
	if !s.leases() {
		return nil
	}
	for s.unleasedWrites(ts) {
		if err := s.confirmDims(ctx, ts); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("confirm dims: %w", ctxErr(ctx, err))
		}
	}
	return nil
}

// unleasedWrites reports whether a write of ts is of an object whose
// dims lease does not hold now.
func (s *Service) unleasedWrites(ts []*transfer) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range ts {
		if t.item.Write && !s.heldLocked(t.item.Obj, now) {
			return true
		}
	}
	return false
}

// heldLocked reports whether object obj's dims lease holds at now. s.mu
// is held.
func (s *Service) heldLocked(obj uint64, now time.Duration) bool {
	at, ok := s.mu.confirmed[obj]
	return ok && now-at < s.cfg.lease
}

// confirmedLocked records that a question sent at sent found object id
// with dims and version on its metadata server: its lease is renewed,
// and a start older than them is refused as stale from now on. s.mu is
// held.
func (s *Service) confirmedLocked(id uint64, sent time.Duration, l Life) {
	if at, ok := s.mu.confirmed[id]; !ok || sent > at {
		s.mu.confirmed[id] = sent
	}
	if seen, ok := s.mu.layouts[id]; !ok || l.DimsVersion > seen.version {
		s.mu.layouts[id] = layoutSeen{version: l.DimsVersion, dims: l.Dims}
	}
}

// unleased reports whether a write of items is of an object whose dims
// lease does not hold: it must be confirmed first.
func (s *Service) unleased(items []wire.DataItem) bool {
	if !s.leases() {
		return false
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, it := range items {
		if !it.Write || i > 0 && it.Obj == items[i-1].Obj {
			continue
		}
		if !s.heldLocked(it.Obj, now) {
			return true
		}
	}
	return false
}
