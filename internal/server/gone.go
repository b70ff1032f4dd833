package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/dataserver"
	"github.com/pdcgo/pdc/internal/limits"
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
	out := make([]bool, len(ids))
	err := o.perOwner(ctx, ids, func(idx int, pos []int) error {
		gone, _, err := o.goneAt(ctx, idx, ids, pos)
		if err != nil {
			return err
		}
		for _, i := range pos {
			out[i] = gone[ids[i]]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// perOwner waits for the cluster to start, then calls ask at once for
// each metadata server, with the positions in ids of the objects it
// holds; each call writes only its own positions of its caller's answer.
func (o *objects) perOwner(ctx context.Context, ids []uint64, ask func(idx int, pos []int) error) error {
	select {
	case <-o.ready:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the cluster to start: %w", pdc.CtxErr(ctx))
	}
	count := o.peers.count()
	if count == 0 {
		return fmt.Errorf("the cluster has no metadata server: %w", pdc.ErrUnavailable)
	}
	groups := map[int][]int{} // metadata server index -> positions in ids
	for i, id := range ids {
		idx := placement.OwnerOfID(id, count)
		groups[idx] = append(groups[idx], i)
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for idx, pos := range groups {
		wg.Go(func() {
			if err := ask(idx, pos); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("metadata server %d of %d: %w", idx, count, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// goneAt asks metadata server idx which of the objects ids[pos] do not
// exist (gone), and which of those were never created (never, a subset of
// gone; empty from a metadata server of a build that cannot tell).
func (o *objects) goneAt(ctx context.Context, idx int, ids []uint64, pos []int) (gone, never map[uint64]bool, err error) {
	q := wire.IDList{IDs: make([]uint64, len(pos))}
	for j, i := range pos {
		q.IDs[j] = ids[i]
	}
	hdr, err := o.peers.Ask(ctx, idx, wire.MethodObjGone, q.Marshal(nil))
	if err != nil {
		return nil, nil, err
	}
	var res wire.GoneIDs
	if err := res.Unmarshal(hdr); err != nil {
		return nil, nil, err
	}
	gone = make(map[uint64]bool, len(res.IDs))
	for _, id := range res.IDs {
		gone[id] = true
	}
	never = make(map[uint64]bool, len(res.Never))
	for _, id := range res.Never {
		never[id] = true
	}
	return gone, never, nil
}

// Lives asks the objects' metadata servers for their records
// (dataserver.Lives): one open with Peek per metadata server, in place of
// the Gone question, which it answers too. An object a metadata server
// does not find is asked about as Gone asks: only one it answers gone,
// and not never created, is deleted; one never created is Never; another
// (its delete not yet durable) is neither found nor gone, so that a start
// whose dims may cut data is not taken unconfirmed.
func (o *objects) Lives(ctx context.Context, ids []uint64) ([]dataserver.Life, error) {
	out := make([]dataserver.Life, len(ids))
	err := o.perOwner(ctx, ids, func(idx int, pos []int) error { return o.livesAt(ctx, idx, ids, pos, out) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// livesAt asks metadata server idx about the objects ids[pos], into out.
func (o *objects) livesAt(ctx context.Context, idx int, ids []uint64, pos []int, out []dataserver.Life) error {
	var missing []int // positions of objects not found
	for len(pos) > 0 {
		n := min(len(pos), limits.MaxBatchItems)
		q := wire.ObjBatch{Opens: make([]wire.ObjKey, n)}
		for j, i := range pos[:n] {
			q.Opens[j] = wire.ObjKey{ID: ids[i], Peek: true}
		}
		hdr, err := o.peers.Ask(ctx, idx, wire.MethodObjOpen, q.Marshal(nil))
		if err != nil {
			return err
		}
		var res wire.ObjResults
		if err := res.Unmarshal(hdr); err != nil {
			return err
		}
		if len(res.Items) == 0 || len(res.Items) > n {
			return fmt.Errorf("asked about %d objects, %d answers: %w", n, len(res.Items), pdc.ErrProtocol)
		}
		// An answer may stop short (too large a reply): the rest are
		// asked again.
		for j, r := range res.Items {
			i := pos[j]
			switch {
			case r.Code == wire.CodeOK:
				out[i] = dataserver.Life{Found: true, Dims: r.Meta.Props.Dims, DimsVersion: r.Meta.DimsVersion}
			case errors.Is(r.Code.Err(), pdc.ErrNotFound):
				missing = append(missing, i)
			default:
				return fmt.Errorf("object %d: %s: %w", ids[i], r.Message, r.Code.Err())
			}
		}
		pos = pos[len(res.Items):]
	}
	if len(missing) == 0 {
		return nil
	}
	gone, never, err := o.goneAt(ctx, idx, ids, missing)
	if err != nil {
		return err
	}
	for _, i := range missing {
		id := ids[i]
		out[i] = dataserver.Life{Gone: gone[id] && !never[id], Never: never[id]}
	}
	return nil
}
