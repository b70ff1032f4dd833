package dataserver

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// budget is the data budget: a semaphore that counts what it has given,
// for Stats to read without a lock.
type budget struct {
	sem  *semaphore.Weighted
	held atomic.Int64
}

func newBudget(n int64) *budget { return &budget{sem: semaphore.NewWeighted(n)} }

func (b *budget) Acquire(ctx context.Context, n int64) error {
	if err := b.sem.Acquire(ctx, n); err != nil {
		return err
	}
	b.held.Add(n)
	return nil
}

func (b *budget) TryAcquire(n int64) bool {
	if !b.sem.TryAcquire(n) {
		return false
	}
	b.held.Add(n)
	return true
}

func (b *budget) Release(n int64) {
	b.held.Add(-n)
	b.sem.Release(n)
}

// Stats is a snapshot of a data service's load.
type Stats struct {
	// Transfers are those registered and not yet ended (collected,
	// stored and waited for, or dropped).
	Transfers int
	// Queued are transfers waiting for a worker.
	Queued int
	// BudgetHeld is the bytes of the data budget taken; BudgetMax the
	// budget (Config.MaxBytes).
	BudgetHeld, BudgetMax int64
	// LaneIn and LaneOut are the bytes of regions written and read
	// through shared-memory lanes since start (the rest travel in the
	// requests' payloads, on the connection).
	LaneIn, LaneOut uint64
	// Objects is the objects with data in the stores of the slots the
	// service holds; WrittenBytes the bytes of regions they stored since
	// they opened (0 until SetSlots).
	Objects      int64
	WrittenBytes uint64
}

// Stats returns the service's load. It takes the service's lock for a
// moment.
func (s *Service) Stats() Stats {
	st := Stats{Queued: len(s.queue), BudgetHeld: s.budget.held.Load(), BudgetMax: s.cfg.MaxBytes,
		LaneIn: s.laneBytes.in.Load(), LaneOut: s.laneBytes.out.Load()}
	s.mu.Lock()
	st.Transfers = s.mu.transfers.len()
	s.mu.Unlock()
	select {
	case <-s.slotsReady:
		for _, store := range s.slots.Stores {
			rs := store.Stats()
			st.Objects += rs.Objects
			st.WrittenBytes += rs.WrittenBytes
		}
	default: // still starting
	}
	return st
}
