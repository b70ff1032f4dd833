package rpc

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// cutProxy forwards connections to a server and, when cut, closes its
// clients' ends only: the clients see their connections fail while the
// server, as behind a partition, still has its ends open and what it
// was handling on them.
type cutProxy struct {
	addr string
	mu   sync.Mutex
	ends []net.Conn // client ends
	all  []net.Conn
}

func startCutProxy(t *testing.T, server string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			cn, err := ln.Accept()
			if err != nil {
				return
			}
			sn, err := net.Dial("tcp", server)
			if err != nil {
				cn.Close()
				continue
			}
			p.mu.Lock()
			p.ends = append(p.ends, cn)
			p.all = append(p.all, cn, sn)
			p.mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(sn, cn) })
			wg.Go(func() { _, _ = io.Copy(cn, sn) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.all {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	return p
}

// cut closes every client end made so far.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.ends {
		c.Close()
	}
	p.ends = nil
}

// A pool's new connection, dialed after the last one failed on the
// client's side only, ends the old one on the server first: a handler
// still running there for the old connection is over before the new
// connection is accepted, so nothing sent on the old one can be handled
// after what is sent on the new.
func TestNewConnectionFencesTheFailedOne(t *testing.T) {
	const methodHeld = 150
	returned := make(chan struct{})
	ts := startServer(t, "tcp", ServerConfig{}, func(ts *testServer) {
		ts.Handle(methodHeld, func(ctx context.Context, req *Request) (*Response, error) {
			ts.blocked <- ctx
			<-ctx.Done()
			close(returned)
			return nil, ctx.Err()
		})
	})
	p := startCutProxy(t, ts.addr)
	pool := NewPool(p.addr, 1, DialOptions{ClientName: "fence-test"})
	defer pool.Close()
	ctx := ctx10(t)
	c1, err := pool.First(ctx)
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() {
		_, err := c1.Call(ctx, methodHeld, nil, nil, nil)
		failed <- err
	}()
	held := <-ts.blocked
	p.cut()
	if err := <-failed; err == nil {
		t.Fatal("the call on the cut connection succeeded")
	}
	if held.Err() != nil {
		t.Fatal("the server ended the old connection's handler before any new connection came")
	}
	c2, err := pool.First(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c2 == c1 {
		t.Fatal("the pool kept the failed connection")
	}
	select {
	case <-returned:
	default:
		t.Fatal("the new connection was accepted while the old one's handler still ran")
	}
	if !c2.Fences(c1) {
		t.Fatal("the new connection does not report the old one fenced")
	}
	if _, err := c2.Call(ctx, methodEcho, []byte("after"), nil, nil); err != nil {
		t.Fatal(err)
	}
}

// A connection of another client is not ended by a handshake naming it.
func TestFenceOnlyOwnConnections(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	ctx := ctx10(t)
	other := dial(t, ts.addr, DialOptions{ClientName: "other"})
	defer other.Close()
	mine, err := Dial(ctx, ts.addr, DialOptions{ClientName: "mine", supersede: []*Conn{other}})
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	if _, err := other.Call(ctx, methodEcho, []byte("still"), nil, nil); err != nil {
		t.Fatalf("another client's connection named in a handshake: %v", err)
	}
	if mine.Fences(nil) {
		t.Fatal("Fences(nil) is true")
	}
}

// A handler of the old connection that does not end when its connection
// is closed (stuck in I/O, say) does not keep the client from
// connecting: within the handshake's time the server gives up on the
// fence and accepts the new connection, unfenced, so that the client
// can go on with what does not need the fence.
func TestUnendingHandlerLeavesTheNewConnectionUnfenced(t *testing.T) {
	const methodStuck = 151
	const handshake = 2 * time.Second
	held, release := make(chan struct{}), make(chan struct{})
	ts := startServer(t, "tcp", ServerConfig{HandshakeTimeout: handshake}, func(ts *testServer) {
		ts.Handle(methodStuck, func(ctx context.Context, req *Request) (*Response, error) {
			close(held)
			<-release // not ctx: it does not end with its connection
			return nil, nil
		})
	})
	t.Cleanup(func() { close(release) }) // before the server's cleanup waits for it
	p := startCutProxy(t, ts.addr)
	pool := NewPool(p.addr, 1, DialOptions{ClientName: "fence-test", HandshakeTimeout: handshake})
	defer pool.Close()
	ctx := ctx10(t)
	c1, err := pool.First(ctx)
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() {
		_, err := c1.Call(ctx, methodStuck, nil, nil, nil)
		failed <- err
	}()
	<-held
	p.cut()
	if err := <-failed; err == nil {
		t.Fatal("the call on the cut connection succeeded")
	}
	c2, err := pool.First(ctx)
	if err != nil {
		t.Fatalf("no new connection while the old one's handler runs on: %v", err)
	}
	if c2.Fences(c1) {
		t.Fatal("the new connection reports fenced an old one whose handler still runs")
	}
	if _, err := c2.Call(ctx, methodEcho, []byte("after"), nil, nil); err != nil {
		t.Fatal(err)
	}
}
