package capi

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// RegionCreate is PDCregion_create: a box of size[i] elements from
// offset[i] in each of ndim dims. offset and size are nil for NULL. A region
// belongs to no connection: PDCclose does not close it.
func (l *Lib) RegionCreate(ndim uint64, offset, size []uint64) uint64 {
	return l.runIDLazy(func() string {
		return fmt.Sprintf("PDCregion_create(%d, %s, %s)", ndim, fmtDims(offset), fmtDims(size))
	}, func() (uint64, error) {
		if offset == nil || size == nil {
			return 0, fmt.Errorf("offset or size is NULL, or ndim %d is not 1 to %d: %w", ndim, region.MaxDims, pdc.ErrInvalid)
		}
		box, err := region.New(slices.Clone(offset), slices.Clone(size))
		if err != nil {
			return 0, err
		}
		return l.add(&handle{kind: kindRegion, conn: noConn, objState: objState{box: box}})
	})
}

// noConn is the connection of handles that belong to none (regions): it
// never closes.
var noConn = &conn{name: "(none)"}

// RegionClose is PDCregion_close. Transfers created with the region keep
// their own copy of it.
func (l *Lib) RegionClose(id uint64) int {
	return l.runLazy(func() string { return fmt.Sprintf("PDCregion_close(%d)", id) }, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		_, err := l.lookupLocked(id, kindRegion)
		if err == nil {
			delete(l.mu.handles, id)
		}
		return err
	})
}

// closeRegion closes id if it is a region handle, and says whether it was.
func (l *Lib) closeRegion(id uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.mu.handles[id]; ok && h.kind == kindRegion {
		delete(l.mu.handles, id)
		return true
	}
	return false
}

// RegionGetInfo is PDCregion_get_info: the region's box.
func (l *Lib) RegionGetInfo(id uint64) (region.Box, int) {
	var box region.Box
	rc := l.run(fmt.Sprintf("PDCregion_get_info(%d)", id), func() error {
		h, err := l.get(id, kindRegion)
		if err == nil {
			box = h.box.Clone()
		}
		return err
	})
	return box, rc
}

// Accesses (pdc_access_t).
const (
	AccessRead  = 1 // PDC_READ
	AccessWrite = 2 // PDC_WRITE
)

// TransferCreate is PDCregion_transfer_create. buf is the caller's memory
// (C memory in libpdc), shaped as local's end in every dim (HDF5's memory
// space: a 1-D local region is size[0] elements from element offset[0] of
// buf); remote is the part of the object, inside its dims. Elements are as
// large as the object's type. The transfer reads or writes buf from start
// until wait (or close): the caller keeps it valid until then. The regions
// may be closed right after.
func (l *Lib) TransferCreate(buf unsafe.Pointer, access int, objID, localID, remoteID uint64) uint64 {
	call := func() string {
		return fmt.Sprintf("PDCregion_transfer_create(%p, %s, obj %d, local %d, remote %d)", buf, accessName(access), objID, localID, remoteID)
	}
	return l.runIDLazy(call, func() (uint64, error) {
		if err := checkAccessBuf(access, buf); err != nil {
			return 0, err
		}
		local, err := l.get(localID, kindRegion)
		if err != nil {
			return 0, fmt.Errorf("local region: %w", err)
		}
		remote, err := l.get(remoteID, kindRegion)
		if err != nil {
			return 0, fmt.Errorf("remote region: %w", err)
		}
		var t *client.Transfer
		var oh *handle
		err = l.objDo(objID, func(ctx context.Context, h *handle) error {
			oh = h
			t, err = newTransfer(ctx, h, buf, access, local.box, remote.box)
			return err
		})
		if err != nil {
			return 0, err
		}
		return l.add(&handle{kind: kindTransfer, conn: oh.conn, objState: objState{xfer: t, xferObj: oh}})
	})
}

// TransferNow is pdc_region_transfer_now: PDCregion_transfer_create of
// buf, shaped as size, to the object's box (offset, size), then start,
// wait and close, in one call and one request per data server
// (client.Transfer.Do). For callers that wait at once, as Python's
// obj[i] = a does: the four calls and two regions they would make, and a
// round trip, are saved.
func (l *Lib) TransferNow(objID uint64, buf unsafe.Pointer, access int, ndim uint64, offset, size []uint64) int {
	call := func() string {
		return fmt.Sprintf("pdc_region_transfer_now(obj %d, %p, %s, %d, %s, %s)", objID, buf, accessName(access), ndim, fmtDims(offset), fmtDims(size))
	}
	return l.runLazy(call, func() error {
		if err := checkAccessBuf(access, buf); err != nil {
			return err
		}
		if offset == nil || size == nil {
			return fmt.Errorf("offset or size is NULL, or ndim %d is not 1 to %d: %w", ndim, region.MaxDims, pdc.ErrInvalid)
		}
		remote, err := region.New(slices.Clone(offset), slices.Clone(size))
		if err != nil {
			return err
		}
		return l.objDo(objID, func(ctx context.Context, h *handle) error {
			t, err := newTransfer(ctx, h, buf, access, region.Shape(remote.Size...), remote)
			if err != nil {
				return err
			}
			// Do returns with nothing holding buf, even when it fails or
			// runs out of time: the close only releases the transfer.
			err = t.Do(ctx)
			if cerr := t.Close(ctx); cerr != nil && err == nil {
				err = cerr
			}
			return err
		})
	})
}

// checkAccessBuf checks a transfer's access and buffer from C.
func checkAccessBuf(access int, buf unsafe.Pointer) error {
	if access != AccessRead && access != AccessWrite {
		return fmt.Errorf("access %d: want PDC_READ (1) or PDC_WRITE (2): %w", access, pdc.ErrInvalid)
	}
	if buf == nil {
		return fmt.Errorf("buf is NULL: %w", pdc.ErrInvalid)
	}
	return nil
}

// newTransfer is a transfer of object h between buf, shaped as local's
// end in every dim, and the object's remote box, with buf's size checked.
// The caller holds h's lock.
func newTransfer(ctx context.Context, h *handle, buf unsafe.Pointer, access int, local, remote region.Box) (*client.Transfer, error) {
	elem := uint64(max(h.obj.Info().Props.Type.Size(), 1))
	need, ok := bufferBytes(local, elem)
	if !ok {
		return nil, fmt.Errorf("local region %v spans a buffer of more than 2^64 bytes (%d-byte elements up to its end in each dim): %w",
			local, elem, pdc.ErrTooLarge)
	}
	if need > maxBuffer {
		return nil, fmt.Errorf("local region %v needs a buffer of %d bytes (%d-byte elements up to its end in each dim), over the limit of %d bytes: %w",
			local, need, elem, uint64(maxBuffer), pdc.ErrTooLarge)
	}
	return h.obj.NewTransfer(ctx, unsafe.Slice((*byte)(buf), need), client.Access(access), local, remote)
}

// bufferBytes is the size of the buffer a local region describes (HDF5's
// memory space): from its origin to its end in every dim, in elements of
// elem bytes. ok is false if it does not fit in 64 bits.
func bufferBytes(local region.Box, elem uint64) (n uint64, ok bool) {
	n = elem
	for i := range local.Size {
		if n, ok = mulOK(n, local.End(i)); !ok {
			return 0, false
		}
	}
	return n, true
}

func accessName(a int) string {
	switch a {
	case AccessRead:
		return "PDC_READ"
	case AccessWrite:
		return "PDC_WRITE"
	}
	return fmt.Sprint(a)
}

// transfersDo runs fn on the transfers ids (at least one) holding the
// locks of their objects, taken in the order of the objects' ids. An object
// closed since refuses unless closedOK. fn gets the call's context: the
// connection's timeout, started before the waits for the objects.
func (l *Lib) transfersDo(ids []uint64, closedOK bool, fn func(ctx context.Context, p *conn, ts []*client.Transfer) error) error {
	if len(ids) == 0 {
		return nil // PDC succeeds on none: a loop's last batch may be empty
	}
	ts := make([]*client.Transfer, len(ids))
	var objs []*handle
	var p *conn
	seen := map[uint64]bool{}
	for i, id := range ids {
		if seen[id] {
			return fmt.Errorf("transfer %d is listed twice: %w", id, pdc.ErrInvalid)
		}
		seen[id] = true
		h, err := l.get(id, kindTransfer)
		if err != nil {
			return err
		}
		if p != nil && h.conn != p {
			return fmt.Errorf("transfers %d and %d belong to different connections (PDCinit): %w", ids[0], id, pdc.ErrInvalid)
		}
		p = h.conn
		ts[i] = h.xfer
		if !slices.Contains(objs, h.xferObj) {
			objs = append(objs, h.xferObj)
		}
	}
	// One lock order for every caller that holds more than one object
	// (only this one does), whatever the order of ids: no deadlock.
	slices.SortFunc(objs, func(a, b *handle) int { return cmp.Compare(a.id, b.id) })
	ctx, cancel := p.ctx()
	defer cancel()
	for _, o := range objs {
		if err := o.lock(ctx, o.objWhat); err != nil {
			return err
		}
		defer o.unlock()
	}
	if !closedOK {
		for _, o := range objs {
			if o.objClosed {
				return fmt.Errorf("object %q was closed (PDCobj_close): %w", o.objName, pdc.ErrClosed)
			}
		}
	}
	return fn(ctx, p, ts)
}

// TransferStart is PDCregion_transfer_start. With PDC_CONSISTENCY_POSIX it
// returns once the transfer is done.
func (l *Lib) TransferStart(id uint64) int {
	return l.runLazy(func() string { return fmt.Sprintf("PDCregion_transfer_start(%d)", id) }, func() error {
		return l.transfersStart([]uint64{id})
	})
}

// MaxTransfers bounds the size of start_all and wait_all: a larger one is
// more likely a wrong argument than an array the caller has.
const MaxTransfers = 1 << 24

// TransferStartAll is PDCregion_transfer_start_all: the n transfers at ids
// (an array the caller owns, not kept) start together, one request per
// data server.
func (l *Lib) TransferStartAll(ids unsafe.Pointer, n int) int {
	hs, err := idArray(ids, n, MaxTransfers, "transfer_request_id", "size")
	return l.runLazy(func() string { return fmt.Sprintf("PDCregion_transfer_start_all(%s, %d)", fmtHandles(ids, hs), n) }, func() error {
		if err != nil {
			return err
		}
		return l.transfersStart(hs)
	})
}

func (l *Lib) transfersStart(ids []uint64) error {
	return l.transfersDo(ids, false, func(ctx context.Context, p *conn, ts []*client.Transfer) error {
		return p.c.StartAll(ctx, ts)
	})
}

// TransferWait is PDCregion_transfer_wait: it returns once the transfer
// is done (a read's data in the buffer).
func (l *Lib) TransferWait(id uint64) int {
	return l.runLazy(func() string { return fmt.Sprintf("PDCregion_transfer_wait(%d)", id) }, func() error {
		return l.transfersWait([]uint64{id})
	})
}

// TransferWaitAll is PDCregion_transfer_wait_all, over ids as
// TransferStartAll.
func (l *Lib) TransferWaitAll(ids unsafe.Pointer, n int) int {
	hs, err := idArray(ids, n, MaxTransfers, "transfer_request_id", "size")
	return l.runLazy(func() string { return fmt.Sprintf("PDCregion_transfer_wait_all(%s, %d)", fmtHandles(ids, hs), n) }, func() error {
		if err != nil {
			return err
		}
		return l.transfersWait(hs)
	})
}

func (l *Lib) transfersWait(ids []uint64) error {
	return l.transfersDo(ids, true, func(ctx context.Context, p *conn, ts []*client.Transfer) error {
		return p.c.WaitAll(ctx, ts)
	})
}

// Transfer states (pdc_transfer_status_t).
const (
	TransferComplete = int(client.TransferComplete)
	TransferPending  = int(client.TransferPending)
	TransferNotFound = int(client.TransferNotFound)
)

// TransferStatus is PDCregion_transfer_status: COMPLETE once, when the
// transfer is done, then NOT_FOUND; PENDING while under way; NOT_FOUND for
// one never started.
func (l *Lib) TransferStatus(id uint64) (int, int) {
	status := TransferNotFound
	rc := l.runLazy(func() string { return fmt.Sprintf("PDCregion_transfer_status(%d)", id) }, func() error {
		return l.transfersDo([]uint64{id}, true, func(ctx context.Context, p *conn, ts []*client.Transfer) error {
			s, err := ts[0].Status(ctx)
			status = int(s)
			return err
		})
	})
	return status, rc
}

// TransferClose is PDCregion_transfer_close: it waits for the transfer if
// it was started and not waited, and releases it (and the buffer).
func (l *Lib) TransferClose(id uint64) int {
	return l.runLazy(func() string { return fmt.Sprintf("PDCregion_transfer_close(%d)", id) }, func() error {
		if _, err := l.get(id, kindTransfer); err != nil {
			return err
		}
		var closed bool
		err := l.transfersDo([]uint64{id}, true, func(ctx context.Context, p *conn, ts []*client.Transfer) error {
			err := ts[0].Close(ctx)
			closed = ts[0].Closed()
			return err
		})
		if !closed {
			// Timed out with the transfer on its way, or before the calls
			// ahead on its object let this one start: buf may still be in
			// use, and the handle stays for another close.
			return err
		}
		l.mu.Lock()
		delete(l.mu.handles, id)
		l.mu.Unlock()
		return err
	})
}
