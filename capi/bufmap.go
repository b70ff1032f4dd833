package capi

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// PDC's older I/O path (PDCbuf_obj_map, PDCreg_obtain_lock,
// PDCreg_release_lock, PDCbuf_obj_unmap), done with region transfers: a
// map records which part of a buffer goes with which part of an object,
// and releasing a lock on that part moves the data, as one region
// transfer (TransferNow's create, do, close) that returns once the data
// servers acknowledged it. The locks are the process's own bookkeeping:
// pdc's servers keep no region locks, and what a lock would order
// across processes (a reader sees a write once its release returned)
// region transfers already give, as each is acknowledged before release
// returns.

// bufMap is a buffer mapped to a part of an object (PDCbuf_obj_map).
type bufMap struct {
	buf    unsafe.Pointer // the caller's memory, used only inside release
	local  region.Box     // the part of buf, shaped as for a region transfer
	remote region.Box     // the part of the object
	reg    uint64         // the local region's id, for reports
}

// Lock modes (pdc_lock_mode_t).
const (
	LockBlock   = 0 // PDC_BLOCK
	LockNoBlock = 1 // PDC_NOBLOCK
)

// BufObjMap is PDCbuf_obj_map: buf's part localID (shaped as a region
// transfer's local region: buf spans its end in every dim) goes with
// object objID's part remoteID. Both hold as many elements, of typ,
// which must be as large as the object's elements; the remote part lies
// inside the object's dims. Nothing moves until PDCreg_release_lock.
func (l *Lib) BufObjMap(buf unsafe.Pointer, typ int, localID, objID, remoteID uint64) int {
	call := func() string {
		return fmt.Sprintf("PDCbuf_obj_map(%p, %s, local %d, obj %d, remote %d)", buf, mapTypeName(typ), localID, objID, remoteID)
	}
	return l.runLazy(call, func() error {
		if buf == nil {
			return fmt.Errorf("buf is NULL: %w", pdc.ErrInvalid)
		}
		t := region.Type(typ)
		if !t.Valid() {
			return fmt.Errorf("unknown pdc_var_type_t %d: want PDC_INT (0) to PDC_SIZE_T (%d): %w", typ, int(region.SizeT), pdc.ErrInvalid)
		}
		local, err := l.get(localID, kindRegion)
		if err != nil {
			return fmt.Errorf("local region: %w", err)
		}
		remote, err := l.get(remoteID, kindRegion)
		if err != nil {
			return fmt.Errorf("remote region: %w", err)
		}
		return l.objDo(objID, func(ctx context.Context, h *handle) error {
			if m, ok := h.bufMaps[remoteID]; ok {
				return fmt.Errorf("object %q: region %d %v is already mapped (to buffer %p, local region %d), and not unmapped (PDCbuf_obj_unmap): %w",
					h.objName, remoteID, m.remote, m.buf, m.reg, pdc.ErrExists)
			}
			if ot := h.obj.Info().Props.Type; ot.Valid() && ot.Size() != t.Size() {
				return fmt.Errorf("object %q holds %s (%d-byte elements), the buffer %s (%d-byte): %w",
					h.objName, ot, ot.Size(), t, t.Size(), pdc.ErrInvalid)
			}
			// The transfer release will make, made now only for its
			// checks: the regions' sizes, dims and the object's bounds.
			if _, err := newTransfer(ctx, h, buf, AccessWrite, local.box, remote.box); err != nil {
				return fmt.Errorf("local region %d, remote region %d: %w", localID, remoteID, err)
			}
			if h.bufMaps == nil {
				h.bufMaps = map[uint64]*bufMap{}
			}
			h.bufMaps[remoteID] = &bufMap{buf: buf, local: local.box.Clone(), remote: remote.box.Clone(), reg: localID}
			return nil
		})
	})
}

// BufObjUnmap is PDCbuf_obj_unmap: the map of the object's part regID
// ends. A lock held on the part stays held; its release then moves no
// data.
func (l *Lib) BufObjUnmap(objID, regID uint64) int {
	return l.run(fmt.Sprintf("PDCbuf_obj_unmap(obj %d, region %d)", objID, regID), func() error {
		return l.objDo(objID, func(ctx context.Context, h *handle) error {
			if _, ok := h.bufMaps[regID]; !ok {
				return fmt.Errorf("object %q: region %d is not mapped (PDCbuf_obj_map): %w", h.objName, regID, pdc.ErrNotFound)
			}
			delete(h.bufMaps, regID)
			return nil
		})
	})
}

// RegObtainLock is PDCreg_obtain_lock: the process holds a read or write
// lock on the object's part regID until PDCreg_release_lock. A part
// holds one lock at a time. Neither mode waits: no other holder is known
// (see above).
func (l *Lib) RegObtainLock(objID, regID uint64, access, mode int) int {
	call := func() string {
		return fmt.Sprintf("PDCreg_obtain_lock(obj %d, region %d, %s, %s)", objID, regID, accessName(access), lockModeName(mode))
	}
	return l.runLazy(call, func() error {
		if access != AccessRead && access != AccessWrite {
			return fmt.Errorf("access %d: want PDC_READ (1) or PDC_WRITE (2): %w", access, pdc.ErrInvalid)
		}
		if mode != LockBlock && mode != LockNoBlock {
			return fmt.Errorf("lock mode %d: want PDC_BLOCK (0) or PDC_NOBLOCK (1): %w", mode, pdc.ErrInvalid)
		}
		if _, err := l.get(regID, kindRegion); err != nil {
			return fmt.Errorf("region: %w", err)
		}
		return l.objDo(objID, func(ctx context.Context, h *handle) error {
			if a, ok := h.regLocks[regID]; ok {
				return fmt.Errorf("object %q: region %d is already locked for %s (PDCreg_release_lock first): %w",
					h.objName, regID, accessName(a), pdc.ErrExists)
			}
			if h.regLocks == nil {
				h.regLocks = map[uint64]int{}
			}
			h.regLocks[regID] = access
			return nil
		})
	})
}

// RegReleaseLock is PDCreg_release_lock. If the part is mapped, a write
// lock's release writes the buffer's part to the object, a read lock's
// reads the object's part into the buffer; either returns once the data
// is there (written data acknowledged by the data servers). The lock is
// released only if that succeeds: a failed release can be tried again.
func (l *Lib) RegReleaseLock(objID, regID uint64, access int) int {
	call := func() string {
		return fmt.Sprintf("PDCreg_release_lock(obj %d, region %d, %s)", objID, regID, accessName(access))
	}
	return l.runLazy(call, func() error {
		if access != AccessRead && access != AccessWrite {
			return fmt.Errorf("access %d: want PDC_READ (1) or PDC_WRITE (2): %w", access, pdc.ErrInvalid)
		}
		return l.objDo(objID, func(ctx context.Context, h *handle) error {
			held, ok := h.regLocks[regID]
			if !ok {
				return fmt.Errorf("object %q: region %d holds no lock (PDCreg_obtain_lock): %w", h.objName, regID, pdc.ErrNotFound)
			}
			if held != access {
				return fmt.Errorf("object %q: region %d is locked for %s, not %s: %w",
					h.objName, regID, accessName(held), accessName(access), pdc.ErrInvalid)
			}
			if m, ok := h.bufMaps[regID]; ok {
				t, err := newTransfer(ctx, h, m.buf, access, m.local, m.remote)
				if err != nil {
					return err
				}
				// Do returns with nothing holding buf, even when it fails:
				// the close only releases the transfer.
				err = t.Do(ctx)
				if cerr := t.Close(ctx); cerr != nil && err == nil {
					err = cerr
				}
				if err != nil {
					return fmt.Errorf("object %q: region %d %v, buffer %p: %w", h.objName, regID, m.remote, m.buf, err)
				}
			}
			delete(h.regLocks, regID)
			return nil
		})
	})
}

func lockModeName(m int) string {
	switch m {
	case LockBlock:
		return "PDC_BLOCK"
	case LockNoBlock:
		return "PDC_NOBLOCK"
	}
	return fmt.Sprint(m)
}

func mapTypeName(t int) string {
	if region.Type(t).Valid() {
		return region.Type(t).String()
	}
	return fmt.Sprintf("type %d", t)
}
