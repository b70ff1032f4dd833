package rpc

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Pool keeps a few connections to one server: one is dialed on first use,
// more only while every open one is busy, and broken ones are redialed.
// Calls go to the least busy connection. Safe for concurrent use.
type Pool struct {
	addr  string
	opts  DialOptions
	next  atomic.Uint32
	slots []poolSlot

	closeOnce sync.Once
	closed    chan struct{}
	gone      error           // set by Retire before closed is closed
	ctx       context.Context // canceled by Close: ends dials in progress
	cancel    context.CancelFunc
}

type poolSlot struct {
	lock chan struct{} // held while dialing or swapping conn
	conn atomic.Pointer[Conn]
}

// NewPool returns a pool of up to size connections to addr (at least one).
func NewPool(addr string, size int, opts DialOptions) *Pool {
	size = max(size, 1)
	opts.setDefaults(addr)
	p := &Pool{addr: addr, opts: opts, slots: make([]poolSlot, size), closed: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for i := range p.slots {
		p.slots[i].lock = make(chan struct{}, 1)
	}
	return p
}

// Addr is the server's address.
func (p *Pool) Addr() string { return p.addr }

// Label names the server in errors.
func (p *Pool) Label() string { return p.opts.Label }

// growAt is the number of calls in flight on every pooled connection at
// which the pool dials another one.
const growAt = 8

// Get returns a healthy connection: the least busy one, unless all are
// busy and the pool has room for another, which it then dials.
func (p *Pool) Get(ctx context.Context) (*Conn, error) {
	var best *Conn
	bestLoad := int64(-1)
	empty := -1
	// The first connection is First's when there are others: a request
	// there may wait behind a long one the server handles as it reads.
	skip := min(1, len(p.slots)-1)
	n := len(p.slots) - skip
	start := int(p.next.Add(1))
	for k := range n {
		i := skip + (start+k)%n
		c := p.slots[i].conn.Load()
		if c == nil || !p.healthy(c) {
			if empty < 0 {
				empty = i
			}
			continue
		}
		if load := c.inFlight.Load(); bestLoad < 0 || load < bestLoad {
			best, bestLoad = c, load
		}
	}
	if best != nil && (bestLoad < growAt || empty < 0) {
		return best, nil
	}
	c, err := p.dial(ctx, empty)
	if err != nil && best != nil && !best.Broken() {
		return best, nil // could not grow; the busy connection still works
	}
	return c, err
}

// dial fills slot i with a new connection unless another caller did so
// first.
func (p *Pool) dial(ctx context.Context, i int) (*Conn, error) {
	s := &p.slots[i]
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("server %s: connect: %w", p.opts.Label, ctxErr(ctx))
	case <-p.closed:
		return nil, p.closedErr()
	}
	defer func() { <-s.lock }()
	select {
	case <-p.closed:
		return nil, p.closedErr()
	default:
	}
	old := s.conn.Load()
	if old != nil && !old.Broken() {
		return old, nil
	}
	// The pool's failed connections are ended on the server before the
	// new one is accepted, so that a request the server has yet to handle
	// on one of them cannot land after one sent on the new (Conn.Fences).
	opts := p.opts
	for j := range p.slots {
		if o := p.slots[j].conn.Load(); o != nil && (o == old || o.failed()) {
			opts.supersede = append(opts.supersede, o)
		}
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	c, err := Dial(dctx, p.addr, opts)
	if err != nil {
		if p.ctx.Err() != nil {
			return nil, p.closedErr()
		}
		return nil, err
	}
	if old := s.conn.Swap(c); old != nil {
		_ = old.Close()
	}
	return c, nil
}

// First returns the pool's first connection, dialing it if it is not
// open: for requests whose order on the server matters, such as one
// client's data starts, which the server handles one after another on the
// connection they came on. Get leaves it to them when the pool has room
// for more than one.
func (p *Pool) First(ctx context.Context) (*Conn, error) {
	if c := p.slots[0].conn.Load(); c != nil && p.healthy(c) {
		return c, nil
	}
	return p.dial(ctx, 0)
}

// healthy reports whether c still works. Once another connection of the
// pool has failed, the server may be gone: c's socket is checked even if
// it was read from a moment ago (Broken skips that check on a busy
// connection), so that a call to a dead server fails at once rather than
// being written into a socket nobody will answer.
func (p *Pool) healthy(c *Conn) bool {
	for i := range p.slots {
		if o := p.slots[i].conn.Load(); o != nil && o != c && o.failed() {
			c.lastRead.Store(0)
			break
		}
	}
	return !c.Broken()
}

// Call makes one call on a pooled connection (see Conn.Call).
func (p *Pool) Call(ctx context.Context, m wire.Method, hdr []byte, payload [][]byte, into []byte) (Reply, error) {
	c, err := p.Get(ctx)
	if err != nil {
		return Reply{}, err
	}
	return c.Call(ctx, m, hdr, payload, into)
}

// Close closes every connection. Idempotent.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		close(p.closed)
		p.cancel()
	})
	p.closeConns()
	return nil
}

// Retire closes the pool of a server that is gone (it restarted at another
// address, say): calls in flight on its connections, and calls made on it
// later, fail with pdc.ErrUnavailable saying why, not with pdc.ErrClosed
// as if their caller had closed it.
func (p *Pool) Retire(why string) {
	p.closeOnce.Do(func() {
		p.gone = fmt.Errorf("server %s: %s: %w", p.opts.Label, why, pdc.ErrUnavailable)
		close(p.closed)
		p.cancel()
	})
	p.closeConns()
}

// closedErr is why a call on the closed pool fails.
func (p *Pool) closedErr() error {
	if p.gone != nil {
		return p.gone
	}
	return fmt.Errorf("server %s: %w", p.opts.Label, pdc.ErrClosed)
}

func (p *Pool) closeConns() {
	for i := range p.slots {
		s := &p.slots[i]
		s.lock <- struct{}{}
		if c := s.conn.Swap(nil); c != nil {
			if p.gone != nil {
				_ = c.closeWith(p.gone)
			} else {
				_ = c.Close()
			}
		}
		<-s.lock
	}
}
