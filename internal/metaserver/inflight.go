package metaserver

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/placement"
)

// inFlight holds the creates of objects and containers under way: from
// the moment their sequence numbers are handed out (begin) until their
// commit has returned (end). Two kinds of question need them:
//
//   - Reads that hand out what a create made (an open, a container get, a
//     page of a listing, a membership answered without a commit of its
//     own) wait for that create's commit (wait). With sync durability a
//     commit is applied, so visible to every read, before its fsync
//     returns: an open in that window answered an object that a power
//     loss then took back. Reads that commit something of their own need
//     not wait: the log is synced in order, so their commit is durable
//     only once the create is. With process durability a commit is in
//     the kernel before it is applied, and the wait is over as soon as
//     the record can be read.
//   - A data server asking about an id that is not in the store must be
//     told whether it was deleted or never created (unborn): ids are
//     predictable (placement key and a sequence number), so one may be
//     written to before its object exists, and told "gone" the data
//     server would refuse the object for as long as it runs, and the
//     object, once created, could not be written there
//     (docs/design/0016-deleted-objects.md, "Ids not yet created"). An id
//     of this server not in the store was never created if its sequence
//     number is at or above the store's high-water mark (not handed out
//     yet) or belongs to a create under way.
//
// Sequence numbers are taken and recorded under mu, so that unborn never
// sees one handed out and not yet recorded. Reads check the count first,
// without a lock: with no create under way, the usual case for the
// objects of a read-mostly workload, a read costs one atomic load.
type inFlight struct {
	n  atomic.Int32 // len(mu.creates), read without mu
	mu struct {
		sync.Mutex
		creates []*flight // guarded by mu
	}
}

// flight is one create under way: the sequence numbers [first, first+n),
// and done, closed once its commit returned.
type flight struct {
	first, n uint32
	done     chan struct{}
}

// begin hands out n consecutive sequence numbers of st for a create (of
// one container, or of a batch of objects) and records it as under way
// until end.
func (f *inFlight) begin(st *metastore.Store, n int) (*flight, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	first, err := st.NextSeqs(n)
	if err != nil {
		return nil, err
	}
	c := &flight{first: first, n: uint32(n), done: make(chan struct{})}
	f.mu.creates = append(f.mu.creates, c)
	f.n.Add(1)
	return c, nil
}

// end records that c's commit returned, whatever it returned (then its
// records are durable, or not applied, or applied with a failed sync that
// the store's Settle makes up for), and wakes the reads waiting for it.
// A nil c records nothing.
func (f *inFlight) end(c *flight) {
	if c == nil {
		return
	}
	f.mu.Lock()
	if i := slices.Index(f.mu.creates, c); i >= 0 {
		f.mu.creates = slices.Delete(f.mu.creates, i, i+1)
		f.n.Add(-1)
	}
	f.mu.Unlock()
	close(c.done)
}

// underLocked returns the create under way that handed out seq, nil if
// none.
// f.mu is held.
func (f *inFlight) underLocked(seq uint32) *flight {
	for _, c := range f.mu.creates {
		if seq-c.first < c.n {
			return c
		}
	}
	return nil
}

// wait returns once the create of the object or container id, if it is
// under way, has returned from its commit, or ctx's error if ctx ends
// first. Call it after reading the record of id: a create whose record
// was read was begun before, so it is found here unless it is done.
// Another store's ids (an object imported at start) may share a sequence
// number with a create of this one: such a read waits for nothing of its
// own, which costs it time only. Safe for concurrent use.
func (f *inFlight) wait(ctx context.Context, id uint64) error {
	if f.n.Load() == 0 {
		return nil
	}
	f.mu.Lock()
	c := f.underLocked(placement.SeqOf(id))
	f.mu.Unlock()
	if c == nil {
		return nil
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unborn reports whether no object with sequence number seq has been
// committed yet: seq is not handed out, or its create is under way. Ask
// it before looking in the store: an object not found there after unborn
// said so was not created before the look (or was created and deleted
// since, which a later question tells).
func (f *inFlight) unborn(st *metastore.Store, seq uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uint64(seq) >= st.HighWater() || f.underLocked(seq) != nil
}
