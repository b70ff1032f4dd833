package rpc

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/pdcgo/pdc"
)

func TestPoolDialsLazilyAndGrowsUnderLoad(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	p := NewPool(ts.addr, 3, DialOptions{})
	defer p.Close()
	if got := ts.Stats().Clients; got != 0 {
		t.Fatalf("%d connections before first use, want 0", got)
	}
	for range 10 {
		if _, err := p.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := ts.Stats().Clients; got != 1 {
		t.Fatalf("sequential calls opened %d connections, want 1", got)
	}
	// Many calls blocked on the server: the pool opens more connections,
	// up to its size, leaving the first to First.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 * growAt {
		wg.Go(func() { _, _ = p.Call(ctx, methodBlock, nil, nil, nil) })
	}
	for range 3 * growAt {
		<-ts.blocked
	}
	if got := ts.Stats().Clients; got != 2 {
		t.Errorf("under load the pool has %d connections, want 2 (its size, but for the first)", got)
	}
	first, err := p.First(ctx10(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := ts.Stats().Clients; got != 3 {
		t.Errorf("after First the pool has %d connections, want 3", got)
	}
	for range 10 {
		if c, err := p.Get(ctx10(t)); err != nil || c == first {
			t.Fatalf("Get returned the first connection (%v)", err)
		}
	}
	if again, err := p.First(ctx10(t)); err != nil || again != first {
		t.Fatalf("First returned another connection (%v)", err)
	}
	cancel()
	wg.Wait()
}

func TestPoolRedialsBrokenConnection(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	p := NewPool(ts.addr, 1, DialOptions{})
	defer p.Close()
	c1, err := p.Get(ctx10(t))
	if err != nil {
		t.Fatal(err)
	}
	c1.Close()
	c2, err := p.Get(ctx10(t))
	if err != nil {
		t.Fatal(err)
	}
	if c1 == c2 {
		t.Fatal("pool returned a closed connection")
	}
	if _, err := c2.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := p.Get(ctx10(t)); !errors.Is(err, pdc.ErrClosed) {
		t.Fatalf("Get on a closed pool: %v, want ErrClosed", err)
	}
}

func TestIdleConnectionNoticesServerClose(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	ts.Close()
	// Nobody is reading this connection; WaitClosed reads until the close.
	if err := c.WaitClosed(ctx10(t)); err != nil {
		t.Fatal(err)
	}
	if !c.Broken() {
		t.Fatal("connection not broken after the server closed it")
	}
}

// A retired pool (its server restarted elsewhere) fails the calls in
// flight on it, and those made on it later, as unavailable, saying why;
// a closed one as closed.
func TestPoolRetireFailsCallsAsUnavailable(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	p := NewPool(ts.addr, 1, DialOptions{Label: "rank 3 (old)"})
	done := make(chan error, 1)
	go func() {
		_, err := p.Call(context.Background(), methodBlock, nil, nil, nil)
		done <- err
	}()
	<-ts.blocked
	p.Retire("restarted at new")
	for _, err := range []error{<-done, func() error { _, err := p.Get(ctx10(t)); return err }()} {
		if !errors.Is(err, pdc.ErrUnavailable) || errors.Is(err, pdc.ErrClosed) || !strings.Contains(err.Error(), "rank 3 (old): restarted at new") {
			t.Fatalf("call on a retired pool: %v; want ErrUnavailable saying why", err)
		}
	}
	q := NewPool(ts.addr, 1, DialOptions{})
	if _, err := q.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	q.Close()
	if _, err := q.Get(ctx10(t)); !errors.Is(err, pdc.ErrClosed) {
		t.Fatalf("call on a closed pool: %v; want ErrClosed", err)
	}
}
