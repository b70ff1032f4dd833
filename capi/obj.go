package capi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/region"
)

// objState is the part of a handle for object properties, objects,
// regions and region transfers.
type objState struct {
	// kindObjProp: the properties objects are created with; guarded by
	// Lib.mu. kindObj: buf is the property's buffer at create (read only).
	props client.ObjectProps
	buf   unsafe.Pointer // PDCprop_set_obj_buf: the caller's memory, never read here

	// kindObj: the object; closed once PDCobj_close began. Guarded by
	// the handle's lock (handle.sem), which also serializes the object's
	// transfers: a client.Object and its Transfers are not safe for
	// concurrent use. objName and metaID are the object's name and id on
	// the servers, copied at open (read only): read without the lock.
	obj       *client.Object
	objClosed bool
	objName   string
	metaID    uint64
	// kindObj: buffers mapped to the object and locks held on it
	// (bufmap.go), by the remote region's id; guarded by handle.sem.
	bufMaps  map[uint64]*bufMap
	regLocks map[uint64]int

	// kindRegion: the box (read only).
	box region.Box

	// kindTransfer: the transfer and the handle of its object, whose lock
	// guards it.
	xfer    *client.Transfer
	xferObj *handle
}

// objPropCreate makes an object property for connection p: no dims yet,
// no type yet (PDC_UNKNOWN), region-static partition, default
// (eventual) consistency.
func (l *Lib) objPropCreate(p *conn) (uint64, error) {
	return l.add(&handle{kind: kindObjProp, conn: p, objState: objState{props: client.ObjectProps{
		Type: region.Unknown, Partition: client.RegionStatic, Consistency: client.ConsistencyDefault}}})
}

// PropObjDup is PDCprop_obj_dup: a new object property with the same
// settings.
func (l *Lib) PropObjDup(id uint64) uint64 {
	return l.runID(fmt.Sprintf("PDCprop_obj_dup(%d)", id), func() (uint64, error) {
		l.mu.Lock()
		h, err := l.lookupLocked(id, kindObjProp)
		var st objState
		if err == nil {
			st = objState{props: h.props.Clone(), buf: h.buf}
		}
		l.mu.Unlock()
		if err != nil {
			return 0, err
		}
		return l.add(&handle{kind: kindObjProp, conn: h.conn, objState: st})
	})
}

// propSet runs set on the object property id under Lib.mu.
func (l *Lib) propSet(call string, id uint64, set func(p *client.ObjectProps, h *handle) error) int {
	return l.run(call, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		h, err := l.lookupLocked(id, kindObjProp)
		if err != nil {
			return err
		}
		return set(&h.props, h)
	})
}

// checkDims checks dims from C: 1 to region.MaxDims of them, none 0; only
// the first may be PDC_SIZE_UNLIMITED.
func checkDims(dims []uint64) error {
	if len(dims) == 0 || len(dims) > region.MaxDims {
		return fmt.Errorf("ndim %d: want 1 to %d dims: %w", len(dims), region.MaxDims, pdc.ErrInvalid)
	}
	for i, d := range dims {
		if d == 0 {
			return fmt.Errorf("dims %v: dim %d is 0: %w", dims, i, pdc.ErrInvalid)
		}
		if d == client.Unlimited && i > 0 {
			return fmt.Errorf("dims %v: dim %d is PDC_SIZE_UNLIMITED; only the first may be: %w", dims, i, pdc.ErrInvalid)
		}
	}
	return nil
}

// PropSetObjDims is PDCprop_set_obj_dims; dims is nil for a NULL pointer.
func (l *Lib) PropSetObjDims(id uint64, ndim int, dims []uint64) int {
	return l.propSet(fmt.Sprintf("PDCprop_set_obj_dims(%d, %d, %s)", id, ndim, fmtDims(dims)), id, func(p *client.ObjectProps, _ *handle) error {
		if dims == nil {
			return fmt.Errorf("dims is NULL or ndim %d is not 1 to %d: %w", ndim, region.MaxDims, pdc.ErrInvalid)
		}
		if err := checkDims(dims); err != nil {
			return err
		}
		p.Dims = append([]uint64(nil), dims...)
		return nil
	})
}

func fmtDims(dims []uint64) string {
	if dims == nil {
		return "NULL"
	}
	return fmt.Sprint(dims)
}

// PropSetObjType is PDCprop_set_obj_type.
func (l *Lib) PropSetObjType(id uint64, typ int) int {
	return l.propSet(fmt.Sprintf("PDCprop_set_obj_type(%d, %d)", id, typ), id, func(p *client.ObjectProps, _ *handle) error {
		if !region.Type(typ).Valid() {
			return fmt.Errorf("unknown pdc_var_type_t %d: want PDC_INT (0) to PDC_SIZE_T (%d): %w", typ, int(region.SizeT), pdc.ErrInvalid)
		}
		p.Type = region.Type(typ)
		return nil
	})
}

// PropSetObjTransferRegionType is PDCprop_set_obj_transfer_region_type.
func (l *Lib) PropSetObjTransferRegionType(id uint64, part int) int {
	return l.propSet(fmt.Sprintf("PDCprop_set_obj_transfer_region_type(%d, %d)", id, part), id, func(p *client.ObjectProps, _ *handle) error {
		if part < int(client.ObjectStatic) || part > int(client.RegionLocal) {
			return fmt.Errorf("unknown pdc_region_partition_t %d: want PDC_OBJ_STATIC (0) to PDC_REGION_LOCAL (3): %w", part, pdc.ErrInvalid)
		}
		p.Partition = client.Partition(part)
		return nil
	})
}

// PropSetObjConsistency is PDCprop_set_obj_consistency_semantics.
func (l *Lib) PropSetObjConsistency(id uint64, c int) int {
	return l.propSet(fmt.Sprintf("PDCprop_set_obj_consistency_semantics(%d, %d)", id, c), id, func(p *client.ObjectProps, _ *handle) error {
		if c < int(client.ConsistencyDefault) || c > int(client.ConsistencyEventual) {
			return fmt.Errorf("unknown pdc_consistency_t %d: want PDC_CONSISTENCY_DEFAULT (0) to _EVENTUAL (4): %w", c, pdc.ErrInvalid)
		}
		p.Consistency = client.Consistency(c)
		return nil
	})
}

// PropSetObjAppName is PDCprop_set_obj_app_name ("" for NULL).
func (l *Lib) PropSetObjAppName(id uint64, name string) int {
	return l.propSet(fmt.Sprintf("PDCprop_set_obj_app_name(%d, %q)", id, name), id, func(p *client.ObjectProps, _ *handle) error {
		p.AppName = name
		return nil
	})
}

// PropSetObjTimeStep is PDCprop_set_obj_time_step.
func (l *Lib) PropSetObjTimeStep(id uint64, step uint32) int {
	return l.propSet(fmt.Sprintf("PDCprop_set_obj_time_step(%d, %d)", id, step), id, func(p *client.ObjectProps, _ *handle) error {
		p.TimeStep = step
		return nil
	})
}

// PropSetObjUserID is PDCprop_set_obj_user_id.
func (l *Lib) PropSetObjUserID(id uint64, user uint32) int {
	return l.propSet(fmt.Sprintf("PDCprop_set_obj_user_id(%d, %d)", id, user), id, func(p *client.ObjectProps, _ *handle) error {
		p.UserID = user
		return nil
	})
}

// PropSetObjDataLoc is PDCprop_set_obj_data_loc ("" for NULL).
func (l *Lib) PropSetObjDataLoc(id uint64, loc string) int {
	return l.propSet(fmt.Sprintf("PDCprop_set_obj_data_loc(%d, %q)", id, loc), id, func(p *client.ObjectProps, _ *handle) error {
		p.DataLoc = loc
		return nil
	})
}

// PropSetObjTags is PDCprop_set_obj_tags ("" for NULL).
func (l *Lib) PropSetObjTags(id uint64, tags string) int {
	return l.propSet(fmt.Sprintf("PDCprop_set_obj_tags(%d, %q)", id, tags), id, func(p *client.ObjectProps, _ *handle) error {
		p.Tags = tags
		return nil
	})
}

// PropSetObjBuf is PDCprop_set_obj_buf: objects created with the
// property hand buf back from PDCobj_buf_retrieve. It is only kept, never
// read or written.
func (l *Lib) PropSetObjBuf(id uint64, buf unsafe.Pointer) int {
	return l.propSet(fmt.Sprintf("PDCprop_set_obj_buf(%d, %p)", id, buf), id, func(_ *client.ObjectProps, h *handle) error {
		h.buf = buf
		return nil
	})
}

// ObjProp is what PDCobj_prop_get_info returns.
type ObjProp struct {
	PropID      uint64
	Dims        []uint64
	Type        int
	Partition   int
	Consistency int
}

// ObjPropGetInfo is PDCobj_prop_get_info.
func (l *Lib) ObjPropGetInfo(id uint64) (ObjProp, int) {
	var out ObjProp
	rc := l.run(fmt.Sprintf("PDCobj_prop_get_info(%d)", id), func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		h, err := l.lookupLocked(id, kindObjProp)
		if err != nil {
			return err
		}
		out = ObjProp{PropID: id, Dims: append([]uint64(nil), h.props.Dims...), Type: int(h.props.Type),
			Partition: int(h.props.Partition), Consistency: int(h.props.Consistency)}
		return nil
	})
	return out, rc
}

// checkObjName refuses a NULL or empty object name.
func checkObjName(name string) error {
	if name == "" {
		return fmt.Errorf("no object name (NULL or empty): %w", pdc.ErrInvalid)
	}
	return nil
}

// ObjCreate is PDCobj_create: it creates the object in the container with
// the property's settings. An object of the same name, time step, user id
// and app name fails, and creates nothing.
func (l *Lib) ObjCreate(contID uint64, name string, propID uint64) uint64 {
	return l.runID(fmt.Sprintf("PDCobj_create(cont %d, %q, prop %d)", contID, name, propID), func() (uint64, error) {
		return l.objCreate(contID, name, propID)
	})
}

func (l *Lib) objCreate(contID uint64, name string, propID uint64) (uint64, error) {
	if err := checkObjName(name); err != nil {
		return 0, err
	}
	if err := limits.Name("object", name, limits.MaxName); err != nil {
		return 0, err
	}
	l.mu.Lock()
	prop, err := l.lookupLocked(propID, kindObjProp)
	var props client.ObjectProps
	var buf unsafe.Pointer
	if err == nil {
		props, buf = prop.props.Clone(), prop.buf
	}
	l.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if len(props.Dims) > 0 && !props.Type.Valid() {
		return 0, fmt.Errorf("property %d has dims but no element type: call PDCprop_set_obj_type first: %w", propID, pdc.ErrInvalid)
	}
	// A property that never had dims makes a shapeless object, as in PDC.
	if err := limits.Shape(fmt.Sprintf("object %q", name), props.Dims, props.Type); err != nil {
		return 0, err
	}
	var id uint64
	err = l.contDo(contID, func(ctx context.Context, ch *handle) error {
		if ch.conn != prop.conn {
			return fmt.Errorf("container %d and property %d belong to different connections (PDCinit): %w", contID, propID, pdc.ErrInvalid)
		}
		o, err := ch.cont.CreateObject(ctx, name, props)
		if err != nil {
			return err
		}
		id, err = l.addObj(ctx, prop.conn, o, buf)
		return err
	})
	return id, err
}

// addObj registers an open object; if that fails (the connection closed
// meanwhile) it closes the object, within ctx.
func (l *Lib) addObj(ctx context.Context, p *conn, o *client.Object, buf unsafe.Pointer) (uint64, error) {
	id, err := l.add(&handle{kind: kindObj, conn: p, objState: objState{obj: o, buf: buf, objName: o.Name(), metaID: o.ID()}})
	if err != nil {
		_ = o.Close(ctx)
	}
	return id, err
}

// ObjOpen is PDCobj_open: it opens the object of that name (time step 0)
// from any process.
func (l *Lib) ObjOpen(name string, pdcID uint64) uint64 {
	return l.runID(fmt.Sprintf("PDCobj_open(%q, pdc %d)", name, pdcID), func() (uint64, error) {
		return l.objOpen(name, pdcID)
	})
}

// ObjOpenCol is PDCobj_open_col: opening needs no coordination, so it is
// ObjOpen.
func (l *Lib) ObjOpenCol(name string, pdcID uint64) uint64 {
	return l.runID(fmt.Sprintf("PDCobj_open_col(%q, pdc %d)", name, pdcID), func() (uint64, error) {
		return l.objOpen(name, pdcID)
	})
}

func (l *Lib) objOpen(name string, pdcID uint64) (uint64, error) {
	if err := checkObjName(name); err != nil {
		return 0, err
	}
	h, err := l.get(pdcID, kindConn)
	if err != nil {
		return 0, err
	}
	ctx, cancel := h.conn.ctx()
	defer cancel()
	o, err := h.conn.c.OpenObject(ctx, name)
	if err != nil {
		return 0, err
	}
	return l.addObj(ctx, h.conn, o, nil)
}

// objDo runs fn on the open object id, one call per object at a time: a
// client.Object and its transfers are not safe for concurrent use. fn gets
// the call's context: its connection's timeout, started before the wait
// for the object.
func (l *Lib) objDo(id uint64, fn func(ctx context.Context, h *handle) error) error {
	h, err := l.get(id, kindObj)
	if err != nil {
		return err
	}
	ctx, cancel := h.conn.ctx()
	defer cancel()
	return objLocked(ctx, h, fn)
}

// objLocked runs fn on the object handle h under its lock, within ctx: for
// a call that has its deadline already. A handle closed meanwhile fails.
func objLocked(ctx context.Context, h *handle, fn func(ctx context.Context, h *handle) error) error {
	if err := h.lock(ctx, h.objWhat); err != nil {
		return err
	}
	defer h.unlock()
	if h.objClosed {
		return fmt.Errorf("%d is a closed handle: %w", h.id, pdc.ErrClosed)
	}
	return fn(ctx, h)
}

// objWhat names the object handle h in a report.
func (h *handle) objWhat() string { return fmt.Sprintf("object %d (%q)", h.id, h.objName) }

// ObjClose is PDCobj_close: it waits for the object's transfers that were
// started and not waited, flushes what they wrote, and releases the
// handle. Its transfers stay open until PDCregion_transfer_close; they can
// no longer be started.
//
// Given a region id it closes the region, as PDC's does (its PDCobj_close
// drops a reference to any id): PDC's VPIC-IO and BD-CATS programs close
// their regions that way.
func (l *Lib) ObjClose(id uint64) int {
	return l.run(fmt.Sprintf("PDCobj_close(%d)", id), func() error {
		if l.closeRegion(id) {
			return nil
		}
		// The handle goes once this call holds the object: a close that
		// gives up waiting for the calls ahead leaves it open.
		return l.objDo(id, func(ctx context.Context, h *handle) error {
			l.mu.Lock()
			delete(l.mu.handles, id)
			l.mu.Unlock()
			h.objClosed = true
			return h.obj.Close(ctx)
		})
	})
}

// ObjDel is PDCobj_del: it deletes the object, its tags and its data. The
// handle stays open until PDCobj_close.
func (l *Lib) ObjDel(id uint64) int {
	return l.run(fmt.Sprintf("PDCobj_del(%d)", id), func() error {
		return l.objDo(id, func(ctx context.Context, h *handle) error {
			return h.obj.Delete(ctx)
		})
	})
}

// ObjInfo is what PDCobj_get_info returns.
type ObjInfo struct {
	Name       string
	MetaID     uint64
	LocalID    uint64
	MetaServer int // server_id: the rank that holds its metadata
	// PDCMetaServer is metadata_server_id as PDC computes it (PDCServer),
	// which programs written for PDC print or check.
	PDCMetaServer uint32
	Prop          ObjProp
}

// PDCServer is the metadata server PDC places an object on: the djb2
// hash of its name plus its time step, modulo the number of servers
// (PDC_get_hash_by_name in PDC's client). PDC hashes the name's bytes as
// signed chars, as C's char is on x86.
func PDCServer(name string, timeStep uint32, servers int) uint32 {
	if servers <= 0 {
		return 0
	}
	h := uint32(5381)
	for i := 0; i < len(name); i++ {
		h = h*33 + uint32(int32(int8(name[i])))
	}
	return (h + timeStep) % uint32(servers)
}

// ObjGetInfo is PDCobj_get_info: the object's metadata as its server has
// it now (dims another process set are seen).
func (l *Lib) ObjGetInfo(id uint64) (ObjInfo, int) {
	var out ObjInfo
	rc := l.run(fmt.Sprintf("PDCobj_get_info(%d)", id), func() error {
		return l.objDo(id, func(ctx context.Context, h *handle) error {
			info, err := h.obj.Refresh(ctx)
			if err != nil {
				return err
			}
			p := info.Props
			out = ObjInfo{Name: info.Name, MetaID: info.ID, LocalID: id, MetaServer: info.Server,
				PDCMetaServer: PDCServer(info.Name, p.TimeStep, len(h.conn.c.Servers())),
				Prop:          ObjProp{Dims: append([]uint64(nil), p.Dims...), Type: int(p.Type), Partition: int(p.Partition), Consistency: int(p.Consistency)}}
			return nil
		})
	})
	return out, rc
}

// ObjSetDims is PDCobj_set_dims: the object grows or shrinks; elements
// inside the new dims keep their values. dims is nil for NULL.
func (l *Lib) ObjSetDims(id uint64, ndim int, dims []uint64) int {
	return l.run(fmt.Sprintf("PDCobj_set_dims(%d, %d, %s)", id, ndim, fmtDims(dims)), func() error {
		if dims == nil {
			return fmt.Errorf("dims is NULL or ndim %d is not 1 to %d: %w", ndim, region.MaxDims, pdc.ErrInvalid)
		}
		if err := checkDims(dims); err != nil {
			return err
		}
		return l.objDo(id, func(ctx context.Context, h *handle) error {
			return h.obj.SetDims(ctx, append([]uint64(nil), dims...))
		})
	})
}

// ObjGetDims is PDCobj_get_dims: the object's dims as its server has them
// now.
func (l *Lib) ObjGetDims(id uint64) ([]uint64, int) {
	var dims []uint64
	rc := l.run(fmt.Sprintf("PDCobj_get_dims(%d)", id), func() error {
		return l.objDo(id, func(ctx context.Context, h *handle) error {
			d, err := h.obj.Dims(ctx)
			dims = append([]uint64(nil), d...)
			return err
		})
	})
	return dims, rc
}

// ObjFlushStart is PDCobj_flush_start: it waits for the object's
// transfers under way and makes what they wrote durable on the data
// servers. It returns once that is done.
func (l *Lib) ObjFlushStart(id uint64) int {
	return l.run(fmt.Sprintf("PDCobj_flush_start(%d)", id), func() error {
		return l.objDo(id, func(ctx context.Context, h *handle) error {
			return h.obj.Flush(ctx)
		})
	})
}

// ObjFlushAllStart is PDCobj_flush_all_start: ObjFlushStart for every open
// object of every connection.
func (l *Lib) ObjFlushAllStart() int {
	return l.run("PDCobj_flush_all_start()", func() error {
		l.mu.Lock()
		var objs []*handle
		for _, h := range l.mu.handles {
			if h.kind == kindObj {
				objs = append(objs, h)
			}
		}
		l.mu.Unlock()
		slices.SortFunc(objs, func(a, b *handle) int { return cmp.Compare(a.id, b.id) })
		// One deadline for the call: every object's wait and flush count
		// from the call's start (each connection's timeout, from then).
		ctxs := map[*conn]context.Context{}
		for _, h := range objs {
			if ctxs[h.conn] == nil {
				ctx, cancel := h.conn.ctx()
				defer cancel()
				ctxs[h.conn] = ctx
			}
		}
		var errs []error
		for _, h := range objs {
			err := objLocked(ctxs[h.conn], h, func(ctx context.Context, h *handle) error {
				return h.obj.Flush(ctx)
			})
			if err != nil && !errors.Is(err, pdc.ErrClosed) {
				errs = append(errs, fmt.Errorf("object %d: %w", h.id, err))
			}
		}
		return errors.Join(errs...)
	})
}

// ObjBufRetrieve is PDCobj_buf_retrieve: the buffer PDCprop_set_obj_buf
// gave the property the object was created with (nil if none).
func (l *Lib) ObjBufRetrieve(id uint64) (unsafe.Pointer, int) {
	var buf unsafe.Pointer
	rc := l.run(fmt.Sprintf("PDCobj_buf_retrieve(%d)", id), func() error {
		return l.objDo(id, func(_ context.Context, h *handle) error {
			buf = h.buf
			return nil
		})
	})
	return buf, rc
}

// ObjPutData is PDCobj_put_data: it creates a 1-D object of size bytes
// (PDC_CHAR) named name in the container and writes data to it. Returns the
// open object's handle.
func (l *Lib) ObjPutData(name string, data unsafe.Pointer, size uint64, contID uint64) uint64 {
	return l.runID(fmt.Sprintf("PDCobj_put_data(%q, %d bytes, cont %d)", name, size, contID), func() (uint64, error) {
		if err := checkObjName(name); err != nil {
			return 0, err
		}
		if err := limits.Name("object", name, limits.MaxName); err != nil {
			return 0, err
		}
		if data == nil || size == 0 {
			return 0, fmt.Errorf("no data (NULL or size 0): %w", pdc.ErrInvalid)
		}
		if size > maxBuffer {
			return 0, fmt.Errorf("size %d is over the limit of %d bytes: %w", size, uint64(maxBuffer), pdc.ErrTooLarge)
		}
		var id uint64
		err := l.contDo(contID, func(ctx context.Context, ch *handle) error {
			o, err := ch.cont.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{size}, Type: region.Char,
				Partition: client.RegionStatic})
			if err != nil {
				return err
			}
			if err := o.PutData(ctx, unsafe.Slice((*byte)(data), size)); err != nil {
				// Leave nothing behind.
				return errors.Join(err, o.Delete(ctx))
			}
			id, err = l.addObj(ctx, ch.conn, o, nil)
			return err
		})
		return id, err
	})
}

// ObjGetData is PDCobj_get_data: it reads the first size bytes of the
// object, in row-major order, into data. size is a whole number of
// elements; an object of more than one dimension is read whole (size is
// its size in bytes).
func (l *Lib) ObjGetData(id uint64, data unsafe.Pointer, size uint64) int {
	return l.run(fmt.Sprintf("PDCobj_get_data(%d, %d bytes)", id, size), func() error {
		if data == nil || size == 0 {
			return fmt.Errorf("no buffer (NULL or size 0): %w", pdc.ErrInvalid)
		}
		if size > maxBuffer {
			return fmt.Errorf("size %d is over the limit of %d bytes: %w", size, uint64(maxBuffer), pdc.ErrTooLarge)
		}
		return l.objDo(id, func(ctx context.Context, h *handle) error {
			info := h.obj.Info()
			elem := uint64(max(info.Props.Type.Size(), 1))
			dims, err := h.obj.Dims(ctx)
			if err != nil {
				return err
			}
			if size%elem != 0 {
				return fmt.Errorf("object %q: %d bytes is not a whole number of %d-byte elements: %w", info.Name, size, elem, pdc.ErrInvalid)
			}
			box := region.Shape(size / elem)
			if len(dims) > 1 {
				box = region.Shape(dims...)
				if whole, ok := mulOK(box.Volume(), elem); !ok || whole != size {
					return fmt.Errorf("object %q has %d dims %v: get_data reads it whole, in %d bytes, not %d: %w",
						info.Name, len(dims), dims, whole, size, pdc.ErrInvalid)
				}
			}
			return h.obj.Read(ctx, box, unsafe.Slice((*byte)(data), size))
		})
	})
}

// maxBuffer bounds the size of a C buffer libpdc makes a slice of.
const maxBuffer = 1 << 48

func mulOK(a, b uint64) (uint64, bool) {
	if a != 0 && b > ^uint64(0)/a {
		return 0, false
	}
	return a * b, true
}
