package metastore

import (
	"fmt"

	"github.com/pdcgo/pdc"
)

// FailSyncs makes the store's log act as under DurabilitySync with an
// fsync that failed with err: every later wait fails until restore is
// called. restore ends it as a disk that works again does: the failure
// stays until the next commit moves the log to a new file, once pebble
// holds everything, so nothing applied meanwhile is taken for durable
// before it is. (It used to clear the error: a Settle right after it
// answered at once, and a cut committed while syncs failed was pushed
// with its record never synced. TestUnsyncedShrinkIsNotPushedBeforeDurable
// saw a power-loss image without it now and then.) For tests of what is
// built on the store. A store opened with DurabilitySync is left as it
// is but for the failure, so that readers running meanwhile (which read
// its durability without a lock: it never changes once open) may call it.
func (s *Store) FailSyncs(err error) (restore func()) {
	w := s.log
	w.mu.Lock()
	if !w.sync {
		w.sync = true
	}
	w.mu.Unlock()
	w.syncMu.Lock()
	w.setErr(err)
	w.notifyLocked()
	w.syncMu.Unlock()
	return func() {
		w.syncMu.Lock()
		w.syncFailed.Store(true)
		w.syncMu.Unlock()
	}
}

// FailCommits makes every commit fail, as a log that cannot rotate would,
// until restore is called. For tests of what is built on the store.
// The log's file stays open: a commit that waits for its sync meanwhile
// gets a real answer.
func (s *Store) FailCommits() (restore func()) {
	w := s.log
	w.mu.Lock()
	w.refuse = true
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		w.refuse = false
		w.mu.Unlock()
	}
}

// Crash drops the store as a killed process would: the log stays as
// written, and pebble's memtables (it runs without its own log) are lost.
// The store is unusable after. For tests of what is built on the store.
func (s *Store) Crash() {
	s.log.close(fmt.Errorf("metadata store crashed: %w", pdc.ErrClosed))
	s.db.Close()
}
