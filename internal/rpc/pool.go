package rpc

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Pool keeps a few connections to one server, dialed on first use and
// redialed when they break. Calls are spread round-robin. Safe for
// concurrent use.
type Pool struct {
	addr  string
	opts  DialOptions
	next  atomic.Uint32
	slots []poolSlot

	closeOnce sync.Once
	closed    chan struct{}
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
	for i := range p.slots {
		p.slots[i].lock = make(chan struct{}, 1)
	}
	return p
}

// Addr is the server's address.
func (p *Pool) Addr() string { return p.addr }

// Label names the server in errors.
func (p *Pool) Label() string { return p.opts.Label }

// Get returns a healthy connection, dialing if needed.
func (p *Pool) Get(ctx context.Context) (*Conn, error) {
	s := &p.slots[int(p.next.Add(1))%len(p.slots)]
	if c := s.conn.Load(); c != nil && !c.Broken() {
		return c, nil
	}
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("server %s: connect: %w", p.opts.Label, ctxErr(ctx))
	case <-p.closed:
		return nil, fmt.Errorf("server %s: %w", p.opts.Label, pdc.ErrClosed)
	}
	defer func() { <-s.lock }()
	select {
	case <-p.closed:
		return nil, fmt.Errorf("server %s: %w", p.opts.Label, pdc.ErrClosed)
	default:
	}
	if c := s.conn.Load(); c != nil && !c.Broken() {
		return c, nil
	}
	c, err := Dial(ctx, p.addr, p.opts)
	if err != nil {
		return nil, err
	}
	if old := s.conn.Swap(c); old != nil {
		_ = old.Close()
	}
	return c, nil
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
	p.closeOnce.Do(func() { close(p.closed) })
	for i := range p.slots {
		s := &p.slots[i]
		s.lock <- struct{}{}
		if c := s.conn.Swap(nil); c != nil {
			_ = c.Close()
		}
		<-s.lock
	}
	return nil
}
