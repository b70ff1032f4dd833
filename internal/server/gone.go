package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/wire"
)

// The cluster's side of deleted objects (docs/design/0016): metadata
// servers push tombstones to data servers (dataPeers), data servers ask
// metadata servers about objects they see for the first time (objects).

// dataPeers reaches the cluster's data servers by rank
// (metaserver.DataPeers).
type dataPeers struct {
	peerPools
	ranks []int // of the data servers; set at construction
}

func newDataPeers(tmpdir string, secret []byte, list *cluster.List) *dataPeers {
	return &dataPeers{peerPools: newPeerPools(tmpdir, secret, list), ranks: ranksWith(list, wire.RoleData)}
}

func (p *dataPeers) DataRanks() []int { return slices.Clone(p.ranks) }

func (p *dataPeers) CallData(ctx context.Context, rank int, m wire.Method, hdr []byte) error {
	_, err := p.ask(ctx, rank, m, hdr)
	return err
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
