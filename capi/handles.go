package capi

import (
	"fmt"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
)

// kind is what a handle refers to.
type kind uint8

const (
	kindConn     kind = iota + 1 // PDCinit
	kindContProp                 // PDCprop_create(PDC_CONT_CREATE)
	kindCont                     // PDCcont_create, _open, _get_id
	kindObjProp                  // PDCprop_create(PDC_OBJ_CREATE), PDCprop_obj_dup
	kindObj                      // PDCobj_create, _open, _put_data
	kindRegion                   // PDCregion_create
	kindTransfer                 // PDCregion_transfer_create
	kindQuery                    // PDCquery_create, _and, _or (query.go)
)

func (k kind) String() string {
	switch k {
	case kindIter:
		return "iterator"
	case kindConn:
		return "pdc connection (PDCinit)"
	case kindContProp:
		return "container property"
	case kindCont:
		return "container"
	case kindObjProp:
		return "object property"
	case kindObj:
		return "object"
	case kindRegion:
		return "region"
	case kindTransfer:
		return "region transfer"
	case kindQuery:
		return "data query"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// handle is what an id stands for. Fields other than kind and conn are
// set by kind.
type handle struct {
	kind kind
	// conn is the connection the handle was opened through (itself for a
	// connection): PDCclose closes the handles that share it.
	conn *conn

	iter *iterState // kindIter (iter.go)

	// kindContProp: the lifetime of the containers it creates. Guarded by
	// Lib.mu.
	lifetime client.Lifetime

	// kindCont: the container, and how many opens returned this id that
	// no close has matched yet (PDCcont_get_id returns an open id again).
	// refs is guarded by Lib.mu.
	cont *client.Container
	refs int
	mu   sync.Mutex // serializes calls on cont, and on obj and its transfers

	objState // kindObjProp, kindObj, kindRegion, kindTransfer (obj.go)

	queryState // kindQuery (query.go)
}

// add registers h and returns its new id. A handle opened through a
// connection that PDCclose closed meanwhile is refused: nothing would
// ever close it.
func (l *Lib) add(h *handle) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.conn.closed {
		return 0, fmt.Errorf("its connection %q was closed (PDCclose) during the call: %w", h.conn.name, pdc.ErrClosed)
	}
	l.mu.next++
	l.mu.handles[l.mu.next] = h
	return l.mu.next, nil
}

// get returns the open handle id, which must be of kind want.
func (l *Lib) get(id uint64, want kind) (*handle, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lookupLocked(id, want)
}

// lookupLocked is get; it requires l.mu to be held.
func (l *Lib) lookupLocked(id uint64, want kind) (*handle, error) {
	if id == 0 {
		return nil, fmt.Errorf("id 0 is not a %s: 0 is what a failed call returns: %w", want, pdc.ErrInvalid)
	}
	h, ok := l.mu.handles[id]
	switch {
	case !ok && id <= l.mu.next:
		return nil, fmt.Errorf("%d is a closed handle: %w", id, pdc.ErrClosed)
	case !ok:
		return nil, fmt.Errorf("%d is not a handle this process was given: %w", id, pdc.ErrNotFound)
	case h.kind != want:
		return nil, fmt.Errorf("%d is a %s, not a %s: %w", id, h.kind, want, pdc.ErrInvalid)
	}
	return h, nil
}
