package rpc

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Regression tests for the findings of the connection review
// (docs/design/0003). Hangs are caught by generous deadlines, not timed.

func TestInlineReplyIsNotHeldBackByTheNextFrame(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	for _, next := range []string{"blocking request", "cancel"} {
		t.Run(next, func(t *testing.T) {
			nc, r := rawConn(t, ts.addr)
			ping := wire.Frame{Method: methodInline, ID: 1}
			var second wire.Frame
			if next == "cancel" {
				second = wire.Frame{Flags: wire.FlagCancel, Method: methodBlock, ID: 99}
			} else {
				second = wire.Frame{Method: methodBlock, ID: 2}
			}
			// Both frames in one write, so the server reads them together.
			if _, err := nc.Write(append(ping.Append(nil), second.Append(nil)...)); err != nil {
				t.Fatal(err)
			}
			f, err := r.next()
			if err != nil || f.ID != 1 {
				t.Fatalf("inline reply: %+v, %v", f, err)
			}
		})
	}
}

func TestLeftoverInterruptDoesNotBreakIdleConnection(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	c.interrupt()       // as a caller that gave up after its reply came would
	c.lastRead.Store(0) // idle long enough for Broken to look at the socket
	if c.Broken() {
		t.Fatal("a healthy idle connection was reported broken")
	}
	if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatalf("call after a leftover interrupt: %v", err)
	}
}

func TestBrokenSeesCloseOfIdleConnection(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	ts.Close()
	// Nobody reads this connection; Broken must find the close itself.
	if err := c.WaitClosed(ctx10(t)); err != nil {
		t.Fatal(err)
	}
	c.lastRead.Store(0)
	if !c.Broken() {
		t.Fatal("Broken() = false on a connection the server closed")
	}
}

func TestBusyServerRefusesInsteadOfStopping(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{MaxInFlight: 2})
	c := dial(t, ts.addr, DialOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _, _ = c.Call(ctx, methodBlock, nil, nil, nil) })
	}
	h1, h2 := <-ts.blocked, <-ts.blocked
	_, err := c.Call(ctx10(t), methodEcho, nil, nil, nil)
	if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("call over MaxInFlight: got %v, want ErrUnavailable saying busy", err)
	}
	// The server kept reading: the cancellations reach the handlers.
	cancel()
	<-h1.Done()
	<-h2.Done()
	wg.Wait()
}

func TestUnauthenticatedFrameCannotAllocate(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	r := newFrameReader(nc, wire.Limits{})
	if _, err := r.next(); err != nil {
		t.Fatal(err)
	}
	_ = r.discard(uint64(r.lastHeaderLen()))
	big := wire.Frame{Method: wire.MethodAuth, PayloadLen: 1 << 30}
	if _, err := nc.Write(big.Append(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.next(); !errors.Is(err, io.EOF) && !isConnReset(err) {
		t.Fatalf("got %v, want the connection closed", err)
	}
	if !strings.Contains(ts.logs.String(), "auth frame of") {
		t.Fatalf("not logged:\n%s", ts.logs.String())
	}
}

func TestShutdownWhileRequestsArrive(t *testing.T) {
	// Run under -race: handler starts must be ordered against Shutdown.
	for range 20 {
		ts := startServer(t, "mem", ServerConfig{})
		c := dial(t, ts.addr, DialOptions{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
						return
					}
				}
			})
		}
		if err := ts.Shutdown(ctx10(t)); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
}

func TestPoolCloseEndsDialInProgress(t *testing.T) {
	// A listener that accepts and never says hello.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			accepted <- nc
		}
	}()
	p := NewPool(ln.Addr().String(), 1, DialOptions{HandshakeTimeout: time.Hour})
	errc := make(chan error, 1)
	go func() {
		_, err := p.Get(context.Background())
		errc <- err
	}()
	nc := <-accepted // the dial is in its handshake
	defer nc.Close()
	p.Close()
	if err := <-errc; !errors.Is(err, pdc.ErrClosed) {
		t.Fatalf("Get during Close: %v, want ErrClosed", err)
	}
}
