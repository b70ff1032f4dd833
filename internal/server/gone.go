package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// The cluster's side of deleted objects (docs/design/0016): metadata
// servers push tombstones to data servers (dataPeers), data servers ask
// metadata servers about objects they see for the first time (objects).

// dataPeers reaches the cluster's data servers by rank
// (metaserver.DataPeers). A server that restarts comes back at a new
// address: a call that cannot reach one reads the server list again and
// retries once.
type dataPeers struct {
	tmpdir string
	secret []byte

	mu     sync.Mutex
	ranks  []int             // guarded by mu
	list   *cluster.List     // guarded by mu
	pools  map[int]*rpc.Pool // by rank; guarded by mu
	closed bool              // guarded by mu
}

func newDataPeers(tmpdir string, secret []byte, list *cluster.List) *dataPeers {
	p := &dataPeers{tmpdir: tmpdir, secret: secret, list: list, pools: map[int]*rpc.Pool{}}
	for _, m := range list.Servers {
		if r, _ := cluster.ParseRoles(m.Roles); r&wire.RoleData != 0 {
			p.ranks = append(p.ranks, m.Rank)
		}
	}
	return p
}

func (p *dataPeers) DataRanks() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.ranks...)
}

func (p *dataPeers) pool(rank int) (*rpc.Pool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("server is stopping: %w", pdc.ErrClosed)
	}
	if rank < 0 || rank >= len(p.list.Servers) {
		return nil, fmt.Errorf("no server of rank %d among %d: %w", rank, len(p.list.Servers), pdc.ErrInvalid)
	}
	pl := p.pools[rank]
	if pl == nil {
		m := p.list.Servers[rank]
		pl = rpc.NewPool(m.Addr, 1, rpc.DialOptions{Secret: p.secret, Label: m.Label()})
		p.pools[rank] = pl
	}
	return pl, nil
}

// refresh reads the server list again and drops the pool of rank if its
// address changed; it reports whether it did.
func (p *dataPeers) refresh(rank int) bool {
	list, err := cluster.ReadList(p.tmpdir)
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// p.list is read under mu: pushes to several servers refresh at once.
	if p.closed || list.Size != p.list.Size {
		return false
	}
	// Against the address the pool dials, not the list kept: another
	// rank's refresh may have adopted this rank's new address already.
	changed := dialsElsewhere(p.pools[rank], p.list.Servers[rank].Addr, list.Servers[rank].Addr)
	p.list = list
	if !changed {
		return false
	}
	if pl := p.pools[rank]; pl != nil {
		pl.Close()
		delete(p.pools, rank)
	}
	return true
}

// dialsElsewhere reports whether a server now at addr is not where pl
// (or, with no pool yet, the list it was read from: was) dials.
func dialsElsewhere(pl *rpc.Pool, was, addr string) bool {
	if pl != nil {
		return pl.Addr() != addr
	}
	return was != addr
}

func (p *dataPeers) CallData(ctx context.Context, rank int, m wire.Method, hdr []byte) error {
	for attempt := 0; ; attempt++ {
		pl, err := p.pool(rank)
		if err != nil {
			return err
		}
		_, err = pl.Call(ctx, m, hdr, nil, nil)
		if err == nil || attempt > 0 || !errors.Is(err, pdc.ErrUnavailable) || !p.refresh(rank) {
			return err
		}
	}
}

func (p *dataPeers) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, pl := range p.pools {
		pl.Close()
	}
	p.pools = nil
}

// objects asks the metadata servers which objects are gone
// (dataserver.Objects). A data server serves before the cluster is
// complete; until then a question waits for the server list.
type objects struct {
	ready chan struct{} // closed by start
	peers *metaPeers    // set before ready is closed
}

func newObjects() *objects { return &objects{ready: make(chan struct{})} }

// start gives the metadata servers to ask; call once.
func (o *objects) start(peers *metaPeers) {
	o.peers = peers
	close(o.ready)
}

func (o *objects) Gone(ctx context.Context, ids []uint64) ([]bool, error) {
	select {
	case <-o.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the cluster to start: %w", pdc.CtxErr(ctx))
	}
	count := o.peers.count()
	if count == 0 {
		return nil, fmt.Errorf("the cluster has no metadata server: %w", pdc.ErrUnavailable)
	}
	groups := map[int][]int{} // metadata server index -> positions in ids
	for i, id := range ids {
		idx := placement.OwnerOfID(id, count)
		groups[idx] = append(groups[idx], i)
	}
	out := make([]bool, len(ids))
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for idx, pos := range groups {
		wg.Go(func() {
			q := wire.IDList{IDs: make([]uint64, len(pos))}
			for j, i := range pos {
				q.IDs[j] = ids[i]
			}
			hdr, err := o.peers.Ask(ctx, idx, wire.MethodObjGone, q.Marshal(nil))
			var gone wire.IDList
			if err == nil {
				err = gone.Unmarshal(hdr)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("metadata server %d of %d: %w", idx, count, err))
				return
			}
			set := make(map[uint64]bool, len(gone.IDs))
			for _, id := range gone.IDs {
				set[id] = true
			}
			for _, i := range pos {
				out[i] = set[ids[i]]
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// DimsVersions asks the objects' metadata servers for their current dims
// versions (dataserver.DimsVersions): 0 for an object that no longer
// exists.
func (o *objects) DimsVersions(ctx context.Context, ids []uint64) ([]uint64, error) {
	select {
	case <-o.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the cluster to start: %w", pdc.CtxErr(ctx))
	}
	count := o.peers.count()
	if count == 0 {
		return nil, fmt.Errorf("the cluster has no metadata server: %w", pdc.ErrUnavailable)
	}
	out := make([]uint64, len(ids))
	for i, id := range ids {
		q := wire.ObjBatch{Opens: []wire.ObjKey{{ID: id, Peek: true}}}
		hdr, err := o.peers.Ask(ctx, placement.OwnerOfID(id, count), wire.MethodObjOpen, q.Marshal(nil))
		if err != nil {
			return nil, fmt.Errorf("dims of object %d: %w", id, err)
		}
		var res wire.ObjResults
		if err := res.Unmarshal(hdr); err != nil {
			return nil, fmt.Errorf("dims of object %d: %w", id, err)
		}
		if len(res.Items) != 1 {
			return nil, fmt.Errorf("dims of object %d: %d answers: %w", id, len(res.Items), pdc.ErrProtocol)
		}
		switch r := res.Items[0]; {
		case r.Code == wire.CodeOK:
			out[i] = r.Meta.DimsVersion
		case errors.Is(r.Code.Err(), pdc.ErrNotFound):
			// Deleted: the start is refused for that.
		default:
			return nil, fmt.Errorf("dims of object %d: %s: %w", id, r.Message, r.Code.Err())
		}
	}
	return out, nil
}
