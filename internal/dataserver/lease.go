package dataserver

import (
	"fmt"
	"time"

	"github.com/pdcgo/pdc"
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
// come. A metadata server answers a set dims whose cut some data server
// did not apply only once wire.DimsLeaseWait has passed since it
// committed it: every lease confirmed before the commit has ended by
// then, and a question answered after it tells the new version, which
// refuses the older writes as stale. A server cut off from the metadata
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

// leasedLocked refuses a write of it unless its object's dims lease
// holds: confirmDims, just before, renews one that ended, so a refusal
// here means the start was held longer than the lease since (waiting for
// budget or for the client's earlier starts). It is refused as stale,
// and the client's retry after refreshing the object confirms the dims
// again. s.mu is held.
func (s *Service) leasedLocked(it wire.DataItem) error {
	if !s.leases() || s.heldLocked(it.Obj, s.now()) {
		return nil
	}
	return fmt.Errorf("object %d: dims version %d not confirmed with its metadata server in the last %v (a shrink there may not have reached this server yet); refresh and retry: %w",
		it.Obj, it.DimsVersion, s.cfg.lease, pdc.ErrStale)
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
