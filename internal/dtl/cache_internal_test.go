package dtl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// failsafe bounds every wait of these tests so that a bug hangs nothing;
// it is never used to order events.
const failsafe = 10 * time.Second

// testPeer is a TCP listener on 127.0.0.1 whose accepted connections the
// test picks up in dial order.
type testPeer struct {
	addr  string
	conns chan net.Conn
}

func newTestPeer(t *testing.T) *testPeer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &testPeer{addr: ln.Addr().String(), conns: make(chan net.Conn, 1024)}
	var (
		mu  sync.Mutex
		all []net.Conn
	)
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			all = append(all, c)
			mu.Unlock()
			select {
			case p.conns <- c:
			default: // nobody looks at this one; kept for cleanup
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-loopDone
		mu.Lock()
		defer mu.Unlock()
		for _, c := range all {
			c.Close()
		}
	})
	return p
}

// accept returns the server side of the next connection dialed to p.
func (p *testPeer) accept(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-p.conns:
		return c
	case <-time.After(failsafe):
		t.Fatalf("peer %s: no connection accepted", p.addr)
		return nil
	}
}

// dialCounter is an endpointCache dial function over TCP that counts dials
// per address.
type dialCounter struct {
	mu    sync.Mutex
	dials map[string]int
}

func (d *dialCounter) dial(ctx context.Context, addr string) (net.Conn, error) {
	d.mu.Lock()
	if d.dials == nil {
		d.dials = map[string]int{}
	}
	d.dials[addr]++
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", addr)
}

func (d *dialCounter) count(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials[addr]
}

func mustGet(t *testing.T, c *endpointCache, addr string, wantReused bool) *endpoint {
	t.Helper()
	ep, reused, err := c.get(context.Background(), addr)
	if err != nil {
		t.Fatalf("get(%s): %v", addr, err)
	}
	if ep.addr != addr {
		t.Fatalf("get(%s) returned an endpoint for %s", addr, ep.addr)
	}
	if reused != wantReused {
		t.Fatalf("get(%s): reused = %v, want %v", addr, reused, wantReused)
	}
	return ep
}

func wantStats(t *testing.T, c *endpointCache, open int, evictions uint64) {
	t.Helper()
	gotOpen, gotEv := c.stats()
	if gotOpen != open || gotEv != evictions {
		t.Fatalf("stats: open %d, evictions %d; want open %d, evictions %d", gotOpen, gotEv, open, evictions)
	}
}

// wantUsable checks that the connection pair still carries bytes from the
// cache's side to the peer's.
func wantUsable(t *testing.T, what string, nc, server net.Conn) {
	t.Helper()
	if _, err := nc.Write([]byte{0x5a}); err != nil {
		t.Fatalf("%s: write: %v (closed by the cache?)", what, err)
	}
	_ = server.SetReadDeadline(time.Now().Add(failsafe))
	var b [1]byte
	if _, err := io.ReadFull(server, b[:]); err != nil || b[0] != 0x5a {
		t.Fatalf("%s: peer read %x, %v; want 5a", what, b, err)
	}
}

// wantClosed checks that the cache closed its side of the connection: its
// own writes fail and the peer reads end of file.
func wantClosed(t *testing.T, what string, nc, server net.Conn) {
	t.Helper()
	if _, err := nc.Write([]byte{1}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("%s: write on the cache's side: %v, want net.ErrClosed", what, err)
	}
	_ = server.SetReadDeadline(time.Now().Add(failsafe))
	var b [1]byte
	if n, err := server.Read(b[:]); err != io.EOF {
		t.Fatalf("%s: peer read %d bytes, %v; want EOF", what, n, err)
	}
}

// waitPeerSignal blocks until nc has something to report to a reader: data
// from the peer, or its close.
func waitPeerSignal(t *testing.T, nc net.Conn) {
	t.Helper()
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var perr error
	if err := rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
		for {
			n, perr = unix.Poll(fds, int(failsafe/time.Millisecond))
			if perr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if perr != nil || n != 1 {
		t.Fatalf("poll: %d, %v: the peer's data or close never arrived", n, perr)
	}
}

func TestEndpointCacheReuse(t *testing.T) {
	a := newTestPeer(t)
	var d dialCounter
	c := newEndpointCache(4, d.dial)
	defer c.close()

	ep := mustGet(t, c, a.addr, false)
	sa := a.accept(t)
	wantStats(t, c, 1, 0)
	c.put(ep, true)
	wantStats(t, c, 1, 0)

	ep2 := mustGet(t, c, a.addr, true)
	if ep2 != ep || ep2.nc != ep.nc {
		t.Fatal("a reused endpoint is not the one put back")
	}
	if n := d.count(a.addr); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
	wantUsable(t, "reused", ep2.nc, sa)
	wantStats(t, c, 1, 0)
	c.put(ep2, true)
}

func TestEndpointCacheBoundAcrossPeers(t *testing.T) {
	a, b, cp := newTestPeer(t), newTestPeer(t), newTestPeer(t)
	var d dialCounter
	c := newEndpointCache(2, d.dial)
	defer c.close()

	epA := mustGet(t, c, a.addr, false)
	sA := a.accept(t)
	epB := mustGet(t, c, b.addr, false)
	sB := b.accept(t)
	c.put(epA, true)
	c.put(epB, true) // A is now the least recently used
	wantStats(t, c, 2, 0)

	// A third peer goes over the bound of 2: A's idle connection goes.
	epC := mustGet(t, c, cp.addr, false)
	sC := cp.accept(t)
	wantStats(t, c, 2, 1)
	wantClosed(t, "evicted A", epA.nc, sA)
	wantUsable(t, "idle B", epB.nc, sB)
	wantUsable(t, "new C", epC.nc, sC)

	// B survived and is reused; A was evicted and is dialed again.
	if got := mustGet(t, c, b.addr, true); got.nc != epB.nc {
		t.Fatal("B: reused a different connection")
	}
	epA2 := mustGet(t, c, a.addr, false)
	sA2 := a.accept(t)
	if n := d.count(a.addr); n != 2 {
		t.Fatalf("A dialed %d times, want 2", n)
	}
	// Three busy connections: over the bound, but none can be evicted.
	wantStats(t, c, 3, 1)
	wantUsable(t, "busy A", epA2.nc, sA2)
	wantUsable(t, "busy B", epB.nc, sB)
	wantUsable(t, "busy C", epC.nc, sC)

	// Returning C (the only idle one) brings the count back to the bound.
	c.put(epC, true)
	wantStats(t, c, 2, 2)
	wantClosed(t, "C put over the bound", epC.nc, sC)
	c.put(epB, true)
	c.put(epA2, true)
	wantStats(t, c, 2, 2)
}

func TestEndpointCacheEvictsLeastRecentlyUsed(t *testing.T) {
	a, b, cp := newTestPeer(t), newTestPeer(t), newTestPeer(t)
	var d dialCounter
	c := newEndpointCache(2, d.dial)
	defer c.close()

	epA := mustGet(t, c, a.addr, false)
	sA := a.accept(t)
	epB := mustGet(t, c, b.addr, false)
	sB := b.accept(t)
	c.put(epA, true)
	c.put(epB, true)
	// Use A again: B becomes the least recently used.
	if got := mustGet(t, c, a.addr, true); got != epA {
		t.Fatal("A: reused a different endpoint")
	}
	c.put(epA, true)

	epC := mustGet(t, c, cp.addr, false)
	cp.accept(t)
	wantStats(t, c, 2, 1)
	wantClosed(t, "least recently used B", epB.nc, sB)
	wantUsable(t, "recently used A", epA.nc, sA)
	if got := mustGet(t, c, a.addr, true); got != epA {
		t.Fatal("A: reused a different endpoint after the eviction")
	}
	mustGet(t, c, b.addr, false)
	b.accept(t)
	if n := d.count(b.addr); n != 2 {
		t.Fatalf("B dialed %d times, want 2", n)
	}
	c.put(epC, true)
}

func TestEndpointCacheBusyNotEvicted(t *testing.T) {
	a, b := newTestPeer(t), newTestPeer(t)
	var d dialCounter
	c := newEndpointCache(1, d.dial)
	defer c.close()

	epA := mustGet(t, c, a.addr, false)
	sA := a.accept(t)
	epB := mustGet(t, c, b.addr, false)
	sB := b.accept(t)
	// Two busy connections against a bound of one: both stay open.
	wantStats(t, c, 2, 0)
	wantUsable(t, "busy A", epA.nc, sA)
	wantUsable(t, "busy B", epB.nc, sB)

	c.put(epB, true) // the only idle connection, and one too many
	wantStats(t, c, 1, 1)
	wantClosed(t, "B", epB.nc, sB)
	wantUsable(t, "still busy A", epA.nc, sA)

	c.put(epA, true) // within the bound: kept
	wantStats(t, c, 1, 1)
	if got := mustGet(t, c, a.addr, true); got != epA {
		t.Fatal("A: reused a different endpoint")
	}
	c.put(epA, true)
}

func TestEndpointCacheUnhealthyPut(t *testing.T) {
	a := newTestPeer(t)
	var d dialCounter
	c := newEndpointCache(4, d.dial)
	defer c.close()

	ep := mustGet(t, c, a.addr, false)
	sa := a.accept(t)
	wantStats(t, c, 1, 0)
	c.put(ep, false)
	wantStats(t, c, 0, 0) // closed, and not an eviction
	wantClosed(t, "unhealthy", ep.nc, sa)

	ep2 := mustGet(t, c, a.addr, false)
	a.accept(t)
	if ep2.nc == ep.nc {
		t.Fatal("an unhealthy connection was reused")
	}
	if n := d.count(a.addr); n != 2 {
		t.Fatalf("%d dials, want 2", n)
	}
	c.put(ep2, true)
}

func TestEndpointCacheClose(t *testing.T) {
	a, b := newTestPeer(t), newTestPeer(t)
	var d dialCounter
	c := newEndpointCache(4, d.dial)

	epA := mustGet(t, c, a.addr, false)
	sA := a.accept(t)
	epB := mustGet(t, c, b.addr, false)
	sB := b.accept(t)
	c.put(epA, true)
	wantStats(t, c, 2, 0)

	c.close()
	// The idle connection is closed, the busy one left to its transfer.
	wantStats(t, c, 1, 0)
	wantClosed(t, "idle at close", epA.nc, sA)
	wantUsable(t, "busy at close", epB.nc, sB)

	// Put back after close, even healthy: closed, not cached.
	c.put(epB, true)
	wantStats(t, c, 0, 0)
	wantClosed(t, "put after close", epB.nc, sB)

	if ep, _, err := c.get(context.Background(), a.addr); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("get after close: %v, %v; want net.ErrClosed", ep, err)
	}
	if n := d.count(a.addr); n != 1 {
		t.Fatalf("get after close dialed: %d dials, want 1", n)
	}
	wantStats(t, c, 0, 0)
	c.close() // idempotent
	wantStats(t, c, 0, 0)
}

func TestEndpointCacheDialError(t *testing.T) {
	errDial := errors.New("no route")
	c := newEndpointCache(2, func(context.Context, string) (net.Conn, error) { return nil, errDial })
	defer c.close()
	for range 3 { // a leak of the open count would show after two
		if _, _, err := c.get(context.Background(), "127.0.0.1:1"); !errors.Is(err, errDial) {
			t.Fatalf("get: %v, want %v", err, errDial)
		}
	}
	wantStats(t, c, 0, 0)
}

// An idle connection the peer closed, or on which the peer said something
// (a refusal before closing), is not handed out again.
func TestEndpointCacheIdleDeadNotReused(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill func(server net.Conn) error
	}{
		{"closed", func(s net.Conn) error { return s.Close() }},
		{"half-closed", func(s net.Conn) error { return s.(*net.TCPConn).CloseWrite() }},
		{"spoke", func(s net.Conn) error { _, err := s.Write([]byte("refused")); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestPeer(t)
			var d dialCounter
			c := newEndpointCache(4, d.dial)
			defer c.close()

			ep := mustGet(t, c, a.addr, false)
			sa := a.accept(t)
			c.put(ep, true)
			if err := tc.kill(sa); err != nil {
				t.Fatal(err)
			}
			waitPeerSignal(t, ep.nc)
			if alive(ep.nc) {
				t.Fatal("alive() on a connection the peer closed or spoke on")
			}

			ep2 := mustGet(t, c, a.addr, false)
			sa2 := a.accept(t)
			if ep2.nc == ep.nc {
				t.Fatal("a dead idle connection was reused")
			}
			if _, err := ep.nc.Write([]byte{1}); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("the dead connection was not closed: write: %v", err)
			}
			wantStats(t, c, 1, 0) // the dead one uncounted, not an eviction
			wantUsable(t, "redialed", ep2.nc, sa2)
			c.put(ep2, true)
		})
	}
}

func TestAlive(t *testing.T) {
	a := newTestPeer(t)
	nc, err := net.Dial("tcp", a.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sa := a.accept(t)
	if !alive(nc) {
		t.Fatal("alive() false on a fresh, quiet connection")
	}
	wantUsable(t, "after alive()", nc, sa) // alive() consumed nothing
	if _, err := sa.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	waitPeerSignal(t, nc)
	if alive(nc) {
		t.Fatal("alive() true with unread data from the peer")
	}
	// The peek left the byte in place.
	_ = nc.SetReadDeadline(time.Now().Add(failsafe))
	var b [1]byte
	if _, err := io.ReadFull(nc, b[:]); err != nil || b[0] != 'x' {
		t.Fatalf("read after alive(): %q, %v", b, err)
	}
	_ = nc.SetReadDeadline(time.Time{})
	if !alive(nc) {
		t.Fatal("alive() false once the data is read")
	}
	nc.Close()
	if alive(nc) {
		t.Fatal("alive() true on a connection closed locally")
	}

	// A connection without a descriptor cannot be checked: assumed alive.
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if !alive(p1) {
		t.Fatal("alive() false on a net.Pipe")
	}
}

// Many transfers at once over a few peers: a connection is never handed to
// two at once, and once every connection is back the bound holds.
func TestEndpointCacheConcurrent(t *testing.T) {
	const max, workers, rounds = 3, 8, 40
	peers := []*testPeer{newTestPeer(t), newTestPeer(t), newTestPeer(t), newTestPeer(t)}
	var d dialCounter
	c := newEndpointCache(max, d.dial)

	var mu sync.Mutex
	busy := map[net.Conn]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range rounds {
				p := peers[rng.IntN(len(peers))]
				ep, _, err := c.get(context.Background(), p.addr)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if busy[ep.nc] {
					mu.Unlock()
					errs <- fmt.Errorf("connection to %s handed out twice", ep.addr)
					return
				}
				busy[ep.nc] = true
				mu.Unlock()
				if ep.addr != p.addr {
					errs <- fmt.Errorf("asked for %s, got %s", p.addr, ep.addr)
					return
				}
				mu.Lock()
				delete(busy, ep.nc)
				mu.Unlock()
				c.put(ep, rng.IntN(10) != 0)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	c.mu.Lock()
	idle := c.idle.Len()
	perPeer := 0
	for _, els := range c.byPeer {
		perPeer += len(els)
	}
	c.mu.Unlock()
	open, _ := c.stats()
	if open > max || open != idle || perPeer != idle {
		t.Fatalf("all returned: open %d, idle %d, indexed by peer %d; want open == idle == indexed <= %d", open, idle, perPeer, max)
	}
	c.close()
	wantStats(t, c, 0, mustEvictions(c))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle.Len() != 0 || len(c.byPeer) != 0 {
		t.Fatalf("after close: %d idle, %d peers indexed", c.idle.Len(), len(c.byPeer))
	}
}

func mustEvictions(c *endpointCache) uint64 {
	_, ev := c.stats()
	return ev
}
