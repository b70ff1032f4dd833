package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// peerPools reaches servers of the cluster by rank, with a pool each. A
// server that restarts comes back at a new address: a call that cannot
// reach one reads the server list again and retries once.
type peerPools struct {
	tmpdir string
	secret []byte

	mu     sync.Mutex
	list   *cluster.List     // guarded by mu
	pools  map[int]*rpc.Pool // by rank; guarded by mu
	closed bool              // guarded by mu
}

func newPeerPools(tmpdir string, secret []byte, list *cluster.List) peerPools {
	return peerPools{tmpdir: tmpdir, secret: secret, list: list, pools: map[int]*rpc.Pool{}}
}

// ranksWith lists the ranks of list's servers that have role.
func ranksWith(list *cluster.List, role wire.Role) []int {
	var out []int
	for _, m := range list.Servers {
		if r, _ := cluster.ParseRoles(m.Roles); r&role != 0 {
			out = append(out, m.Rank)
		}
	}
	return out
}

func (p *peerPools) pool(rank int) (*rpc.Pool, error) {
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
func (p *peerPools) refresh(rank int) bool {
	list, err := cluster.ReadList(p.tmpdir)
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// p.list is read under mu: calls to several servers refresh at once.
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

// ask calls m on the server of rank and returns the answer's header,
// trying once more if the server moved.
func (p *peerPools) ask(ctx context.Context, rank int, m wire.Method, hdr []byte) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		pl, err := p.pool(rank)
		if err != nil {
			return nil, err
		}
		rep, err := pl.Call(ctx, m, hdr, nil, nil)
		if err == nil || attempt > 0 || !errors.Is(err, pdc.ErrUnavailable) || !p.refresh(rank) {
			return rep.Header, err
		}
	}
}

func (p *peerPools) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, pl := range p.pools {
		pl.Close()
	}
	p.pools = nil
}

// metaPeers reaches the cluster's metadata servers by their index among
// them (metaserver.Peers), for the tag index outbox.
type metaPeers struct {
	peerPools
	ranks []int // rank of each metadata index; set at construction
}

func newMetaPeers(tmpdir string, secret []byte, list *cluster.List) *metaPeers {
	return &metaPeers{peerPools: newPeerPools(tmpdir, secret, list), ranks: ranksWith(list, wire.RoleMetadata)}
}

// count is the number of metadata servers.
func (p *metaPeers) count() int { return len(p.ranks) }

func (p *metaPeers) Call(ctx context.Context, index int, m wire.Method, hdr []byte) error {
	_, err := p.Ask(ctx, index, m, hdr)
	return err
}

// Ask is Call returning the answer's header.
func (p *metaPeers) Ask(ctx context.Context, index int, m wire.Method, hdr []byte) ([]byte, error) {
	if index < 0 || index >= len(p.ranks) {
		return nil, fmt.Errorf("no metadata server of index %d among %d: %w", index, len(p.ranks), pdc.ErrInvalid)
	}
	return p.ask(ctx, p.ranks[index], m, hdr)
}
