package capi

import (
	"context"
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
)

// Iterators: PDCcont_iter_* and PDCobj_iter_*. An iterator is a handle
// (kindIter) holding a snapshot of the servers' containers, or of a
// container's objects, taken at iter_start; the C side holds its id and
// a position, never a Go pointer. The C side ends the iterator when
// iter_next passes the last item; one abandoned before goes with its
// connection (PDCclose).

// kindIter is set apart from the kinds in handles.go.
const kindIter kind = 64

// iterState is a snapshot: containers or objects.
type iterState struct {
	conts []client.ContainerInfo
	objs  []client.ObjectInfo
}

func (s *iterState) len() int { return len(s.conts) + len(s.objs) }

// ContIterStart is PDCcont_iter_start: a snapshot of every container of
// the cluster, through the oldest open connection (PDC's names none).
// It returns the iterator's id and how many containers it holds; with
// none it registers nothing and returns id 0; on failure, 0 and -1.
func (l *Lib) ContIterStart() (uint64, int) {
	var n int
	id := l.runID("PDCcont_iter_start()", func() (uint64, error) {
		p, err := l.searchConn()
		if err != nil {
			n = -1
			return 0, err
		}
		ctx, cancel := p.ctx()
		defer cancel()
		conts, err := p.c.Containers(ctx)
		if err != nil {
			n = -1
		}
		if err != nil || len(conts) == 0 {
			return 0, err
		}
		n = len(conts)
		return l.add(&handle{kind: kindIter, conn: p, iter: &iterState{conts: conts}})
	})
	return id, n
}

// ObjIterStart is PDCobj_iter_start: a snapshot of the container's
// objects. As ContIterStart, id 0 with no error for none.
func (l *Lib) ObjIterStart(contID uint64) (uint64, int) {
	var n int
	var failed bool
	id := l.runID(fmt.Sprintf("PDCobj_iter_start(cont %d)", contID), func() (uint64, error) {
		var objs []client.ObjectInfo
		var p *conn
		err := l.contDo(contID, func(ctx context.Context, h *handle) error {
			var err error
			objs, err = h.cont.Objects(ctx)
			p = h.conn
			return err
		})
		if err != nil {
			failed = true
			return 0, err
		}
		if len(objs) == 0 {
			return 0, nil
		}
		n = len(objs)
		return l.add(&handle{kind: kindIter, conn: p, iter: &iterState{objs: objs}})
	})
	if failed {
		return 0, -1
	}
	return id, n
}

// iterItem runs fn on the iterator id's item pos under l.mu.
func (l *Lib) iterItem(id uint64, pos int, fn func(s *iterState) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, err := l.lookupLocked(id, kindIter)
	if err != nil {
		return err
	}
	if pos < 0 || pos >= h.iter.len() {
		return fmt.Errorf("position %d is past the iterator's %d items: %w", pos, h.iter.len(), pdc.ErrInvalid)
	}
	return fn(h.iter)
}

// ContIterInfo is PDCcont_iter_get_info: the container at pos; LocalID
// is this process's oldest open handle to it, 0 if none.
func (l *Lib) ContIterInfo(id uint64, pos int) (ContInfo, int) {
	var info ContInfo
	rc := l.run(fmt.Sprintf("PDCcont_iter_get_info(iterator %d, item %d)", id, pos), func() error {
		return l.iterItem(id, pos, func(s *iterState) error {
			if s.conts == nil {
				return fmt.Errorf("iterator %d is over objects (PDCobj_iter_start), not containers: %w", id, pdc.ErrInvalid)
			}
			c := s.conts[pos]
			local, _ := l.openContLocked(c.Name, nil)
			info = ContInfo{Name: c.Name, LocalID: local, MetaID: c.ID}
			return nil
		})
	})
	return info, rc
}

// ObjIterInfo is PDCobj_iter_get_info: the object at pos, as it was at
// iter_start; LocalID is this process's oldest open handle to it, 0 if
// none.
func (l *Lib) ObjIterInfo(id uint64, pos int) (ObjInfo, int) {
	var info ObjInfo
	rc := l.run(fmt.Sprintf("PDCobj_iter_get_info(iterator %d, item %d)", id, pos), func() error {
		return l.iterItem(id, pos, func(s *iterState) error {
			if s.objs == nil {
				return fmt.Errorf("iterator %d is over containers (PDCcont_iter_start), not objects: %w", id, pdc.ErrInvalid)
			}
			o := s.objs[pos]
			// The oldest open handle to it, by the id each copied at open:
			// no object's lock is taken, so a busy object does not hold
			// this call up (it needs no server).
			var local uint64
			for hid, h := range l.mu.handles {
				if h.kind == kindObj && h.metaID == o.ID && (local == 0 || hid < local) {
					local = hid
				}
			}
			p := o.Props
			info = ObjInfo{Name: o.Name, MetaID: o.ID, LocalID: local, MetaServer: o.Server,
				Prop: ObjProp{Dims: append([]uint64(nil), p.Dims...), Type: int(p.Type), Partition: int(p.Partition), Consistency: int(p.Consistency)}}
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
