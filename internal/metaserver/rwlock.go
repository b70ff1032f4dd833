package metaserver

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pdcgo/pdc"
)

// rwLock is a readers-writer lock whose waits end with their context. A
// delete, set dims or lifetime change holds lifeMu through its fsync; on
// a stalled disk, sync.RWMutex kept every read queued behind it (and the
// connection it runs inline on) past its deadline, for as long as the
// disk stalled.
//
// It has two kinds of shared holders, which differ in how they meet a
// writer that waits:
//   - RLock is for writes that commit under the lock, and so may hold it
//     through an fsync (tag puts, placements, membership changes). A
//     writer waiting keeps new ones out, as sync.RWMutex does, so that
//     they cannot keep it waiting for ever.
//   - ReadLock is for reads that hold it only for a look at the store or
//     memory (tag gets and lists, region queries). While an RLock holder
//     keeps a waiting writer out anyway, they go past it: a query of one
//     object is not held behind a delete of another that itself waits
//     for an unrelated fsync, as sync.RWMutex's writer preference held
//     it. Once only readers are in the writer's way, new ones queue
//     behind it, so they cannot starve it either.
//
// Writers are served in arrival order. No goroutine waits on anyone's
// behalf: a waiter blocks on a channel of its own, which the holder that
// lets it in closes, and one that gives up takes itself off the queue.
// The zero value is unlocked. Safe for concurrent use.
type rwLock struct {
	mu struct {
		sync.Mutex
		writer  bool          // held for writing
		shared  int           // RLock holders
		readers int           // ReadLock holders
		queue   []*lockWaiter // waiting, in arrival order
		writers int           // writers in queue
	}
	// waitHook, if set, is called with the kind of each acquire that has
	// joined the queue (tests: to act once one waits, without polling).
	waitHook atomic.Pointer[func(lockKind)]
}

type lockKind uint8

const (
	lockWrite lockKind = iota
	lockShared
	lockRead
)

// lockWaiter is one acquire waiting in an rwLock's queue.
type lockWaiter struct {
	kind    lockKind
	granted bool          // guarded by the lock's mu
	ch      chan struct{} // closed once granted
}

// Lock takes l for writing. If it must wait and ctx ends first, it
// returns ctx's error (pdc.CtxErr) without the lock. A free lock is taken
// even with ctx done: only a wait looks at ctx.
func (l *rwLock) Lock(ctx context.Context) error { return l.acquire(ctx, lockWrite) }

// Unlock releases l held for writing.
func (l *rwLock) Unlock() { l.release(lockWrite) }

// RLock takes l shared, for a holder that may keep it through a commit;
// a writer waiting goes first. Errors are as for Lock.
func (l *rwLock) RLock(ctx context.Context) error { return l.acquire(ctx, lockShared) }

// RUnlock releases l taken by RLock.
func (l *rwLock) RUnlock() { l.release(lockShared) }

// ReadLock takes l shared, for a holder that keeps it only for a short
// look and waits for nothing while it holds it; it goes past a waiting
// writer that an RLock holder keeps out. Errors are as for Lock.
func (l *rwLock) ReadLock(ctx context.Context) error { return l.acquire(ctx, lockRead) }

// ReadUnlock releases l taken by ReadLock.
func (l *rwLock) ReadUnlock() { l.release(lockRead) }

// admitsLocked reports whether an acquire of kind k may take l now;
// writerAhead says whether a writer that came before it waits.
func (l *rwLock) admitsLocked(k lockKind, writerAhead bool) bool {
	m := &l.mu
	if m.writer {
		return false
	}
	switch k {
	case lockWrite:
		return m.shared == 0 && m.readers == 0 && !writerAhead
	case lockShared:
		return !writerAhead
	default:
		return !writerAhead || m.shared > 0
	}
}

func (l *rwLock) takeLocked(k lockKind) {
	m := &l.mu
	switch k {
	case lockWrite:
		m.writer = true
	case lockShared:
		m.shared++
	default:
		m.readers++
	}
}

func (l *rwLock) acquire(ctx context.Context, k lockKind) error {
	m := &l.mu
	m.Lock()
	// Every waiter left in the queue is one not admitted: a new one
	// comes after all of them, writers included.
	if l.admitsLocked(k, m.writers > 0) {
		l.takeLocked(k)
		m.Unlock()
		return nil
	}
	w := &lockWaiter{kind: k, ch: make(chan struct{})}
	m.queue = append(m.queue, w)
	if k == lockWrite {
		m.writers++
	}
	m.Unlock()
	if h := l.waitHook.Load(); h != nil {
		(*h)(k)
	}
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
	}
	m.Lock()
	defer m.Unlock()
	if w.granted {
		// Let in as ctx ended: it holds the lock now.
		return nil
	}
	m.queue = slices.DeleteFunc(m.queue, func(q *lockWaiter) bool { return q == w })
	if k == lockWrite {
		m.writers--
		// The readers and shared holders it kept out may go now.
		l.grantLocked()
	}
	return pdc.CtxErr(ctx)
}

func (l *rwLock) release(k lockKind) {
	m := &l.mu
	m.Lock()
	defer m.Unlock()
	switch {
	case k == lockWrite && m.writer:
		m.writer = false
	case k == lockShared && m.shared > 0:
		m.shared--
	case k == lockRead && m.readers > 0:
		m.readers--
	default:
		// Not held so: a caller's bug, which must not unbalance the
		// counts of the holders there are.
		return
	}
	if len(m.queue) > 0 {
		l.grantLocked()
	}
}

// grantLocked lets in, in arrival order, every waiter that may go now.
func (l *rwLock) grantLocked() {
	m := &l.mu
	writerAhead := false
	kept := m.queue[:0]
	for _, w := range m.queue {
		if l.admitsLocked(w.kind, writerAhead) {
			l.takeLocked(w.kind)
			if w.kind == lockWrite {
				m.writers--
			}
			w.granted = true
			close(w.ch)
			continue
		}
		if w.kind == lockWrite {
			writerAhead = true
		}
		kept = append(kept, w)
	}
	clear(m.queue[len(kept):])
	m.queue = kept
}
