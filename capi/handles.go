package capi

import (
	"context"
	"errors"
	"fmt"

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

// handle is what an id stands for. Fields other than id, kind, conn and
// sem are set by kind.
type handle struct {
	id   uint64 // set by add
	kind kind
	// conn is the connection the handle was opened through (itself for a
	// connection): PDCclose closes the handles that share it.
	conn *conn
	// sem is the handle's lock, a 1-slot semaphore (made by add): a call
	// holds it while it uses the container, or the object and its
	// transfers. Unlike a mutex, waiting for it ends with the call's
	// deadline (lock).
	sem chan struct{}

	iter *iterState // kindIter (iter.go)

	// kindContProp: the lifetime of the containers it creates. Guarded by
	// Lib.mu.
	lifetime client.Lifetime

	// kindCont: the container, and how many opens returned this id that
	// no close has matched yet (PDCcont_get_id returns an open id again).
	// refs is guarded by Lib.mu.
	cont *client.Container
	refs int

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
	h.id = l.mu.next
	h.sem = make(chan struct{}, 1)
	l.mu.handles[h.id] = h
	return h.id, nil
}

// lock takes h's lock, waiting for the calls ahead of this one on h at
// most until ctx ends: a call's deadline starts before it waits, so the
// wait counts. what names h in the error.
func (h *handle) lock(ctx context.Context, what func() string) error {
	select {
	case h.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		err := ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) {
			err = pdc.ErrTimeout
		}
		return fmt.Errorf("%s is busy with another call, still under way at this call's deadline (%s %s): %w",
			what(), EnvTimeout, describe(h.conn.timeout), err)
	}
}

// unlock releases the lock lock took.
func (h *handle) unlock() { <-h.sem }

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
	case !ok && id <= l.mu.base:
		return nil, fmt.Errorf("%d is a handle of the process this one was forked from: a forked process opens its own (PDCinit): %w", id, pdc.ErrNotFound)
	case !ok && id <= l.mu.next:
		return nil, fmt.Errorf("%d is a closed handle: %w", id, pdc.ErrClosed)
	case !ok:
		return nil, fmt.Errorf("%d is not a handle this process was given: %w", id, pdc.ErrNotFound)
	case h.kind != want:
		return nil, fmt.Errorf("%d is a %s, not a %s: %w", id, h.kind, want, pdc.ErrInvalid)
	}
	return h, nil
}
