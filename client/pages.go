package client

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/batch"
	"github.com/pdcgo/pdc/internal/wire"
)

// WithPageSize bounds the items the client asks for in each page of a
// listing (Cursor) or of a container delete; 0, the default, takes each
// server's bound (thousands). Small pages cost more round trips; tests use
// them to page through few objects.
func WithPageSize(n int) Option { return func(o *options) { o.pageSize = n } }

// Cursor walks a listing that metadata servers hand out a page at a time:
// the objects of a container (Container.ObjectCursor), every container
// (Client.ContainerCursor) or a namespace's staged files
// (Client.StagedCursor). It holds at most one page per metadata server (a
// few hundred KiB), whatever the listing holds, and merges the servers'
// pages into one order: containers by name, objects by id, files by path.
//
// A cursor is not a snapshot: what is created or deleted while it walks
// may be listed or not, but nothing is listed twice, and everything there
// from the start to the end of the walk is listed once. Not safe for
// concurrent use.
type Cursor[T any] struct{ m *batch.Merge[T] }

func newCursor[T any](cmp func(a, b T) int) *Cursor[T] { return &Cursor[T]{m: batch.NewMerge(cmp)} }

// Next returns the next item; false at the end. After an error every call
// returns it again.
func (cu *Cursor[T]) Next(ctx context.Context) (T, bool, error) { return cu.m.Next(ctx) }

// All returns an iterator over the rest of the listing. An error is the
// last pair it yields.
func (cu *Cursor[T]) All(ctx context.Context) iter.Seq2[T, error] { return cu.m.All(ctx) }

// objPage asks the metadata server of rank for a page of container
// cont's members after id after.
func (c *Client) objPage(ctx context.Context, rank int, q wire.ObjPageReq) (*wire.ObjPage, error) {
	q.Version = wire.PageVersion
	if q.Limit == 0 {
		q.Limit = c.pageLimit()
	}
	p, err := c.calls().ObjPage(ctx, rank, &q)
	if err != nil {
		return nil, err
	}
	if p.Next != 0 && p.Next <= q.After {
		return nil, fmt.Errorf("%s: obj_page: the page after object %d ends at %d: %w", c.label(rank), q.After, p.Next, pdc.ErrProtocol)
	}
	return p, nil
}

// ObjectCursor returns a cursor over the container's objects, in
// increasing id order: those whose home it is and those added to it
// (AddObjects).
func (ct *Container) ObjectCursor() *Cursor[ObjectInfo] {
	cu := newCursor(func(a, b ObjectInfo) int { return cmp.Compare(a.ID, b.ID) })
	for _, rank := range ct.c.metaServers() {
		var after uint64
		cu.m.Add(func(ctx context.Context) ([]ObjectInfo, bool, error) {
			p, err := ct.c.objPage(ctx, rank, wire.ObjPageReq{ContID: ct.info.ID, After: after})
			if err != nil {
				return nil, false, fmt.Errorf("container %q: list objects: %w", ct.info.Name, err)
			}
			out := make([]ObjectInfo, len(p.Items))
			for i := range p.Items {
				out[i] = ct.c.objInfo(&p.Items[i])
			}
			after = p.Next
			return out, p.Next == 0, nil
		})
	}
	return cu
}

// All returns an iterator over the container's objects, in increasing id
// order, a page per metadata server at a time (see Cursor):
//
//	for info, err := range ct.All(ctx) {
//		if err != nil {
//			return err
//		}
//		...
//	}
func (ct *Container) All(ctx context.Context) iter.Seq2[ObjectInfo, error] {
	return ct.ObjectCursor().All(ctx)
}

// member is a member of a container, by id.
type member struct {
	id    uint64
	added bool // added to the container by reference; its home is another
}

// memberCursor returns a cursor over the ids of the container's members.
func (ct *Container) memberCursor() *Cursor[member] {
	cu := newCursor(func(a, b member) int { return cmp.Compare(a.id, b.id) })
	for _, rank := range ct.c.metaServers() {
		var after uint64
		cu.m.Add(func(ctx context.Context) ([]member, bool, error) {
			p, err := ct.c.objPage(ctx, rank, wire.ObjPageReq{ContID: ct.info.ID, After: after, IDsOnly: true})
			if err != nil {
				return nil, false, fmt.Errorf("container %q: list object ids: %w", ct.info.Name, err)
			}
			after = p.Next
			return members(p), p.Next == 0, nil
		})
	}
	return cu
}

// members returns the members of an ids page.
func members(p *wire.ObjPage) []member {
	out := make([]member, len(p.IDs))
	added := p.Added
	for i, id := range p.IDs {
		out[i].id = id
		if len(added) > 0 && added[0] == id {
			out[i].added = true
			added = added[1:]
		}
	}
	return out
}

// ObjectIDs returns an iterator over the ids of the container's objects,
// in increasing order, without their records: a page holds thousands.
func (ct *Container) ObjectIDs(ctx context.Context) iter.Seq2[uint64, error] {
	return func(yield func(uint64, error) bool) {
		for m, err := range ct.memberCursor().All(ctx) {
			if !yield(m.id, err) || err != nil {
				return
			}
		}
	}
}

// Count returns how many objects the container has (home and added), as
// the metadata servers count them now; each counts its part in steps of
// bounded work.
func (ct *Container) Count(ctx context.Context) (int, error) {
	var mu sync.Mutex
	total := 0
	err := ct.c.eachMeta(ctx, func(ctx context.Context, rank int) error {
		var after uint64
		for {
			p, err := ct.c.objPage(ctx, rank, wire.ObjPageReq{ContID: ct.info.ID, After: after, Count: true, Limit: 0})
			if err != nil {
				return err
			}
			mu.Lock()
			total += int(p.N)
			mu.Unlock()
			if p.Next == 0 {
				return nil
			}
			after = p.Next
		}
	})
	if err != nil {
		return 0, fmt.Errorf("container %q: count objects: %w", ct.info.Name, err)
	}
	return total, nil
}

// ContainerCursor returns a cursor over every container of the cluster,
// by name.
func (c *Client) ContainerCursor() *Cursor[ContainerInfo] { return c.containerCursor(c.metaServers()) }

// containerCursor is ContainerCursor over the metadata servers ranks.
func (c *Client) containerCursor(ranks []int) *Cursor[ContainerInfo] {
	cu := newCursor(func(a, b ContainerInfo) int { return strings.Compare(a.Name, b.Name) })
	cu.m.AddByName(ranks, c.label, c.pageLimit(), "list containers", "cont_page", func(ctx context.Context, rank int, after string, limit uint32) ([]ContainerInfo, string, error) {
		p, err := c.calls().ContPage(ctx, rank, &wire.ContPageReq{Version: wire.PageVersion, After: after, Limit: limit})
		if err != nil {
			return nil, "", err
		}
		out := make([]ContainerInfo, len(p.Items))
		for i := range p.Items {
			out[i] = c.contInfo(&p.Items[i])
		}
		return out, p.Next, nil
	})
	return cu
}

// pageLimit is the page size to ask for (WithPageSize); 0 for the
// server's bound.
func (c *Client) pageLimit() uint32 { return uint32(min(max(c.pageSize, 0), 1<<30)) }

// AllContainers returns an iterator over every container of the cluster,
// by name, a page per metadata server at a time (see Cursor).
func (c *Client) AllContainers(ctx context.Context) iter.Seq2[ContainerInfo, error] {
	return c.ContainerCursor().All(ctx)
}

// ---- deleting

// DeleteContainer deletes the container of that name as Container.Delete
// does. It also finishes the delete of a container whose delete stopped
// half-way, which can no longer be opened otherwise.
func (c *Client) DeleteContainer(ctx context.Context, name string, opts ...DeleteOption) error {
	ct, err := c.OpenContainer(ctx, name, EvenBeingDeleted())
	if err != nil {
		return fmt.Errorf("delete container %q: %w", name, err)
	}
	return ct.Delete(ctx, opts...)
}

// DeleteOption adjusts Container.Delete.
type DeleteOption func(*deleteOptions)

type deleteOptions struct{ onPage func(members uint64) }

// OnPage has Container.Delete call fn after each page of members it
// deleted, with the number of members that page removed: how a caller
// shows progress, or bounds each step of a long delete instead of all of
// it (pdc cont rm). fn runs on the deleting goroutines, one call at a
// time.
func OnPage(fn func(members uint64)) DeleteOption {
	return func(o *deleteOptions) { o.onPage = fn }
}

// deleteContainer deletes a container in pages (see Container.Delete);
// force deletes open objects too.
func (c *Client) deleteContainer(ctx context.Context, info ContainerInfo, force bool, opts ...DeleteOption) error {
	var o deleteOptions
	for _, opt := range opts {
		opt(&o)
	}
	if fn := o.onPage; fn != nil {
		var mu sync.Mutex
		o.onPage = func(n uint64) {
			mu.Lock()
			defer mu.Unlock()
			fn(n)
		}
	}
	what := fmt.Sprintf("delete container %q", info.Name)
	if !force {
		var mu sync.Mutex
		var open uint64
		err := c.eachMeta(ctx, func(ctx context.Context, rank int) error {
			n, err := c.calls().ObjOpenCount(ctx, rank, &wire.IDArg{ID: info.ID})
			if err != nil {
				return err
			}
			mu.Lock()
			open += n.N
			mu.Unlock()
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if open > 0 {
			return fmt.Errorf("%s: %d of its objects are open; close them first: %w", what, open, pdc.ErrInvalid)
		}
	}
	// Starts queued or sent and not yet answered are registered first, so
	// that the data servers wait for their writes instead of being
	// overtaken by them.
	if err := c.xfer.Settle(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := c.xfer.CollectStarts(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// From here the container cannot be opened or created again until a
	// delete finishes: one that stops half-way is finished by the next.
	if _, err := c.calls().ContDeleting(ctx, info.Server, &wire.ContKey{ID: info.ID}); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	err := c.eachMeta(ctx, func(ctx context.Context, rank int) error { return c.purge(ctx, rank, info.ID, force, o.onPage) })
	if err != nil {
		return fmt.Errorf("%s: %w (deleting it again finishes the delete)", what, err)
	}
	if err := c.calls().ContDelete(ctx, info.Server, &wire.ContKey{ID: info.ID}); err != nil {
		return fmt.Errorf("%s: %w (deleting it again finishes the delete)", what, err)
	}
	return nil
}

// purge deletes the members of container cont held by the metadata server
// of rank, a page at a time: the data of the objects whose home it is on
// every data server first, then, in one commit of that server, their
// metadata, tags, index entries and region maps, and the memberships of
// the objects added to it. A crash between the two leaves objects whose
// metadata names data already gone, which the next delete finishes; never
// metadata gone with data, tags or index entries left.
func (c *Client) purge(ctx context.Context, rank int, cont uint64, force bool, onPage func(uint64)) error {
	var after uint64
	for {
		p, err := c.objPage(ctx, rank, wire.ObjPageReq{ContID: cont, After: after, IDsOnly: true})
		if err != nil {
			return err
		}
		if len(p.IDs) > 0 {
			var home []uint64
			for _, m := range members(p) {
				if !m.added {
					home = append(home, m.id)
				}
			}
			if err := c.deleteObjectsData(ctx, home); err != nil {
				return err
			}
			n, err := c.calls().ObjPurge(ctx, rank, &wire.ObjPurge{Version: wire.PageVersion, ContID: cont, IDs: p.IDs, Force: force})
			if err != nil {
				return err
			}
			if onPage != nil {
				onPage(n.N)
			}
		}
		if p.Next == 0 {
			return nil
		}
		after = p.Next
	}
}

// deleteObjectsData deletes the data of the objects ids on every data
// server.
func (c *Client) deleteObjectsData(ctx context.Context, ids []uint64) error {
	if len(ids) == 0 {
		return nil
	}
	return batch.FanOut(c.dataServers(), func(server int) error {
		if err := c.calls().DataDeleteObjs(ctx, server, &wire.ObjIDs{Version: wire.PageVersion, IDs: ids}); err != nil {
			return fmt.Errorf("delete the data of %d objects on %s: %w", len(ids), c.label(server), err)
		}
		return nil
	})
}
