package metaserver

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// touching holds, under sync durability, the commits that are applied (so
// visible to every read) and have not returned from their fsync, by what
// they change: the ids of the objects and containers whose records, tags,
// memberships or region maps they write or delete, the names
// (nameSubject) of the objects and containers they delete, and the staged
// records they remove (stageSubject). A read that answers about one of
// them (a tag get or list, a membership check, a region query or a write
// placed in place, a container get, a staged record's lookup or wait that
// finds none) waits for the commits touching it, then settles the store
// (readDurably): a power loss during such a fsync took back a tag value,
// a membership, a region's server, or brought back what a delete removed,
// after the read had answered it. The creates of objects and containers
// are held by inFlight, which also answers which ids are not created yet;
// a set dims is seen by opens through dimsMu.
//
// With process durability a commit is in the kernel before it is applied,
// and nothing is recorded. Reads check the count first, without a lock:
// with no commit of a tag, a delete or a membership in its fsync, a read
// costs one atomic load. A writer, which waits for an fsync anyway, takes
// the mutex twice.
type touching struct {
	on bool         // sync durability
	n  atomic.Int32 // commits recorded, read without mu
	mu struct {
		sync.Mutex
		by map[uint64][]*touch // subject -> the commits touching it; guarded by mu
	}
}

// touch is one commit under way: the subjects it changes, and done, closed
// once its commit returned.
type touch struct {
	subjects []uint64
	done     chan struct{}
}

// nameSubject is the subject of a name that a delete frees: a read that
// answers "not found" for the name waits for the delete. kind tells
// objects ('o', with their time step) from containers ('c'). A hash:
// another name or an id that shares it costs a read a wait, no more.
func nameSubject(kind byte, name string, timeStep uint32) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037) // FNV-1a, without allocating
	for _, b := range [...]byte{kind, byte(timeStep), byte(timeStep >> 8), byte(timeStep >> 16), byte(timeStep >> 24)} {
		h = (h ^ uint64(b)) * prime
	}
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * prime
	}
	return h
}

// begin records a commit that changes subjects, until end. Call it before
// the commit is applied. Nil (recording nothing) with process durability
// or no subject.
func (t *touching) begin(subjects ...uint64) *touch {
	if !t.on || len(subjects) == 0 {
		return nil
	}
	subjects = slices.Clone(subjects)
	slices.Sort(subjects)
	subjects = slices.Compact(subjects)
	c := &touch{subjects: subjects, done: make(chan struct{})}
	t.mu.Lock()
	if t.mu.by == nil {
		t.mu.by = map[uint64][]*touch{}
	}
	for _, s := range subjects {
		t.mu.by[s] = append(t.mu.by[s], c)
	}
	t.n.Add(1)
	t.mu.Unlock()
	return c
}

// end records that c's commit returned, whatever it returned (then its
// change is durable, or not applied, or applied with a failed sync that
// Store.Settle makes up for), and wakes the reads waiting for it. A nil c
// records nothing.
func (t *touching) end(c *touch) {
	if c == nil {
		return
	}
	t.mu.Lock()
	for _, s := range c.subjects {
		l := t.mu.by[s]
		if i := slices.Index(l, c); i >= 0 {
			l = slices.Delete(l, i, i+1)
		}
		if len(l) == 0 {
			delete(t.mu.by, s)
		} else {
			t.mu.by[s] = l
		}
	}
	t.n.Add(-1)
	t.mu.Unlock()
	close(c.done)
}

// wait returns once the commits touching any of subjects that were
// recorded when it was called have returned, or ctx's error if ctx ends
// first. Call it after the read: a commit whose change the read saw was
// recorded before it was applied, so it is found here unless it is done.
// Commits recorded after the call are not waited for, so a stream of
// writes to one object does not hold a read back. Safe for concurrent
// use.
func (t *touching) wait(ctx context.Context, subjects ...uint64) error {
	if t.n.Load() == 0 {
		return nil
	}
	var waits []*touch
	t.mu.Lock()
	for _, s := range subjects {
		waits = append(waits, t.mu.by[s]...)
	}
	t.mu.Unlock()
	for _, c := range waits {
		select {
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
