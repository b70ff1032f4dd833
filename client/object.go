package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/batch"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/transfer"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// Object is a handle to an open object. Close it when done.
type Object struct {
	c *Client
	// info is replaced whole (Refresh, SetDims).
	info atomic.Pointer[objectState]

	closeMu sync.Mutex
	closed  bool // guarded by closeMu: closed or deleted

	// x is the object as the transfer engine knows it, read by the
	// client's placer goroutine as well as the caller's.
	x transfer.Object
}

// objectState is an object's metadata as the API gives it and as the
// transfer engine needs it, in one allocation.
type objectState struct {
	info ObjectInfo
	meta transfer.Meta
}

func newObject(c *Client, info ObjectInfo) *Object {
	o := &Object{c: c}
	var e *transfer.Engine
	if c != nil {
		e = c.xfer
	}
	o.x.Init(e, (*objectSource)(o), nil)
	o.setInfo(info)
	return o
}

// meta is the object's metadata as last known; it must not be modified.
func (o *Object) meta() *ObjectInfo { return &o.info.Load().info }

func (o *Object) setInfo(info ObjectInfo) {
	st := &objectState{info: info, meta: transfer.Meta{ID: info.ID, Name: info.Name, Dims: info.Props.Dims,
		DimsVersion: info.DimsVersion, Elem: max(info.Props.Type.Size(), 1), Storage: uint32(info.Props.Storage),
		Partition: transfer.Partition(info.Props.Partition), POSIX: info.Props.Consistency == ConsistencyPOSIX,
		Server: info.Server, Spread: info.spread}}
	o.info.Store(st)
	o.x.SetMeta(&st.meta)
}

// objectSource is how the transfer engine looks an object up again
// (transfer.Source).
type objectSource Object

func (s *objectSource) Refresh(ctx context.Context) error {
	_, err := (*Object)(s).Refresh(ctx)
	return err
}

func (c *Client) objInfo(m *wire.ObjectMeta) ObjectInfo {
	rank, _ := c.ownerOfKey(placement.KeyOf(m.ID))
	return ObjectInfo{ID: m.ID, Name: m.Name, ContainerID: m.ContID, Props: propsFrom(&m.Props),
		Created: time.Unix(0, m.CreatedUnix), DimsVersion: m.DimsVersion, Server: rank,
		spread: placement.Spread{Home: m.Props.Home, Block: m.Props.Block, Over: m.Props.Spread}}
}

// ObjectSpec is one object to create.
type ObjectSpec struct {
	Name  string
	Props ObjectProps
}

// CreateObject creates an object in the container and opens it. An object
// with the same name, time step, user id and app name is pdc.ErrExists.
func (ct *Container) CreateObject(ctx context.Context, name string, props ObjectProps) (*Object, error) {
	objs, err := ct.CreateObjects(ctx, []ObjectSpec{{Name: name, Props: props}})
	if err != nil {
		return nil, err
	}
	return objs[0], nil
}

// CreateObjects creates many objects with one request per metadata server
// (per MaxBatch objects or 256 KiB of them). The result has one entry per spec, nil where
// that create failed; the error joins the failures, each naming its
// object. If a request fails as a whole (the connection is lost, ctx
// ends), the result is nil, though the servers may have created some of
// the objects: open them by name to find out which. A spec the servers
// would refuse (a name with control characters or not UTF-8, dims past
// 2^63 bytes, an unknown storage mode...) fails the whole call before
// any request: then nothing is created and the result is nil.
func (ct *Container) CreateObjects(ctx context.Context, specs []ObjectSpec) ([]*Object, error) {
	var bad []error
	for i := range specs {
		if err := checkSpec(&specs[i]); err != nil {
			bad = append(bad, err)
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("create objects: %w", errors.Join(bad...))
	}
	items := make([]wire.ObjCreate, len(specs))
	keys := make([]uint32, len(specs))
	for i, s := range specs {
		items[i] = wire.ObjCreate{ContID: ct.info.ID, Name: s.Name, Props: s.Props.wire()}
		keys[i] = placement.Key(s.Name, s.Props.TimeStep)
		ct.c.spreadNew(&items[i].Props, keys[i])
	}
	size := func(i int) int {
		p := &items[i].Props
		return len(items[i].Name) + len(p.AppName) + len(p.DataLoc) + len(p.Tags) + 10*len(p.Dims) + 48
	}
	res, err := ct.c.objectBatch(ctx, wire.MethodObjCreate, keys, size, func(idx []int) wire.ObjBatch {
		if len(idx) == len(items) {
			return wire.ObjBatch{Creates: items}
		}
		b := wire.ObjBatch{Creates: make([]wire.ObjCreate, len(idx))}
		for j, i := range idx {
			b.Creates[j] = items[i]
		}
		return b
	})
	// The server answers a create with the id and time only.
	for i := range res {
		if r := &res[i]; r.Code == wire.CodeOK {
			r.Meta.Name, r.Meta.ContID, r.Meta.Props = items[i].Name, items[i].ContID, items[i].Props
		}
	}
	return ct.c.objects(res, err, "create", func(i int) string { return specs[i].Name })
}

// OpenOption qualifies OpenObject.
type OpenOption func(*wire.ObjKey)

// AtTimeStep opens the object of a time step (default 0).
func AtTimeStep(ts uint32) OpenOption { return func(k *wire.ObjKey) { k.TimeStep = ts } }

// WithIdentity opens exactly the object of this user id and app name, for
// names shared by several users or apps.
func WithIdentity(userID uint32, appName string) OpenOption {
	return func(k *wire.ObjKey) { k.UserID, k.AppName, k.Exact = userID, appName, true }
}

// OpenObject opens an object by name, from any client in any process.
func (c *Client) OpenObject(ctx context.Context, name string, opts ...OpenOption) (*Object, error) {
	objs, err := c.OpenObjects(ctx, []string{name}, opts...)
	if err != nil {
		return nil, err
	}
	return objs[0], nil
}

// OpenObjects opens many objects with one request per metadata server; the
// result is as for CreateObjects.
func (c *Client) OpenObjects(ctx context.Context, names []string, opts ...OpenOption) ([]*Object, error) {
	items := make([]wire.ObjKey, len(names))
	keys := make([]uint32, len(names))
	for i, n := range names {
		items[i] = wire.ObjKey{Name: n}
		for _, o := range opts {
			o(&items[i])
		}
		keys[i] = placement.Key(n, items[i].TimeStep)
	}
	size := func(i int) int { return len(items[i].Name) + len(items[i].AppName) + 32 }
	res, err := c.objectBatch(ctx, wire.MethodObjOpen, keys, size, func(idx []int) wire.ObjBatch {
		if len(idx) == len(items) {
			return wire.ObjBatch{Opens: items}
		}
		b := wire.ObjBatch{Opens: make([]wire.ObjKey, len(idx))}
		for j, i := range idx {
			b.Opens[j] = items[i]
		}
		return b
	})
	return c.objects(res, err, "open", func(i int) string { return names[i] })
}

// OpenObjectID opens an object by id.
func (c *Client) OpenObjectID(ctx context.Context, id uint64) (*Object, error) {
	res, err := c.objectBatch(ctx, wire.MethodObjOpen, []uint32{placement.KeyOf(id)}, nil, func([]int) wire.ObjBatch {
		return wire.ObjBatch{Opens: []wire.ObjKey{{ID: id}}}
	})
	objs, err := c.objects(res, err, "open", func(int) string { return fmt.Sprint(id) })
	if err != nil {
		return nil, err
	}
	return objs[0], nil
}

// MaxBatch is the most items the client puts in one request
// (limits.ClientBatchItems; a server accepts up to limits.MaxBatchItems).
const MaxBatch = limits.ClientBatchItems

func (c *Client) objects(res []wire.ObjResult, err error, verb string, name func(int) string) ([]*Object, error) {
	if err != nil {
		return nil, fmt.Errorf("%s objects: %w", verb, err)
	}
	objs := make([]*Object, len(res))
	var errs []error
	for i := range res {
		r := &res[i]
		if r.Code != wire.CodeOK {
			errs = append(errs, fmt.Errorf("%s object %q: %w", verb, name(i), &pdc.ServerError{
				Server: c.label(mustOwner(c, &r.Meta, name(i))), Method: "obj_" + verb, Msg: r.Message, Err: r.Code.Err()}))
			continue
		}
		objs[i] = newObject(c, c.objInfo(&r.Meta))
	}
	return objs, errors.Join(errs...)
}

func mustOwner(c *Client, m *wire.ObjectMeta, name string) int {
	k := placement.Key(name, m.Props.TimeStep)
	if m.ID != 0 {
		k = placement.KeyOf(m.ID)
	}
	r, _ := c.ownerOfKey(k)
	return r
}

// Info returns the object's metadata as of its open (or last refresh).
func (o *Object) Info() ObjectInfo { return *o.meta() }

// ID is the object's id.
func (o *Object) ID() uint64 { return o.meta().ID }

// Name is the object's name.
func (o *Object) Name() string { return o.meta().Name }

// Refresh fetches the object's current metadata from its server.
func (o *Object) Refresh(ctx context.Context) (ObjectInfo, error) {
	req := wire.ObjBatch{Opens: []wire.ObjKey{{ID: o.meta().ID, Peek: true}}}
	res, err := o.c.calls().ObjOpen(ctx, o.meta().Server, &req)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("object %q: %w", o.meta().Name, err)
	}
	if len(res.Items) != 1 {
		return ObjectInfo{}, fmt.Errorf("object %q: bad reply: %w", o.meta().Name, pdc.ErrProtocol)
	}
	r := res.Items[0]
	if r.Code != wire.CodeOK {
		return ObjectInfo{}, fmt.Errorf("object %q: %w", o.meta().Name, &pdc.ServerError{
			Server: o.c.label(o.meta().Server), Method: "obj_open", Msg: r.Message, Err: r.Code.Err()})
	}
	o.setInfo(o.c.objInfo(&r.Meta))
	return *o.meta(), nil
}

// Dims returns the object's current dims, as its server has them now: a
// change made by any client is seen at once.
func (o *Object) Dims(ctx context.Context) ([]uint64, error) {
	info, err := o.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	return info.Props.Dims, nil
}

// SetDims changes the object's dims (same number of dims; each > 0; only
// the first may be Unlimited; at most 2^63-1 bytes).
//
// Transfers this handle started before are not overtaken: its writes are
// stored first, and its reads of regions the new dims no longer hold are
// waited first (their Wait then returns the rows as they were). A read
// is otherwise served at its wait, with the newest dims: one that still
// fits them reads what the object holds then; one started through
// another handle or client that no longer fits fails with pdc.ErrStale.
func (o *Object) SetDims(ctx context.Context, dims []uint64) error {
	what := fmt.Sprintf("set dims of object %q", o.meta().Name)
	if err := limits.Dims(what, dims, o.meta().Props.Type.Size()); err != nil {
		return err
	}
	// Transfers started before go out with the dims they were started
	// with, as a shrink must not overtake them: they are registered on
	// their data servers first, since the metadata server pushes a shrink
	// to the data servers before it answers, and a start registered after
	// it there would be refused as stale.
	if err := o.c.xfer.Settle(ctx); err != nil {
		return fmt.Errorf("object %q: %w", o.meta().Name, err)
	}
	if err := o.c.xfer.CollectStarts(ctx); err != nil {
		return fmt.Errorf("object %q: %w", o.meta().Name, err)
	}
	// Reads started through this handle that the new dims cut are
	// waited first (their bytes are the rows as they were): waited
	// after the cut, they would fail as stale.
	if err := o.x.WaitReadsOutside(ctx, dims); err != nil {
		return fmt.Errorf("object %q: %w", o.meta().Name, err)
	}
	m, err := o.c.calls().ObjSetDims(ctx, o.meta().Server, &wire.SetDims{ID: o.meta().ID, Dims: dims})
	if err != nil {
		return fmt.Errorf("object %q: %w", o.meta().Name, err)
	}
	o.setInfo(o.c.objInfo(m))
	return nil
}

// Close waits for the object's transfers under way, fsyncs the data they
// wrote and releases the handle. Idempotent. If ctx ends before that is
// done, Close returns the error and may be called again. An object that
// another client deleted meanwhile has nothing left to make durable: its
// handle closes without an error, as a file's descriptor does after
// another process removed the file.
func (o *Object) Close(ctx context.Context) error {
	o.closeMu.Lock()
	defer o.closeMu.Unlock()
	if o.closed {
		return nil
	}
	err := o.Flush(ctx)
	if errors.Is(err, pdc.ErrNotFound) && o.deleted(ctx) {
		err = nil
	}
	if cerr := o.c.calls().ObjClose(ctx, o.meta().Server, &wire.IDArg{ID: o.meta().ID}); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil && ctx.Err() != nil {
		return err // transfers may still be under way
	}
	o.closed = true
	return err
}

// deleted reports whether the object's metadata server no longer has
// it: a data server's "not found" is then the deletion's, not a lost
// write's.
func (o *Object) deleted(ctx context.Context) bool {
	_, err := o.Refresh(ctx)
	return errors.Is(err, pdc.ErrNotFound)
}

// Delete deletes the object's metadata, tags and data, and removes it
// from every container it was added to. Its metadata server has every
// data server remove the object's data and refuse it from then on: a
// handle to it, in any process, then fails with pdc.ErrNotFound (a data
// server that is down gets told when it is back, and refuses the object
// meanwhile). Transfers this client started before are done first.
func (o *Object) Delete(ctx context.Context) error {
	// Starts queued or sent and not yet answered are registered first,
	// so that the data servers finish their writes before dropping the
	// object instead of refusing them.
	if err := o.c.xfer.Settle(ctx); err != nil {
		return fmt.Errorf("delete object %q: %w", o.meta().Name, err)
	}
	if err := o.c.xfer.CollectStarts(ctx); err != nil {
		return fmt.Errorf("delete object %q: %w", o.meta().Name, err)
	}
	if err := o.c.calls().ObjDelete(ctx, o.meta().Server, &wire.ObjKey{ID: o.meta().ID}); err != nil {
		return fmt.Errorf("delete object %q: %w", o.meta().Name, err)
	}
	o.closeMu.Lock()
	o.closed = true
	o.closeMu.Unlock()
	return nil
}

// ---- tags

// TagValue is a typed tag value.
type TagValue struct {
	Type  region.Type
	Value []byte
}

// String returns a string tag value.
func String(s string) TagValue { return TagValue{Type: region.String, Value: []byte(s)} }

// Bytes returns a raw bytes tag value.
func Bytes(b []byte) TagValue { return TagValue{Type: region.VoidPtr, Value: b} }

// Int64 returns an int64 tag value.
func Int64(v int64) TagValue {
	return TagValue{Type: region.Int64, Value: binary.LittleEndian.AppendUint64(nil, uint64(v))}
}

// Int32 returns an int32 (PDC_INT) tag value.
func Int32(v int32) TagValue {
	return TagValue{Type: region.Int, Value: binary.LittleEndian.AppendUint32(nil, uint32(v))}
}

// Uint64 returns a uint64 tag value.
func Uint64(v uint64) TagValue {
	return TagValue{Type: region.Uint64, Value: binary.LittleEndian.AppendUint64(nil, v)}
}

// Float64 returns a float64 (PDC_DOUBLE) tag value.
func Float64(v float64) TagValue {
	return TagValue{Type: region.Double, Value: binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))}
}

// Float32 returns a float32 (PDC_FLOAT) tag value.
func Float32(v float32) TagValue {
	return TagValue{Type: region.Float, Value: binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))}
}

// Typed returns a tag value of type t from its little-endian bytes.
func Typed(t region.Type, value []byte) TagValue { return TagValue{Type: t, Value: value} }

// String formats the value by its type.
func (v TagValue) String() string {
	le := binary.LittleEndian
	n := len(v.Value)
	switch {
	case v.Type == region.String || v.Type == region.Char && n != 1:
		return string(v.Value)
	case v.Type.FloatingPoint() && n == 8:
		return fmt.Sprint(math.Float64frombits(le.Uint64(v.Value)))
	case v.Type.FloatingPoint() && n == 4:
		return fmt.Sprint(math.Float32frombits(le.Uint32(v.Value)))
	case v.Type.Integer() && v.Type.Signed() && (n == 1 || n == 2 || n == 4 || n == 8):
		return fmt.Sprint(signExtend(v.Value))
	case v.Type.Integer() && (n == 1 || n == 2 || n == 4 || n == 8):
		var u uint64
		for i := n - 1; i >= 0; i-- {
			u = u<<8 | uint64(v.Value[i])
		}
		return fmt.Sprint(u)
	}
	return fmt.Sprintf("%x", v.Value)
}

func signExtend(b []byte) int64 {
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	shift := 64 - 8*len(b)
	return int64(u<<shift) >> shift
}

const (
	tagObject    = 0
	tagContainer = 1
)

// TagPut is one tag of a batch put (Client.PutTags).
type TagPut struct {
	Object *Object
	Name   string
	Value  TagValue
}

func (c *Client) putTags(ctx context.Context, rank int, puts []wire.TagPut, names func(i int) string) error {
	res, err := c.calls().TagPut(ctx, rank, &wire.TagBatch{Puts: puts})
	if err != nil {
		return err
	}
	var errs []error
	for i, code := range res.Codes {
		if code != 0 {
			msg := ""
			if i < len(res.Messages) {
				msg = res.Messages[i]
			}
			errs = append(errs, fmt.Errorf("put tag %s: %w", names(i), &pdc.ServerError{
				Server: c.label(rank), Method: "tag_put", Msg: msg, Err: wire.Code(code).Err()}))
		}
	}
	return errors.Join(errs...)
}

// PutTags puts many tags with one request per metadata server. A tag the
// servers would refuse (a name with control characters, a number of the
// wrong width...) fails the whole call before any request.
func (c *Client) PutTags(ctx context.Context, puts []TagPut) error {
	var bad []error
	for _, p := range puts {
		if err := checkTag(p.Name, p.Value); err != nil {
			bad = append(bad, fmt.Errorf("put tag on object %q: %w", p.Object.meta().Name, err))
		}
	}
	if len(bad) > 0 {
		return errors.Join(bad...)
	}
	groups := map[int][]int{}
	for i, p := range puts {
		groups[p.Object.meta().Server] = append(groups[p.Object.meta().Server], i)
	}
	// Per-item failures of one chunk do not stop the others.
	var mu sync.Mutex
	var errs []error
	size := func(i int) int { return len(puts[i].Name) + len(puts[i].Value.Value) + 32 }
	err := batch.InChunks(groups, size, func(rank int, part []int) error {
		ws := make([]wire.TagPut, len(part))
		for j, i := range part {
			p := puts[i]
			ws[j] = wire.TagPut{Kind: tagObject, ID: p.Object.meta().ID, Name: p.Name, Type: int32(p.Value.Type), Value: p.Value.Value}
		}
		err := c.putTags(ctx, rank, ws, func(j int) string {
			return fmt.Sprintf("%q on object %q", puts[part[j]].Name, puts[part[j]].Object.meta().Name)
		})
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

type tagTarget struct {
	c      *Client
	kind   uint32
	id     uint64
	server int
	noun   string // "object" or "container"
	name   string
}

// what names the target in an error; formatted only then, a tag put
// being a call programs make by the thousand.
func (t tagTarget) what() string { return fmt.Sprintf("%s %q", t.noun, t.name) }

func (t tagTarget) put(ctx context.Context, name string, v TagValue) error {
	if err := checkTag(name, v); err != nil {
		return fmt.Errorf("put tag on %s: %w", t.what(), err)
	}
	return t.c.putTags(ctx, t.server, []wire.TagPut{{Kind: t.kind, ID: t.id, Name: name, Type: int32(v.Type), Value: v.Value}},
		func(int) string { return fmt.Sprintf("%q on %s", name, t.what()) })
}

func (t tagTarget) get(ctx context.Context, name string) (TagValue, error) {
	v, err := t.c.calls().TagGet(ctx, t.server, &wire.TagKey{Kind: t.kind, ID: t.id, Name: name})
	if err != nil {
		return TagValue{}, fmt.Errorf("get tag %q of %s: %w", name, t.what(), err)
	}
	return TagValue{Type: region.Type(v.Type), Value: v.Value}, nil
}

func (t tagTarget) del(ctx context.Context, name string) error {
	if err := t.c.calls().TagDelete(ctx, t.server, &wire.TagKey{Kind: t.kind, ID: t.id, Name: name}); err != nil {
		return fmt.Errorf("delete tag %q of %s: %w", name, t.what(), err)
	}
	return nil
}

func (t tagTarget) list(ctx context.Context) ([]string, error) {
	n, err := t.c.calls().TagList(ctx, t.server, &wire.TagKey{Kind: t.kind, ID: t.id})
	if err != nil {
		return nil, fmt.Errorf("list tags of %s: %w", t.what(), err)
	}
	return n.Names, nil
}

func (o *Object) tags() tagTarget {
	return tagTarget{o.c, tagObject, o.meta().ID, o.meta().Server, "object", o.meta().Name}
}

func (ct *Container) tags() tagTarget {
	return tagTarget{ct.c, tagContainer, ct.info.ID, ct.info.Server, "container", ct.info.Name}
}

// PutTag sets a tag on the object, replacing any value it had.
func (o *Object) PutTag(ctx context.Context, name string, v TagValue) error {
	return o.tags().put(ctx, name, v)
}

// GetTag returns a tag of the object; pdc.ErrNotFound if it has none.
func (o *Object) GetTag(ctx context.Context, name string) (TagValue, error) {
	return o.tags().get(ctx, name)
}

// DeleteTag removes a tag; pdc.ErrNotFound if it has none.
func (o *Object) DeleteTag(ctx context.Context, name string) error { return o.tags().del(ctx, name) }

// Tags lists the object's tag names, sorted.
func (o *Object) Tags(ctx context.Context) ([]string, error) { return o.tags().list(ctx) }

// PutTag sets a tag on the container.
func (ct *Container) PutTag(ctx context.Context, name string, v TagValue) error {
	return ct.tags().put(ctx, name, v)
}

// GetTag returns a tag of the container; pdc.ErrNotFound if it has none.
func (ct *Container) GetTag(ctx context.Context, name string) (TagValue, error) {
	return ct.tags().get(ctx, name)
}

// DeleteTag removes a tag of the container.
func (ct *Container) DeleteTag(ctx context.Context, name string) error {
	return ct.tags().del(ctx, name)
}

// Tags lists the container's tag names, sorted.
func (ct *Container) Tags(ctx context.Context) ([]string, error) { return ct.tags().list(ctx) }

// Checkpoint asks every metadata server for a consistent checkpoint of its
// store, each in a directory of the given name, and returns where each
// wrote it, by rank. One name for all lets them be restored together
// (pdc checkpoint restore NAME). name "" lets each server name its
// checkpoint by the time. A name some server has already is
// pdc.ErrExists; one that is no plain file name, pdc.ErrInvalid.
func (c *Client) Checkpoint(ctx context.Context, name string) (map[int]string, error) {
	var mu sync.Mutex
	out := map[int]string{}
	req := &wire.CheckpointRequest{Name: name}
	err := c.eachMeta(ctx, func(ctx context.Context, rank int) error {
		cp, err := c.calls().Checkpoint(ctx, rank, req)
		if err != nil {
			return err
		}
		mu.Lock()
		out[rank] = cp.Path
		mu.Unlock()
		return nil
	})
	return out, err
}

func sortBy[T any](s []T, key func(T) string) {
	slices.SortFunc(s, func(a, b T) int { return strings.Compare(key(a), key(b)) })
}
