package capi

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
)

// Container membership by id: PDCcont_put_objids, _get_objids and
// _del_objids. put and del take object handles; get returns the objects'
// ids on the servers (meta ids, as PDCobj_get_info reports them), which
// pdc_obj_open_by_meta_id opens in any process.

// MaxObjIDs bounds nobj of put_objids and del_objids: a larger count is
// more likely a wrong argument than an array the caller has.
const MaxObjIDs = 1 << 24

// ContPutObjIDs is PDCcont_put_objids: the objects of the nobj handles at
// objs (an array the caller owns, not kept) become members of the
// container by reference, keeping their home container. Adding a member
// again is not an error. Every handle is checked before anything changes.
func (l *Lib) ContPutObjIDs(contID uint64, nobj int, objs unsafe.Pointer) int {
	return l.objIDs("PDCcont_put_objids", contID, nobj, objs, (*client.Container).AddObjects)
}

// ContDelObjIDs is PDCcont_del_objids: it removes memberships added by
// ContPutObjIDs. An object whose home is the container cannot be removed
// from it (delete the object instead); nor can one that is not a member.
// Either fails the call, which then changes nothing.
func (l *Lib) ContDelObjIDs(contID uint64, nobj int, objs unsafe.Pointer) int {
	return l.objIDs("PDCcont_del_objids", contID, nobj, objs, (*client.Container).RemoveObjects)
}

// objRef is an object handle of an objids call, resolved.
type objRef struct {
	handle, id uint64
	name       string
}

func (l *Lib) objIDs(name string, contID uint64, nobj int, objs unsafe.Pointer,
	change func(ct *client.Container, ctx context.Context, ids ...uint64) error) int {
	handles, err := idArray(objs, nobj, MaxObjIDs, "obj_ids", "nobj")
	return l.run(fmt.Sprintf("%s(cont %d, %d, %s)", name, contID, nobj, fmtHandles(objs, handles)), func() error {
		if err != nil {
			return err
		}
		ch, err := l.get(contID, kindCont)
		if err != nil {
			return err
		}
		refs := make([]objRef, len(handles))
		for i, hid := range handles {
			r, err := l.objRef(hid, ch.conn)
			if err != nil {
				return fmt.Errorf("obj_ids[%d]: %w", i, err)
			}
			refs[i] = r
		}
		ids := make([]uint64, len(refs))
		for i, r := range refs {
			ids[i] = r.id
		}
		return l.contDo(contID, func(ctx context.Context, h *handle) error {
			if err := change(h.cont, ctx, ids...); err != nil {
				return annotate(err, refs)
			}
			return nil
		})
	})
}

// objRef resolves the object handle hid, which must be open on the
// container's connection p. It reads what the handle copied at open, so it
// does not wait for calls on the object.
func (l *Lib) objRef(hid uint64, p *conn) (objRef, error) {
	h, err := l.get(hid, kindObj)
	if err != nil {
		return objRef{}, err
	}
	if h.conn != p {
		return objRef{}, fmt.Errorf("object %d and the container belong to different connections (PDCinit): %w", hid, pdc.ErrInvalid)
	}
	return objRef{handle: hid, id: h.metaID, name: h.objName}, nil
}

// annotate names the handles of the objects err mentions by id (a server
// knows the ids only), at most three.
func annotate(err error, refs []objRef) error {
	msg := err.Error()
	var notes []string
	seen := map[uint64]bool{}
	for _, r := range refs {
		if seen[r.id] || !strings.Contains(msg, fmt.Sprintf("object %d", r.id)) && !strings.Contains(msg, fmt.Sprintf("id %d)", r.id)) {
			continue
		}
		seen[r.id] = true
		notes = append(notes, fmt.Sprintf("object %d is handle %d (%q)", r.id, r.handle, r.name))
		if len(notes) == 3 {
			break
		}
	}
	if len(notes) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(notes, ", "))
}

// idArray copies the n handles at p, a C array the caller owns, after
// checking n: 0 to limit, and p not NULL unless n is 0 (nil then). array
// and count name the two arguments in the error.
func idArray(p unsafe.Pointer, n, limit int, array, count string) ([]uint64, error) {
	switch {
	case n < 0:
		return nil, fmt.Errorf("%s %d is negative: %w", count, n, pdc.ErrInvalid)
	case n > limit:
		return nil, fmt.Errorf("%s %d is over the limit of %d: %w", count, n, limit, pdc.ErrTooLarge)
	case p == nil && n > 0:
		return nil, fmt.Errorf("%s is NULL but %s is %d: %w", array, count, n, pdc.ErrInvalid)
	case n == 0:
		return nil, nil
	}
	return slices.Clone(unsafe.Slice((*uint64)(p), n)), nil
}

// fmtHandles formats the handles of a call for its report: NULL, the
// address of an array not read (its count was 0 or out of bounds), or the
// first few handles.
func fmtHandles(p unsafe.Pointer, hs []uint64) string {
	if p == nil {
		return "NULL"
	}
	if hs == nil {
		return fmt.Sprintf("%p", p)
	}
	const show = 8
	if len(hs) <= show {
		return fmt.Sprint(hs)
	}
	return strings.TrimSuffix(fmt.Sprint(hs[:show]), "]") + " ...]"
}

// ContGetObjIDs is PDCcont_get_objids: the ids on the servers (meta ids)
// of every object of the container, those whose home it is and those
// added to it, in increasing order. An empty container has none; a deleted
// one fails.
func (l *Lib) ContGetObjIDs(contID uint64) ([]uint64, int) {
	var ids []uint64
	rc := l.run(fmt.Sprintf("PDCcont_get_objids(cont %d)", contID), func() error {
		return l.contDo(contID, func(ctx context.Context, h *handle) error {
			// A deleted container lists no objects: say it is gone.
			if _, err := h.conn.c.OpenContainerID(ctx, h.cont.ID()); err != nil {
				return fmt.Errorf("container %q: %w", h.cont.Name(), err)
			}
			// Ids only, a page of thousands per server at a time, in
			// increasing order: the array is all this call holds.
			for id, err := range h.cont.ObjectIDs(ctx) {
				if err != nil {
					ids = nil
					return err
				}
				if len(ids) == math.MaxInt32 {
					ids = nil
					return fmt.Errorf("container %q has more than %d objects, more than the int nobj counts: %w", h.cont.Name(), math.MaxInt32, pdc.ErrTooLarge)
				}
				ids = append(ids, id)
			}
			return nil
		})
	})
	return ids, rc
}
