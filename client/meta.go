package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/batch"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// Unlimited is PDC_SIZE_UNLIMITED: a first dimension that can grow.
const Unlimited uint64 = math.MaxUint64

// Partition is a region partition strategy (pdc_region_partition_t).
type Partition uint32

// Partition strategies.
const (
	ObjectStatic  Partition = 0 // the whole object on one data server
	RegionStatic  Partition = 1 // regions split across all data servers in blocks
	RegionDynamic Partition = 2 // each region placed on the least-loaded data server when first written; an overwrite goes where its data is
	RegionLocal   Partition = 3 // the data server on the client's host when first written; an overwrite goes where its data is
)

// String names the strategy as the CLI spells it.
func (p Partition) String() string {
	switch p {
	case ObjectStatic:
		return "object-static"
	case RegionStatic:
		return "region-static"
	case RegionDynamic:
		return "region-dynamic"
	case RegionLocal:
		return "region-local"
	}
	return fmt.Sprintf("partition(%d)", uint32(p))
}

// Consistency is pdc_consistency_t.
type Consistency uint32

// Consistency semantics.
const (
	ConsistencyDefault  Consistency = 0
	ConsistencyPOSIX    Consistency = 1
	ConsistencyCommit   Consistency = 2
	ConsistencySession  Consistency = 3
	ConsistencyEventual Consistency = 4
)

// Lifetime of a container (pdc_lifetime_t).
type Lifetime uint32

// Lifetimes.
const (
	Persistent Lifetime = 0
	Transient  Lifetime = 1
)

// ObjectProps are an object's properties (PDC's object property). Only Dims
// can change after create (SetDims).
type ObjectProps struct {
	Dims        []uint64
	Type        region.Type
	Partition   Partition
	Consistency Consistency
	AppName     string
	TimeStep    uint32
	UserID      uint32
	DataLoc     string
	Tags        string
	// Storage is how data servers lay the object's data out on disk.
	Storage Storage
}

// Storage is how a data server lays an object's data out in its file.
type Storage uint32

// Storage modes. By offset is the default: it is faster for objects
// written and read in regions of their own layout; by region suits objects
// written in many overlapping or scattered pieces (see README, region I/O).
const (
	StorageDefault  Storage = 0 // by offset
	StorageByOffset Storage = 1 // canonical row-major layout
	StorageByRegion Storage = 2 // append log of written regions with an index
)

// String names the mode as the CLI spells it.
func (s Storage) String() string {
	switch s {
	case StorageDefault, StorageByOffset:
		return "offset"
	case StorageByRegion:
		return "region"
	}
	return fmt.Sprintf("storage(%d)", uint32(s))
}

// Clone returns a deep copy (PDCprop_obj_dup).
func (p ObjectProps) Clone() ObjectProps {
	p.Dims = append([]uint64(nil), p.Dims...)
	return p
}

func (p *ObjectProps) wire() wire.ObjectProps {
	return wire.ObjectProps{Dims: p.Dims, Type: int32(p.Type), Partition: uint32(p.Partition),
		Consistency: uint32(p.Consistency), AppName: p.AppName, TimeStep: p.TimeStep, UserID: p.UserID,
		DataLoc: p.DataLoc, Tags: p.Tags, Storage: uint32(p.Storage)}
}

func propsFrom(w *wire.ObjectProps) ObjectProps {
	return ObjectProps{Dims: w.Dims, Type: region.Type(w.Type), Partition: Partition(w.Partition),
		Consistency: Consistency(w.Consistency), AppName: w.AppName, TimeStep: w.TimeStep, UserID: w.UserID,
		DataLoc: w.DataLoc, Tags: w.Tags, Storage: Storage(w.Storage)}
}

// ContainerInfo describes a container.
type ContainerInfo struct {
	ID       uint64
	Name     string
	Lifetime Lifetime
	Created  time.Time
	// Server is the rank of the metadata server that holds it.
	Server int
	// Deleting says a delete of the container began and did not finish
	// (the client or a server died): it cannot be opened, and deleting it
	// again finishes the delete.
	Deleting bool
}

// ObjectInfo describes an object.
type ObjectInfo struct {
	ID   uint64
	Name string
	// ContainerID is the object's home: the container it was created in
	// (it may also be a member of others: Container.AddObjects).
	ContainerID uint64
	Props       ObjectProps
	Created     time.Time
	// DimsVersion counts the changes of dims.
	DimsVersion uint64
	// Server is the rank of the metadata server that holds it.
	Server int

	spread placement.Spread
}

// metaServers returns the ranks of the metadata servers, in order.
func (c *Client) metaServers() []int {
	c.metaOnce.Do(func() {
		for _, s := range c.Servers() {
			if s.Roles == "metadata" || s.Roles == "both" {
				c.meta = append(c.meta, s.Rank)
			}
		}
	})
	return c.meta
}

// dataServers returns the ranks of the data servers, in order.
func (c *Client) dataServers() []int {
	c.dataOnce.Do(func() {
		for _, s := range c.Servers() {
			if s.Roles == "data" || s.Roles == "both" {
				c.data = append(c.data, s.Rank)
			}
		}
	})
	return c.data
}

// ownerOfKey returns the rank of the metadata server that owns key.
func (c *Client) ownerOfKey(k uint32) (int, error) {
	ms := c.metaServers()
	if len(ms) == 0 {
		return 0, fmt.Errorf("the cluster has no metadata server: %w", pdc.ErrUnavailable)
	}
	return ms[placement.Owner(k, len(ms))], nil
}

// call makes one call to the server of the given rank and decodes the reply.
func (c *Client) call(ctx context.Context, rank int, m wire.Method, req wire.Message, resp wire.Message) error {
	var hdr []byte
	if req != nil {
		hdr = req.Marshal(nil)
	}
	conn, err := c.conn(ctx, rank)
	if err != nil {
		return err
	}
	c.noteOpens(rank, m)
	rep, err := conn.Call(ctx, m, hdr, nil, nil)
	if err != nil {
		return err
	}
	if resp != nil {
		if err := resp.Unmarshal(rep.Header); err != nil {
			return fmt.Errorf("%s: %s: %w", conn.Label(), m, err)
		}
	}
	return nil
}

// eachMeta calls fn for every metadata server concurrently and joins errors.
func (c *Client) eachMeta(ctx context.Context, fn func(ctx context.Context, rank int) error) error {
	return batch.FanOut(c.metaServers(), func(rank int) error { return fn(ctx, rank) })
}

// ---- containers

// Container is a handle to a container.
type Container struct {
	c    *Client
	info ContainerInfo
}

func (c *Client) contInfo(m *wire.ContainerMeta) ContainerInfo {
	rank, _ := c.ownerOfKey(placement.KeyOf(m.ID))
	return ContainerInfo{ID: m.ID, Name: m.Name, Lifetime: Lifetime(m.Lifetime), Created: time.Unix(0, m.CreatedUnix), Server: rank,
		Deleting: m.Deleting}
}

// openable refuses a container whose delete began, unless opts say not
// to.
func openable(m *wire.ContainerMeta, opts []ContainerOption) error {
	var o containerOptions
	for _, opt := range opts {
		opt(&o)
	}
	if m.Deleting && !o.deleting {
		return fmt.Errorf("container %q is being deleted; delete it again to finish (pdc cont rm %s): %w", m.Name, m.Name, pdc.ErrNotFound)
	}
	return nil
}

// CreateContainer creates a container, or returns the existing container of
// that name (as PDCcont_create does). created says which.
func (c *Client) CreateContainer(ctx context.Context, name string, lifetime Lifetime) (ct *Container, created bool, err error) {
	if err := limits.Name("container", name, limits.MaxName); err != nil {
		return nil, false, fmt.Errorf("create container: %w", err)
	}
	rank, err := c.ownerOfKey(placement.Key(name, 0))
	if err != nil {
		return nil, false, err
	}
	rep, err := c.calls().ContCreate(ctx, rank, &wire.ContCreate{Name: name, Lifetime: uint32(lifetime)})
	if err != nil {
		return nil, false, fmt.Errorf("create container %q: %w", name, err)
	}
	return &Container{c: c, info: c.contInfo(&rep.Meta)}, rep.Created, nil
}

// ContainerOption qualifies OpenContainer and OpenContainerID.
type ContainerOption func(*containerOptions)

type containerOptions struct{ deleting bool }

// EvenBeingDeleted opens a container whose delete stopped half-way (the
// client or a server died), which is refused otherwise: to list what is
// left of it, or to finish the delete with Delete.
func EvenBeingDeleted() ContainerOption { return func(o *containerOptions) { o.deleting = true } }

// OpenContainer opens an existing container by name. A container whose
// delete began and did not finish is pdc.ErrNotFound (see
// EvenBeingDeleted).
func (c *Client) OpenContainer(ctx context.Context, name string, opts ...ContainerOption) (*Container, error) {
	rank, err := c.ownerOfKey(placement.Key(name, 0))
	if err != nil {
		return nil, err
	}
	m, err := c.calls().ContGet(ctx, rank, &wire.ContKey{Name: name})
	if err != nil {
		return nil, fmt.Errorf("open container %q: %w", name, err)
	}
	if err := openable(m, opts); err != nil {
		return nil, fmt.Errorf("open container %q: %w", name, err)
	}
	return &Container{c: c, info: c.contInfo(m)}, nil
}

// OpenContainerID opens an existing container by id, as OpenContainer.
func (c *Client) OpenContainerID(ctx context.Context, id uint64, opts ...ContainerOption) (*Container, error) {
	rank, err := c.ownerOfKey(placement.KeyOf(id))
	if err != nil {
		return nil, err
	}
	m, err := c.calls().ContGet(ctx, rank, &wire.ContKey{ID: id})
	if err != nil {
		return nil, fmt.Errorf("open container %d: %w", id, err)
	}
	if err := openable(m, opts); err != nil {
		return nil, fmt.Errorf("open container %d: %w", id, err)
	}
	return &Container{c: c, info: c.contInfo(m)}, nil
}

// Containers lists every container of the cluster, by name, in a slice
// (AllContainers pages through them without one).
func (c *Client) Containers(ctx context.Context) ([]ContainerInfo, error) {
	var out []ContainerInfo
	for ci, err := range c.AllContainers(ctx) {
		if err != nil {
			return out, err
		}
		out = append(out, ci)
	}
	return out, nil
}

// Info returns what the container was when opened.
func (ct *Container) Info() ContainerInfo { return ct.info }

// ID is the container's id.
func (ct *Container) ID() uint64 { return ct.info.ID }

// Name is the container's name.
func (ct *Container) Name() string { return ct.info.Name }

// Close releases the handle. Containers hold nothing open on servers.
func (ct *Container) Close() error { return nil }

// SetLifetime makes the container persistent or transient (PDCcont_persist).
func (ct *Container) SetLifetime(ctx context.Context, l Lifetime) error {
	if _, err := ct.c.calls().ContLifetime(ctx, ct.info.Server, &wire.ContCreate{Name: ct.info.Name, Lifetime: uint32(l)}); err != nil {
		return fmt.Errorf("container %q: set lifetime: %w", ct.info.Name, err)
	}
	ct.info.Lifetime = l
	return nil
}

// Delete deletes the container and every object whose home it is (the
// objects created in it), with their data, tags and index entries.
// Objects added to it from other containers (AddObjects) only lose this
// membership: they stay in their homes. It fails, deleting nothing, while
// any object whose home it is is open (by any client).
//
// It works through the container a page at a time, each page deleted
// whole: the objects' data first, then their metadata in one commit of
// their metadata server. Its memory and each request's are bounded
// whatever the container holds. If it stops half-way (ctx ends, the
// client or a server dies), the container stays marked as being deleted:
// it can no longer be opened or created, and deleting it again
// (Client.DeleteContainer, pdc cont rm) finishes the delete. No object is
// ever left with its metadata gone and its data, tags or index entries
// there.
func (ct *Container) Delete(ctx context.Context, opts ...DeleteOption) error {
	return ct.c.deleteContainer(ctx, ct.info, false, opts...)
}

// DeleteTransient deletes every transient container with its objects,
// open or not, and returns how many it deleted. `pdc down` calls it before
// stopping the servers: transient containers do not outlive the cluster.
func (c *Client) DeleteTransient(ctx context.Context) (int, error) {
	tr := c.deleteTransient(ctx)
	return tr.deleted, tr.err
}

// transientDeletes is what deleteTransient did.
type transientDeletes struct {
	deleted  int
	left     []string // names of those found and not deleted
	unlisted []string // labels of the metadata servers that could not list theirs
	err      error    // the failures, joined
}

// deleteTransient deletes the transient containers server by server, so
// that a dead metadata server leaves only its own unlisted, and goes on
// past a container that cannot be deleted, naming it.
func (c *Client) deleteTransient(ctx context.Context) transientDeletes {
	var tr transientDeletes
	var errs []error
	for _, rank := range c.metaServers() {
		var found []ContainerInfo
		for ci, err := range c.containerCursor([]int{rank}).All(ctx) {
			if err != nil {
				tr.unlisted = append(tr.unlisted, c.label(rank))
				errs = append(errs, err)
				break
			}
			if ci.Lifetime == Transient {
				found = append(found, ci)
			}
		}
		for _, ci := range found {
			if err := c.deleteContainer(ctx, ci, true); err != nil {
				tr.left = append(tr.left, ci.Name)
				errs = append(errs, err)
				continue
			}
			tr.deleted++
		}
	}
	if err := errors.Join(errs...); err != nil {
		tr.err = fmt.Errorf("transient: %w", err)
	}
	return tr
}

// Objects lists the container's objects (from every metadata server),
// sorted by name, in a slice: those whose home it is and those added to it
// (AddObjects). An object's ContainerID is its home: another container's
// id for an added one. All pages through them without holding them all.
func (ct *Container) Objects(ctx context.Context) ([]ObjectInfo, error) {
	var out []ObjectInfo
	var err error
	for info, ierr := range ct.All(ctx) {
		if ierr != nil {
			err = ierr
			break
		}
		out = append(out, info)
	}
	sortBy(out, func(i ObjectInfo) string { return i.Name })
	return out, err
}

// AddObjects makes the objects of the given ids members of the container
// by reference: each keeps its home (the container it was created in) and
// may be a member of any number of containers. Adding a member again, or
// adding an object to its home, is not an error and changes nothing.
// Objects lists them; deleting the container removes the memberships and
// leaves the objects; deleting an object removes it from every container.
//
// Nothing changes if an object does not exist or the container was
// deleted: every object's server checks its items before any server
// changes any (a server that fails between the check and the change, or an
// object deleted meanwhile, can leave the objects of other servers added;
// adding again completes it).
func (ct *Container) AddObjects(ctx context.Context, ids ...uint64) error {
	return ct.members(ctx, ids, false)
}

// RemoveObjects removes objects added with AddObjects from the container.
// It fails, changing nothing, if one of them is not a member
// (pdc.ErrNotFound), does not exist, or has the container as its home
// (pdc.ErrInvalid): delete such an object instead.
func (ct *Container) RemoveObjects(ctx context.Context, ids ...uint64) error {
	return ct.members(ctx, ids, true)
}

// Contains reports whether object id is a member of the container: its
// home or one it was added to. An object that does not exist is
// pdc.ErrNotFound.
func (ct *Container) Contains(ctx context.Context, id uint64) (bool, error) {
	if id == 0 {
		return false, fmt.Errorf("container %q: object id 0 names no object: %w", ct.info.Name, pdc.ErrInvalid)
	}
	rank, err := ct.c.ownerOfKey(placement.KeyOf(id))
	if err != nil {
		return false, err
	}
	// Checking an add changes nothing, and would change nothing for a
	// member.
	req := wire.Members{Version: wire.MembersVersion, ContID: ct.info.ID, ObjIDs: []uint64{id}, Check: true}
	r, err := ct.c.calls().ObjMembers(ctx, rank, &req)
	if err != nil {
		return false, fmt.Errorf("container %q: object %d: %w", ct.info.Name, id, err)
	}
	return r.Changed == 0, nil
}

func (ct *Container) members(ctx context.Context, ids []uint64, remove bool) error {
	what := fmt.Sprintf("container %q: add objects", ct.info.Name)
	if remove {
		what = fmt.Sprintf("container %q: remove objects", ct.info.Name)
	}
	if len(ids) == 0 {
		return nil
	}
	groups, err := batch.ByOwner(ids, func(id uint64) (int, error) { return ct.c.ownerOfKey(placement.KeyOf(id)) })
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// Memberships live with the objects; the container, on its own
	// server, must still be there.
	m, err := ct.c.calls().ContGet(ctx, ct.info.Server, &wire.ContKey{ID: ct.info.ID})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := openable(m, nil); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	send := func(check bool) error {
		return batch.InChunks(groups, nil, func(rank int, part []int) error {
			req := wire.Members{Version: wire.MembersVersion, ContID: ct.info.ID, ObjIDs: make([]uint64, len(part)), Remove: remove, Check: check}
			for j, i := range part {
				req.ObjIDs[j] = ids[i]
			}
			_, err := ct.c.calls().ObjMembers(ctx, rank, &req)
			return err
		})
	}
	// One request is checked whole by its server; more are all checked
	// before any changes anything.
	if batch.Requests(groups) > 1 {
		if err := send(true); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := send(false); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
