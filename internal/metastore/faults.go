package metastore

// FailSyncs makes the store's log act as under DurabilitySync with an
// fsync that failed with err: every later wait fails until restore is
// called. For tests of what is built on the store.
func (s *Store) FailSyncs(err error) (restore func()) {
	w := s.log
	w.mu.Lock()
	w.sync = true
	w.mu.Unlock()
	w.syncMu.Lock()
	w.setErr(err)
	w.syncMu.Unlock()
	return func() {
		w.syncMu.Lock()
		w.setErr(nil)
		w.syncMu.Unlock()
	}
}

// FailCommits makes every commit fail, as a log that cannot rotate would,
// until restore is called. For tests of what is built on the store.
func (s *Store) FailCommits() (restore func()) {
	w := s.log
	w.mu.Lock()
	f := w.f
	w.f = nil
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		w.f = f
		w.mu.Unlock()
	}
}

// Crash drops the store as a killed process would: the log stays as
// written, and pebble's memtables (it runs without its own log) are lost.
// The store is unusable after. For tests of what is built on the store.
func (s *Store) Crash() {
	s.log.close()
	s.db.Close()
}
