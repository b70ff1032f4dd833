package dtl

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// endpointCache keeps connections to peers for reuse: an LRU of idle
// connections keyed by peer address, with a bound on the connections open
// (idle and busy) across all peers. Taking a connection to a new peer
// dials it (the warm-up that later transfers to that peer skip); going
// over the bound closes the least recently used idle connections. A
// connection is used by one transfer at a time.
type endpointCache struct {
	max  int
	dial func(ctx context.Context, addr string) (net.Conn, error)

	mu        sync.Mutex
	idle      *list.List // of *endpoint, most recently used first
	byPeer    map[string][]*list.Element
	open      int
	evictions uint64
	closed    bool
}

type endpoint struct {
	addr string
	nc   net.Conn
}

func newEndpointCache(max int, dial func(ctx context.Context, addr string) (net.Conn, error)) *endpointCache {
	return &endpointCache{max: max, dial: dial, idle: list.New(), byPeer: map[string][]*list.Element{}}
}

// get returns an idle connection to addr (reused) or dials a new one.
func (c *endpointCache) get(ctx context.Context, addr string) (ep *endpoint, reused bool, err error) {
	c.mu.Lock()
	for {
		els := c.byPeer[addr]
		if len(els) == 0 {
			break
		}
		el := els[len(els)-1]
		c.removeLocked(el)
		ep := el.Value.(*endpoint)
		if alive(ep.nc) {
			c.mu.Unlock()
			return ep, true, nil
		}
		// Closed by the peer while idle, or holding an answer nobody
		// waits for: not reusable.
		c.open--
		ep.nc.Close()
	}
	if c.closed {
		c.mu.Unlock()
		return nil, false, net.ErrClosed
	}
	c.open++ // counted before the dial, so concurrent dials respect the bound
	victims := c.trimLocked()
	c.mu.Unlock()
	closeAll(victims)
	nc, err := c.dial(ctx, addr)
	if err != nil {
		c.mu.Lock()
		c.open--
		c.mu.Unlock()
		return nil, false, err
	}
	return &endpoint{addr: addr, nc: nc}, false, nil
}

// run runs op on a connection to addr from the cache; op must give the
// connection back (put) or hand it on. op's remote error is the peer's
// answer and comes back as is; its err is a broken connection. A cached
// connection that broke before the peer said anything (errNoAnswer) had
// died while idle: op runs once more on a fresh one.
func (c *endpointCache) run(ctx context.Context, addr string, op func(ep *endpoint) (remote, err error)) error {
	for attempt := 0; ; attempt++ {
		ep, reused, err := c.get(ctx, addr)
		if err != nil {
			return fmt.Errorf("connect to %s: %w: %w", addr, ErrPeerFailed, err)
		}
		remote, err := op(ep)
		if err == nil {
			return remote
		}
		if errors.Is(err, errNoAnswer) && reused && attempt == 0 && ctx.Err() == nil {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return fmt.Errorf("connection to %s: %w: %w", addr, ErrPeerFailed, err)
	}
}

// put returns ep after a transfer; a connection that failed is closed.
func (c *endpointCache) put(ep *endpoint, healthy bool) {
	c.mu.Lock()
	if !healthy || c.closed {
		c.open--
		c.mu.Unlock()
		ep.nc.Close()
		return
	}
	el := c.idle.PushFront(ep)
	c.byPeer[ep.addr] = append(c.byPeer[ep.addr], el)
	victims := c.trimLocked()
	c.mu.Unlock()
	closeAll(victims)
}

// trimLocked removes least recently used idle connections while more than
// max are open, and returns them to be closed outside the lock.
func (c *endpointCache) trimLocked() []*endpoint {
	var victims []*endpoint
	for c.open > c.max && c.idle.Len() > 0 {
		el := c.idle.Back()
		c.removeLocked(el)
		c.open--
		c.evictions++
		victims = append(victims, el.Value.(*endpoint))
	}
	return victims
}

func (c *endpointCache) removeLocked(el *list.Element) {
	ep := el.Value.(*endpoint)
	c.idle.Remove(el)
	els := c.byPeer[ep.addr]
	for i, e := range els {
		if e == el {
			els = append(els[:i], els[i+1:]...)
			break
		}
	}
	if len(els) == 0 {
		delete(c.byPeer, ep.addr)
	} else {
		c.byPeer[ep.addr] = els
	}
}

func (c *endpointCache) stats() (open int, evictions uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.evictions
}

// close closes the idle connections; busy ones close when put back.
func (c *endpointCache) close() {
	c.mu.Lock()
	c.closed = true
	var victims []*endpoint
	for c.idle.Len() > 0 {
		el := c.idle.Back()
		c.removeLocked(el)
		c.open--
		victims = append(victims, el.Value.(*endpoint))
	}
	c.mu.Unlock()
	closeAll(victims)
}

func closeAll(eps []*endpoint) {
	for _, ep := range eps {
		ep.nc.Close()
	}
}

// alive reports whether an idle connection can be reused: the peer has
// neither closed it nor sent anything on it (a peer speaks on an idle
// connection only to refuse and close).
func alive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = true
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		ok = err == unix.EAGAIN // nothing to read, and not closed
		return true             // never wait
	})
	return err == nil && ok
}
