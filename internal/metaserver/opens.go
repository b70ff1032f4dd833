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

// openObj is one object's opens. Nearly every object is open in one
// session at a time, so that one is kept inline and a map is made only
// for the others: a map per object would cost more than the rest of its
// server memory.
type openObj struct {
	cont    uint64
	session string            // the first session to open it ("" once it closed)
	n       uint32            // session's opens
	others  map[string]uint32 // other sessions' opens, made on demand
}

func (o *openObj) add(session string) {
	switch {
	case o.n > 0 && o.session == session:
		o.n++
	case o.n == 0 && o.others[session] == 0:
		o.session, o.n = session, 1
	default:
		if o.others == nil {
			o.others = make(map[string]uint32)
		}
		o.others[session]++
	}
}

// drop removes one of session's opens, or all of them, and reports whether
// session had any.
func (o *openObj) drop(session string, all bool) bool {
	if o.n > 0 && o.session == session {
		o.n--
		if all {
			o.n = 0
		}
		if o.n == 0 {
			o.session = ""
		}
		return true
	}
	c := o.others[session]
	if c == 0 {
		return false
	}
	if c == 1 || all {
		delete(o.others, session)
	} else {
		o.others[session] = c - 1
	}
	return true
}

func (o *openObj) idle() bool { return o.n == 0 && len(o.others) == 0 }

func (t *openTable) init() {
	t.byObj = make(map[uint64]*openObj)
	t.bySession = make(map[string]map[uint64]uint32)
}

func (t *openTable) open(session string, obj, cont uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.byObj[obj]
	if o == nil {
		o = &openObj{cont: cont}
		t.byObj[obj] = o
	}
	o.add(session)
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
	if o == nil || !o.drop(session, false) {
		return
	}
	if o.idle() {
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
	sessions := make([]string, 0, 1+len(o.others))
	if o.n > 0 {
		sessions = append(sessions, o.session)
	}
	for session := range o.others {
		sessions = append(sessions, session)
	}
	for _, session := range sessions {
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
			o.drop(session, true)
			if o.idle() {
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

// isOpen reports whether any session has object obj open.
func (t *openTable) isOpen(obj uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byObj[obj] != nil
}
