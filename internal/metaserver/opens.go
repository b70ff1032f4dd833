package metaserver

import "sync"

// openTable counts which client sessions have which objects open, so that a
// container whose objects are open is not deleted under them. A session's
// opens are released when all its connections are gone.
type openTable struct {
	mu        sync.Mutex
	byObj     map[uint64]*openObj          // guarded by mu
	bySession map[string]map[uint64]uint32 // guarded by mu
}

type openObj struct {
	cont     uint64
	sessions map[string]uint32
}

func (t *openTable) init() {
	t.byObj = make(map[uint64]*openObj)
	t.bySession = make(map[string]map[uint64]uint32)
}

func (t *openTable) open(session string, obj, cont uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.byObj[obj]
	if o == nil {
		o = &openObj{cont: cont, sessions: make(map[string]uint32)}
		t.byObj[obj] = o
	}
	o.sessions[session]++
	s := t.bySession[session]
	if s == nil {
		s = make(map[uint64]uint32)
		t.bySession[session] = s
	}
	s[obj]++
}

func (t *openTable) close(session string, obj uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.byObj[obj]
	if o == nil || o.sessions[session] == 0 {
		return
	}
	o.sessions[session]--
	if o.sessions[session] == 0 {
		delete(o.sessions, session)
	}
	if len(o.sessions) == 0 {
		delete(t.byObj, obj)
	}
	if s := t.bySession[session]; s != nil {
		s[obj]--
		if s[obj] == 0 {
			delete(s, obj)
		}
		if len(s) == 0 {
			delete(t.bySession, session)
		}
	}
}

// forget drops every open of obj (it was deleted).
func (t *openTable) forget(obj uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.byObj[obj]
	if o == nil {
		return
	}
	for session := range o.sessions {
		if s := t.bySession[session]; s != nil {
			delete(s, obj)
			if len(s) == 0 {
				delete(t.bySession, session)
			}
		}
	}
	delete(t.byObj, obj)
}

func (t *openTable) endSession(session string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for obj := range t.bySession[session] {
		if o := t.byObj[obj]; o != nil {
			delete(o.sessions, session)
			if len(o.sessions) == 0 {
				delete(t.byObj, obj)
			}
		}
	}
	delete(t.bySession, session)
}

// openIn counts the open objects of container cont and returns one of them.
func (t *openTable) openIn(cont uint64) (n int, example uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, o := range t.byObj {
		if o.cont == cont {
			n++
			example = id
		}
	}
	return n, example
}
