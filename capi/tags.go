package capi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/region"
)

// Tags of containers and objects: PDCcont_ and PDCobj_put_tag, _get_tag
// and _del_tag share one implementation over the client's tag methods.

// tagged is what containers and objects have in common here.
type tagged interface {
	PutTag(ctx context.Context, name string, v client.TagValue) error
	GetTag(ctx context.Context, name string) (client.TagValue, error)
	DeleteTag(ctx context.Context, name string) error
}

// tagsOf runs fn on the tags of handle id (a container or an object);
// exists says whether the target is still there.
type tagsOf func(id uint64, fn func(ctx context.Context, t tagged, exists func(context.Context) error) error) error

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
	if err := limits.Name("tag", name, limits.MaxTagName); err != nil {
		return nil, err
	}
	if t := region.Type(typ); limits.FixedWidth(t) && size != 0 && size != uint64(t.Size()) {
		return nil, fmt.Errorf("a %s tag value is %d bytes, size says %d: %w", t, t.Size(), size, pdc.ErrInvalid)
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

func (l *Lib) putTag(call string, id uint64, name string, value unsafe.Pointer, typ int, size uint64, of tagsOf) int {
	return l.runLazy(func() string { return fmt.Sprintf("%s(%d, %q, type %d, %d bytes)", call, id, name, typ, size) }, func() error {
		b, err := checkTagValue(name, value, typ, size)
		if err != nil {
			return err
		}
		return of(id, func(ctx context.Context, t tagged, _ func(context.Context) error) error {
			return t.PutTag(ctx, name, client.Typed(region.Type(typ), b))
		})
	})
}

// getTag: a tag not set (never, or deleted) is success with Found false;
// a target that is gone is an error.
func (l *Lib) getTag(call string, id uint64, name string, of tagsOf) (Tag, int) {
	var tag Tag
	rc := l.runLazy(func() string { return fmt.Sprintf("%s(%d, %q)", call, id, name) }, func() error {
		if err := checkTag(name); err != nil {
			return err
		}
		return of(id, func(ctx context.Context, t tagged, exists func(context.Context) error) error {
			v, err := t.GetTag(ctx, name)
			if errors.Is(err, pdc.ErrNotFound) {
				// The tag, or its target, is gone: only the first is a
				// success.
				if err := exists(ctx); err != nil {
					return err
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

func (l *Lib) delTag(call string, id uint64, name string, of tagsOf) int {
	return l.runLazy(func() string { return fmt.Sprintf("%s(%d, %q)", call, id, name) }, func() error {
		if err := checkTag(name); err != nil {
			return err
		}
		return of(id, func(ctx context.Context, t tagged, exists func(context.Context) error) error {
			err := t.DeleteTag(ctx, name)
			if errors.Is(err, pdc.ErrNotFound) && exists(ctx) == nil {
				// PDC deletes a tag that is not set without a word, and
				// programs written for it clean up that way.
				return nil
			}
			return err
		})
	})
}

// ObjPutTag is PDCobj_put_tag, as ContPutTag.
func (l *Lib) ObjPutTag(id uint64, name string, value unsafe.Pointer, typ int, size uint64) int {
	return l.putTag("PDCobj_put_tag", id, name, value, typ, size, l.objTags)
}

// ObjGetTag is PDCobj_get_tag, as ContGetTag.
func (l *Lib) ObjGetTag(id uint64, name string) (Tag, int) {
	return l.getTag("PDCobj_get_tag", id, name, l.objTags)
}

// ObjDelTag is PDCobj_del_tag, as ContDelTag.
func (l *Lib) ObjDelTag(id uint64, name string) int {
	return l.delTag("PDCobj_del_tag", id, name, l.objTags)
}

// ObjTagNames is pdc_obj_tag_names: the names of the object's tags,
// sorted.
func (l *Lib) ObjTagNames(id uint64) ([]string, int) {
	var names []string
	rc := l.run(fmt.Sprintf("pdc_obj_tag_names(%d)", id), func() error {
		return l.objDo(id, func(ctx context.Context, h *handle) (err error) {
			names, err = h.obj.Tags(ctx)
			return err
		})
	})
	return names, rc
}

func (l *Lib) objTags(id uint64, fn func(ctx context.Context, t tagged, exists func(context.Context) error) error) error {
	return l.objDo(id, func(ctx context.Context, h *handle) error {
		return fn(ctx, h.obj, func(ctx context.Context) error {
			_, err := h.obj.Refresh(ctx)
			return err
		})
	})
}

// ObjOpenMetaID is pdc_obj_open_by_meta_id (pdc_mpi.h): it opens the
// object whose id on the servers is metaID, which must be in the
// container contID (created in it, or added to it with
// PDCcont_put_objids), through the container's connection. propID, if
// not 0, is the property the object was created with:
// PDCobj_buf_retrieve then returns its buffer, as on the creating rank.
func (l *Lib) ObjOpenMetaID(contID, metaID, propID uint64) uint64 {
	return l.runID(fmt.Sprintf("pdc_obj_open_by_meta_id(cont %d, %d, prop %d)", contID, metaID, propID), func() (uint64, error) {
		return l.objOpenMetaID(contID, metaID, propID, true)
	})
}

// ObjOpenCreated is pdc_obj_open_created (pdc_mpi.h), what
// PDCobj_create_mpi's other ranks call: ObjOpenMetaID of the object
// another rank created, with contID naming only the connection. PDC
// does not look at the container the other ranks pass, and programs
// written for it pass each rank's own (PDC's create_obj_coll and
// read_write_col_perf name it "c" and the rank), so the object may be in
// any container.
func (l *Lib) ObjOpenCreated(contID, metaID, propID uint64) uint64 {
	return l.runID(fmt.Sprintf("pdc_obj_open_created(cont %d, %d, prop %d)", contID, metaID, propID), func() (uint64, error) {
		return l.objOpenMetaID(contID, metaID, propID, false)
	})
}

func (l *Lib) objOpenMetaID(contID, metaID, propID uint64, inCont bool) (uint64, error) {
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
	var id uint64
	err := l.contDo(contID, func(ctx context.Context, ch *handle) error {
		o, err := ch.conn.c.OpenObjectID(ctx, metaID)
		if err != nil {
			return err
		}
		if got := o.Info().ContainerID; inCont && got != ch.cont.ID() {
			// Not its home; it may have been added (PDCcont_put_objids).
			in, err := ch.cont.Contains(ctx, metaID)
			if err == nil && !in {
				err = fmt.Errorf("object %d (%q) is in container %d, not in %q (%d), neither created in it nor added to it: %w",
					metaID, o.Name(), got, ch.cont.Name(), ch.cont.ID(), pdc.ErrInvalid)
			}
			if err != nil {
				_ = o.Close(ctx)
				return err
			}
		}
		id, err = l.addObj(ctx, ch.conn, o, buf)
		return err
	})
	return id, err
}
