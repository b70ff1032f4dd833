package capi

import (
	"bytes"
	"errors"
	"fmt"
	"unsafe"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// Object tags: PDCobj_put_tag, _get_tag and _del_tag, which behave as the
// container versions in cont.go do.

// checkTagValue checks a tag value from C before its bytes are copied
// (see maxTagValue) and returns the copy.
func checkTagValue(name string, value unsafe.Pointer, typ int, size uint64) ([]byte, error) {
	if err := checkTag(name); err != nil {
		return nil, err
	}
	if !region.Type(typ).Valid() {
		return nil, fmt.Errorf("unknown pdc_var_type_t %d: want PDC_INT (0) to PDC_SIZE_T (%d): %w", typ, int(region.SizeT), pdc.ErrInvalid)
	}
	if size > maxTagValue {
		return nil, fmt.Errorf("a tag value of %d bytes is over the limit of %d: %w", size, maxTagValue, pdc.ErrTooLarge)
	}
	if value == nil && size > 0 {
		return nil, fmt.Errorf("value is NULL but size is %d: %w", size, pdc.ErrInvalid)
	}
	var b []byte
	if size > 0 {
		b = bytes.Clone(unsafe.Slice((*byte)(value), size))
	}
	return b, nil
}

// ObjPutTag is PDCobj_put_tag: value points to size bytes the caller
// owns, of type typ (pdc_var_type_t); they are copied before the call
// returns.
func (l *Lib) ObjPutTag(id uint64, name string, value unsafe.Pointer, typ int, size uint64) int {
	return l.run(fmt.Sprintf("PDCobj_put_tag(%d, %q, type %d, %d bytes)", id, name, typ, size), func() error {
		b, err := checkTagValue(name, value, typ, size)
		if err != nil {
			return err
		}
		return l.objDo(id, func(h *handle) error {
			ctx, cancel := h.conn.ctx()
			defer cancel()
			return h.obj.PutTag(ctx, name, client.Typed(region.Type(typ), b))
		})
	})
}

// ObjGetTag is PDCobj_get_tag: a tag not set (never, or deleted) is
// success with Found false; an object that is gone is an error.
func (l *Lib) ObjGetTag(id uint64, name string) (Tag, int) {
	var tag Tag
	rc := l.run(fmt.Sprintf("PDCobj_get_tag(%d, %q)", id, name), func() error {
		if err := checkTag(name); err != nil {
			return err
		}
		return l.objDo(id, func(h *handle) error {
			ctx, cancel := h.conn.ctx()
			defer cancel()
			v, err := h.obj.GetTag(ctx, name)
			if errors.Is(err, pdc.ErrNotFound) {
				// The tag, or the object itself, is gone: only the first
				// is a success.
				if _, oerr := h.obj.Refresh(ctx); oerr != nil {
					return oerr
				}
				tag = Tag{Type: int(region.Unknown)}
				return nil
			}
			if err != nil {
				return err
			}
			tag = Tag{Found: true, Type: int(v.Type), Value: v.Value}
			return nil
		})
	})
	return tag, rc
}

// ObjDelTag is PDCobj_del_tag. Deleting a tag that is not set fails,
// saying so.
func (l *Lib) ObjDelTag(id uint64, name string) int {
	return l.run(fmt.Sprintf("PDCobj_del_tag(%d, %q)", id, name), func() error {
		if err := checkTag(name); err != nil {
			return err
		}
		return l.objDo(id, func(h *handle) error {
			ctx, cancel := h.conn.ctx()
			defer cancel()
			return h.obj.DeleteTag(ctx, name)
		})
	})
}

// ObjOpenMetaID is pdc_obj_open_by_meta_id (pdc_mpi.h), what
// PDCobj_create_mpi's other ranks call: it opens the object whose id on
// the servers is metaID, which must be in the container contID, through
// the container's connection. propID, if not 0, is the property the
// object was created with: PDCobj_buf_retrieve then returns its buffer,
// as on the creating rank.
func (l *Lib) ObjOpenMetaID(contID, metaID, propID uint64) uint64 {
	return l.runID(fmt.Sprintf("pdc_obj_open_by_meta_id(cont %d, %d, prop %d)", contID, metaID, propID), func() (uint64, error) {
		if metaID == 0 {
			return 0, fmt.Errorf("meta id 0 names no object: %w", pdc.ErrInvalid)
		}
		var buf unsafe.Pointer
		if propID != 0 {
			l.mu.Lock()
			prop, err := l.lookupLocked(propID, kindObjProp)
			if err == nil {
				buf = prop.buf
			}
			l.mu.Unlock()
			if err != nil {
				return 0, err
			}
		}
		var o *client.Object
		var p *conn
		err := l.contDo(contID, func(ch *handle) error {
			ctx, cancel := ch.conn.ctx()
			defer cancel()
			var err error
			if o, err = ch.conn.c.OpenObjectID(ctx, metaID); err != nil {
				return err
			}
			if got := o.Info().ContainerID; got != ch.cont.ID() {
				_ = o.Close(ctx)
				return fmt.Errorf("object %d (%q) is in container %d, not in %q (%d): %w", metaID, o.Name(), got, ch.cont.Name(), ch.cont.ID(), pdc.ErrInvalid)
			}
			p = ch.conn
			return nil
		})
		if err != nil {
			return 0, err
		}
		return l.addObj(p, o, buf)
	})
}
