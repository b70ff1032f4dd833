package metaserver

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pdcgo/pdc/internal/placement"
)

// inFlight holds the creates of objects and containers whose commit has
// not returned: applied, so visible to every read, but with sync
// durability perhaps not yet fsynced, so that a power loss could still
// take them back. A read that hands out what a create made (an open, a
// container get, a page of a listing, a membership answered without a
// commit of its own) waits for that create's commit first.
// Reads that commit something of their own need not: the log is synced
// in order, so their commit is durable only once the create is.
//
// Only a store with sync durability has such a window: otherwise a
// commit is in the kernel before it is applied, and creates record
// nothing. Creates are known by the sequence numbers of the ids they
// give, which this store hands out once each. Reads check the count
// first, without a lock: with no create in flight, the usual case for the
// objects of a read-mostly workload, a read costs one atomic load.
type inFlight struct {
	on bool         // the store syncs its commits; set before use
	n  atomic.Int32 // len(mu.creates), read without mu
	mu struct {
		sync.Mutex
		creates []*flight // guarded by mu
	}
}

// flight is one create in its commit: the sequence numbers [first,
// first+n), and done, closed once its commit returned.
type flight struct {
	first, n uint32
	done     chan struct{}
}

// start records a create of the n sequence numbers from first. Call it
// before the create's commit, which makes its records visible, and end
// once that commit returned, whatever it returned: then its records are
// durable, or its sync failed and the store's Settle makes up for it.
// It returns nil if the store does not sync its commits.
func (f *inFlight) start(first uint32, n int) *flight {
	if !f.on {
		return nil
	}
	c := &flight{first: first, n: uint32(n), done: make(chan struct{})}
	f.mu.Lock()
	f.mu.creates = append(f.mu.creates, c)
	f.n.Add(1)
	f.mu.Unlock()
	return c
}

// end records that c's commit returned, and wakes the reads waiting for
// it. A nil c, from a store that does not sync, records nothing.
func (f *inFlight) end(c *flight) {
	if c == nil {
		return
	}
	f.mu.Lock()
	if i := slices.Index(f.mu.creates, c); i >= 0 {
		f.mu.creates = slices.Delete(f.mu.creates, i, i+1)
	}
	f.n.Add(-1)
	f.mu.Unlock()
	close(c.done)
}

// wait returns once the create of the object or container id, if it is
// in flight, has returned from its commit, or ctx's error if ctx ends
// first.
// Call it after reading the record of id: a create whose record was read
// was started before, so it is found here unless it is done. Another
// store's ids (an object imported at start) may share a sequence number
// with a create of this one: such a read waits for nothing of its own,
// which costs it time only. Safe for concurrent use.
func (f *inFlight) wait(ctx context.Context, id uint64) error {
	if f.n.Load() == 0 {
		return nil
	}
	seq := placement.SeqOf(id)
	var done chan struct{}
	f.mu.Lock()
	for _, c := range f.mu.creates {
		if seq-c.first < c.n {
			done = c.done
			break
		}
	}
	f.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
