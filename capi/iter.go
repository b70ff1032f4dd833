package capi

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
)

// Iterators: PDCcont_iter_* and PDCobj_iter_*. An iterator is a handle
// (kindIter) holding the container handles this process had open when it
// started (PDC's container iterator walks its handle list, not the
// cluster's containers), or a cursor over a container's objects, and its
// current item; the C side holds its id, never a Go pointer. A cursor
// holds a page per metadata server, not the listing: iterating over a
// container of millions of objects takes bounded memory. It is not a
// snapshot: what is created or deleted while it walks may be listed or
// not, never twice. The C side ends the iterator when iter_next passes the
// last item; one abandoned before goes with its connection (PDCclose).

// kindIter is set apart from the kinds in handles.go.
const kindIter kind = 64

// iterState is a cursor and its current item: a container (conts set) or
// an object (objs set).
type iterState struct {
	// mu is held by a call that moves the cursor: it may wait on servers,
	// so it is not Lib.mu. cur and the cursors are guarded by it.
	mu    sync.Mutex
	conts []ContInfo // the container handles, newest first, as PDC
	objs  *client.Cursor[client.ObjectInfo]
	// servers is the cluster's size, for PDCServer.
	servers int
	// isObj says which kind of item it walks; cont or obj is the current.
	isObj bool
	cont  ContInfo
	obj   client.ObjectInfo
}

// next moves it to its next item within ctx; false past the last.
func (s *iterState) next(ctx context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isObj {
		if len(s.conts) == 0 {
			return false, nil
		}
		s.cont, s.conts = s.conts[0], s.conts[1:]
		return true, nil
	}
	var ok bool
	var err error
	s.obj, ok, err = s.objs.Next(ctx)
	return ok, err
}

// ContIterStart is PDCcont_iter_start: an iterator over the container
// handles this process has open, one entry per handle (two opens of one
// container are two entries with the same meta id), newest first, as
// PDC's walks its list of container ids. The cluster's containers are
// listed by `pdc cont ls` and the Go API's ContainerCursor. It returns the
// iterator's id and Succeed; with no container open it registers nothing
// and returns id 0; on failure, 0 and Fail.
func (l *Lib) ContIterStart() (uint64, int) {
	var id uint64
	rc := l.run("PDCcont_iter_start()", func() error {
		p, err := l.searchConn()
		if err != nil {
			return err
		}
		s := &iterState{conts: l.openConts()}
		id, err = l.startIter(p, s)
		return err
	})
	return id, rc
}

// openConts describes the open container handles, newest first.
func (l *Lib) openConts() []ContInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []ContInfo
	for id, h := range l.mu.handles {
		if h.kind == kindCont {
			out = append(out, ContInfo{Name: h.cont.Name(), LocalID: id, MetaID: h.cont.ID()})
		}
	}
	slices.SortFunc(out, func(a, b ContInfo) int { return cmp.Compare(b.LocalID, a.LocalID) })
	return out
}

// ObjIterStart is PDCobj_iter_start: an iterator over the container's
// objects, in increasing meta id order, at its first. As ContIterStart,
// id 0 with Succeed for none.
func (l *Lib) ObjIterStart(contID uint64) (uint64, int) {
	var id uint64
	rc := l.run(fmt.Sprintf("PDCobj_iter_start(cont %d)", contID), func() error {
		var s *iterState
		var p *conn
		err := l.contDo(contID, func(ctx context.Context, h *handle) error {
			s, p = &iterState{isObj: true, objs: h.cont.ObjectCursor(), servers: len(h.conn.c.Servers())}, h.conn
			return nil
		})
		if err != nil {
			return err
		}
		id, err = l.startIter(p, s)
		return err
	})
	return id, rc
}

// startIter moves s to its first item and registers it: id 0 if it has
// none.
func (l *Lib) startIter(p *conn, s *iterState) (uint64, error) {
	ctx, cancel := p.ctx()
	defer cancel()
	ok, err := s.next(ctx)
	if err != nil || !ok {
		return 0, err
	}
	return l.add(&handle{kind: kindIter, conn: p, iter: s})
}

// IterNext is iter_next: it moves iterator id to its next item and
// returns true, or, past the last item or on a failure (which it
// reports), ends the iterator and returns false.
func (l *Lib) IterNext(id uint64) bool {
	more := false
	l.run(fmt.Sprintf("iter_next(iterator %d)", id), func() error {
		h, err := l.get(id, kindIter)
		if err != nil {
			return err
		}
		ctx, cancel := h.conn.ctx()
		defer cancel()
		more, err = h.iter.next(ctx)
		if !more {
			l.IterEnd(id)
		}
		return err
	})
	return more
}

// iterItem runs fn on iterator id's state, its current item, under its
// lock.
func (l *Lib) iterItem(id uint64, fn func(s *iterState) error) error {
	h, err := l.get(id, kindIter)
	if err != nil {
		return err
	}
	h.iter.mu.Lock()
	defer h.iter.mu.Unlock()
	return fn(h.iter)
}

// ContIterInfo is PDCcont_iter_get_info: the iterator's current container
// handle (LocalID), as it was when the iterator started.
func (l *Lib) ContIterInfo(id uint64) (ContInfo, int) {
	var info ContInfo
	rc := l.run(fmt.Sprintf("PDCcont_iter_get_info(iterator %d)", id), func() error {
		return l.iterItem(id, func(s *iterState) error {
			if s.isObj {
				return fmt.Errorf("iterator %d is over objects (PDCobj_iter_start), not containers: %w", id, pdc.ErrInvalid)
			}
			info = s.cont
			return nil
		})
	})
	return info, rc
}

// ObjIterInfo is PDCobj_iter_get_info: the iterator's current object, as
// the server had it when the iterator reached its page; LocalID is this
// process's oldest open handle to it, 0 if none.
func (l *Lib) ObjIterInfo(id uint64) (ObjInfo, int) {
	var info ObjInfo
	rc := l.run(fmt.Sprintf("PDCobj_iter_get_info(iterator %d)", id), func() error {
		return l.iterItem(id, func(s *iterState) error {
			if !s.isObj {
				return fmt.Errorf("iterator %d is over containers (PDCcont_iter_start), not objects: %w", id, pdc.ErrInvalid)
			}
			o := s.obj
			// The oldest open handle to it, by the id each copied at open:
			// no object's lock is taken, so a busy object does not hold
			// this call up (it needs no server).
			var local uint64
			l.mu.Lock()
			for hid, h := range l.mu.handles {
				if h.kind == kindObj && h.metaID == o.ID && (local == 0 || hid < local) {
					local = hid
				}
			}
			l.mu.Unlock()
			p := o.Props
			info = ObjInfo{Name: o.Name, MetaID: o.ID, LocalID: local, MetaServer: o.Server,
				PDCMetaServer: PDCServer(o.Name, p.TimeStep, s.servers),
				Prop:          ObjProp{Dims: append([]uint64(nil), p.Dims...), Type: int(p.Type), Partition: int(p.Partition), Consistency: int(p.Consistency)}}
			return nil
		})
	})
	return info, rc
}

// IterEnd releases the iterator id if it is still open: iter_next past
// the last item, or iter_start that could not allocate its C struct.
// Neither fails, so IterEnd reports nothing; PDCclose of the iterator's
// connection may have released it already.
func (l *Lib) IterEnd(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.lookupLocked(id, kindIter); err == nil {
		delete(l.mu.handles, id)
	}
}

// ContObjNames is pdc_cont_obj_names: the names of every object in the
// container, in meta id order. A binding cannot tell from
// PDCobj_iter_next's NULL whether the walk ended or failed; this call
// says which.
func (l *Lib) ContObjNames(contID uint64) ([]string, int) {
	var names []string
	rc := l.run(fmt.Sprintf("pdc_cont_obj_names(cont %d)", contID), func() error {
		var cur *client.Cursor[client.ObjectInfo]
		var p *conn
		err := l.contDo(contID, func(ctx context.Context, h *handle) error {
			cur, p = h.cont.ObjectCursor(), h.conn
			return nil
		})
		if err != nil {
			return err
		}
		ctx, cancel := p.ctx()
		defer cancel()
		for {
			info, ok, err := cur.Next(ctx)
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			names = append(names, info.Name)
		}
	})
	if rc != 0 {
		return nil, rc
	}
	return names, rc
}
