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

// metaPeers reaches the cluster's metadata servers by their index among
// them (metaserver.Peers), for the tag index outbox. A server that
// restarts comes back at a new address: a call that cannot reach one reads
// the server list again and retries once.
type metaPeers struct {
	tmpdir string
	secret []byte

	mu     sync.Mutex
	ranks  []int             // rank of each metadata index; guarded by mu
	list   *cluster.List     // guarded by mu
	pools  map[int]*rpc.Pool // by rank; guarded by mu
	closed bool              // guarded by mu
}

func newMetaPeers(tmpdir string, secret []byte, list *cluster.List) *metaPeers {
	p := &metaPeers{tmpdir: tmpdir, secret: secret, list: list, pools: map[int]*rpc.Pool{}}
	for _, m := range list.Servers {
		if r, _ := cluster.ParseRoles(m.Roles); r&wire.RoleMetadata != 0 {
			p.ranks = append(p.ranks, m.Rank)
		}
	}
	return p
}

func (p *metaPeers) pool(index int) (*rpc.Pool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("server is stopping: %w", pdc.ErrClosed)
	}
	if index < 0 || index >= len(p.ranks) {
		return nil, fmt.Errorf("no metadata server of index %d among %d: %w", index, len(p.ranks), pdc.ErrInvalid)
	}
	rank := p.ranks[index]
	pl := p.pools[rank]
	if pl == nil {
		m := p.list.Servers[rank]
		pl = rpc.NewPool(m.Addr, 1, rpc.DialOptions{Secret: p.secret, Label: m.Label()})
		p.pools[rank] = pl
	}
	return pl, nil
}

// refresh reads the server list again and drops the pool of the server of
// index if its address changed; it reports whether it did.
func (p *metaPeers) refresh(index int) bool {
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
	rank := p.ranks[index]
	// Against the address the pool dials, not the list kept: another
	// server's refresh may have adopted this one's new address already.
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

func (p *metaPeers) Call(ctx context.Context, index int, m wire.Method, hdr []byte) error {
	for attempt := 0; ; attempt++ {
		pl, err := p.pool(index)
		if err != nil {
			return err
		}
		_, err = pl.Call(ctx, m, hdr, nil, nil)
		if err == nil || attempt > 0 || !errors.Is(err, pdc.ErrUnavailable) || !p.refresh(index) {
			return err
		}
	}
}

func (p *metaPeers) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, pl := range p.pools {
		pl.Close()
	}
	p.pools = nil
}

// count is the number of metadata servers.
func (p *metaPeers) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ranks)
}

// Ask is Call returning the answer's header.
func (p *metaPeers) Ask(ctx context.Context, index int, m wire.Method, hdr []byte) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		pl, err := p.pool(index)
		if err != nil {
			return nil, err
		}
		rep, err := pl.Call(ctx, m, hdr, nil, nil)
		if err == nil || attempt > 0 || !errors.Is(err, pdc.ErrUnavailable) || !p.refresh(index) {
			return rep.Header, err
		}
	}
}
