package metaserver

import "sync"

// liveSet remembers object ids this server has seen exist, so that the
// check every tag put, get and delete makes (the object must exist) is a
// map lookup instead of a search of the memtable's skiplist and each
// table's filters: 8 us of a tag get's 11 on a store of 60k objects.
//
// It only ever says "exists" of an id whose key it saw in the store, or
// whose create it saw commit. A delete forgets its ids after its commit,
// and every forget moves a generation on: a lookup that read the store
// before the commit adds what it found only if no forget came between its
// start and its add (add's gen), so a deleted id is never remembered
// again. Between a delete's commit and its forget a check may still find
// the id, as it would have just before the commit: the delete is not
// acknowledged yet, and writers of tags hold lifeMu for reading, which
// deletes hold for writing across both.
type liveSet struct {
	mu  sync.Mutex
	gen uint64
	ids map[uint64]struct{} // guarded by mu
}

// maxLive bounds the ids remembered (a map of them costs about 40 bytes
// each); past it the set starts over.
const maxLive = 1 << 19

// has reports whether id is known to exist, and the generation to pass
// to add after a look in the store.
func (l *liveSet) has(id uint64) (ok bool, gen uint64) {
	l.mu.Lock()
	_, ok = l.ids[id]
	gen = l.gen
	l.mu.Unlock()
	return ok, gen
}

// generation is the generation to pass to add for ids whose create
// commits after this call.
func (l *liveSet) generation() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen
}

// add remembers id, seen in the store, unless something was forgotten
// since gen (has's, taken before the look).
func (l *liveSet) add(id, gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen != gen {
		return
	}
	if l.ids == nil || len(l.ids) >= maxLive {
		l.ids = make(map[uint64]struct{})
	}
	l.ids[id] = struct{}{}
}

// forget drops ids, whose deletion has committed.
func (l *liveSet) forget(ids []uint64) {
	l.mu.Lock()
	l.gen++
	for _, id := range ids {
		delete(l.ids, id)
	}
	l.mu.Unlock()
}

// forgetAll drops every id: keys of objects left the store in bulk
// (moved to their new owners).
func (l *liveSet) forgetAll() {
	l.mu.Lock()
	l.gen++
	l.ids = nil
	l.mu.Unlock()
}
