package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// The client's tests again, every wait a blocking one (WithBlockingWait):
// replies, errors, deadlines, cancellations, out-of-order replies,
// servers that close, idle connections, pools.
func TestBlockingWait(t *testing.T) {
	blockingAlways.Store(true)
	defer blockingAlways.Store(false)
	for name, test := range map[string]func(*testing.T){
		"Echo": TestEcho, "ErrorsCrossTheWire": TestErrorsCrossTheWire, "DeadlineReachesServer": TestDeadlineReachesServer,
		"CancelReachesServer": TestCancelReachesServer, "TimeoutReachesServer": TestTimeoutReachesServer,
		"OutOfOrderResponses": TestOutOfOrderResponses, "ServerCloseFailsCalls": TestServerCloseFailsCalls,
		"CallIntoScatters": TestCallIntoScatters, "SendThenWaitInAnyOrder": TestSendThenWaitInAnyOrder,
		"PendingWaitCanceled": TestPendingWaitCanceled, "PendingFailsWhenServerCloses": TestPendingFailsWhenServerCloses,
		"PollKeepsTheRequest": TestPollKeepsTheRequest, "PoolRedialsBrokenConnection": TestPoolRedialsBrokenConnection,
		"IdleConnectionNoticesServerClose": TestIdleConnectionNoticesServerClose, "PoolRetireFailsCallsAsUnavailable": TestPoolRetireFailsCallsAsUnavailable,
		"OversizedReplyFailsOnlyItsCall": TestOversizedReplyFailsOnlyItsCall, "InlineReplyIsNotHeldBackByTheNextFrame": TestInlineReplyIsNotHeldBackByTheNextFrame,
		"LeftoverInterruptDoesNotBreakIdleConnection": TestLeftoverInterruptDoesNotBreakIdleConnection,
		"BrokenSeesCloseOfIdleConnection":             TestBrokenSeesCloseOfIdleConnection, "PoolCloseEndsDialInProgress": TestPoolCloseEndsDialInProgress,
	} {
		t.Run(name, test)
	}
}

// A caller blocked in poll(2) for a reply that does not come: closing the
// connection, or its context ending, gets it out (a close waits for a
// poller holding the socket, so the poller must be woken first), and on
// a Unix socket as on TCP.
func TestBlockingWaitEnds(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			ts := startServer(t, network, ServerConfig{})
			ctx := WithBlockingWait(context.Background())

			c := dial(t, ts.addr, DialOptions{})
			if _, err := c.Call(ctx, methodEcho, []byte("x"), nil, nil); err != nil {
				t.Fatal(err)
			}
			if !c.wk.has {
				t.Fatal("no eventfd: the call did not wait in poll(2)")
			}
			errc := make(chan error, 1)
			go func() {
				_, err := c.Call(ctx, methodBlock, nil, nil, nil)
				errc <- err
			}()
			<-ts.blocked
			time.Sleep(20 * time.Millisecond) // let it block in poll(2); the test holds either way
			closed := make(chan struct{})
			go func() {
				c.Close()
				close(closed)
			}()
			select {
			case err := <-errc:
				if !errors.Is(err, pdc.ErrClosed) && !errors.Is(err, pdc.ErrUnavailable) {
					t.Fatalf("call on a closed connection: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a caller blocked in poll(2) was not woken by Close")
			}
			<-closed
			c.wk.mu.Lock()
			open := c.wk.has
			c.wk.mu.Unlock()
			if open {
				t.Error("the eventfd is still open after the connection closed")
			}

			c2 := dial(t, ts.addr, DialOptions{})
			cctx, cancel := context.WithCancel(ctx)
			go func() {
				<-ts.blocked
				time.Sleep(20 * time.Millisecond)
				cancel()
			}()
			if _, err := c2.Call(cctx, methodBlock, nil, nil, nil); !errors.Is(err, pdc.ErrCanceled) {
				t.Fatalf("canceled call: %v", err)
			}
			// The connection goes on.
			if _, err := c2.Call(ctx, methodEcho, []byte("y"), nil, nil); err != nil {
				t.Fatal(err)
			}
			dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer dcancel()
			if _, err := c2.Call(dctx, methodBlock, nil, nil, nil); !errors.Is(err, pdc.ErrTimeout) {
				t.Fatalf("call past its deadline: %v", err)
			}
			c2.Close()
		})
	}
}

// heldProxy forwards one connection to a server, passing on what the
// server sends only up to a limit the test sets: a reply cut off
// mid-payload for as long as the test likes.
type heldProxy struct {
	addr string

	mu     sync.Mutex
	cond   *sync.Cond
	limit  int64 // bytes from the server that may pass in all; < 0: any
	passed int64
	closed bool
}

func startHeldProxy(t *testing.T, server string) *heldProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &heldProxy{addr: ln.Addr().String(), limit: -1}
	p.cond = sync.NewCond(&p.mu)
	var wg sync.WaitGroup
	conns := make(chan net.Conn, 2)
	wg.Go(func() {
		cn, err := ln.Accept()
		if err != nil {
			return
		}
		conns <- cn
		sn, err := net.Dial("tcp", server)
		if err != nil {
			cn.Close()
			return
		}
		conns <- sn
		wg.Go(func() { _, _ = io.Copy(sn, cn); sn.Close() })
		buf := make([]byte, 32<<10)
		for {
			n, err := sn.Read(buf)
			for off := 0; off < n; {
				p.mu.Lock()
				for !p.closed && p.limit >= 0 && p.passed >= p.limit {
					p.cond.Wait()
				}
				k := int64(n - off)
				if p.limit >= 0 {
					k = min(k, p.limit-p.passed)
				}
				p.passed += k
				closed := p.closed
				p.mu.Unlock()
				if closed {
					cn.Close()
					return
				}
				if _, err := cn.Write(buf[off : off+int(k)]); err != nil {
					return
				}
				off += int(k)
			}
			if err != nil {
				cn.Close()
				return
			}
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		p.closed = true
		p.cond.Broadcast()
		p.mu.Unlock()
		for len(conns) > 0 {
			(<-conns).Close()
		}
		wg.Wait()
		for len(conns) > 0 {
			(<-conns).Close()
		}
	})
	return p
}

// hold lets n more bytes from the server through, then holds the rest.
func (p *heldProxy) hold(n int64) {
	p.mu.Lock()
	p.limit = p.passed + n
	p.mu.Unlock()
}

// release lets everything through.
func (p *heldProxy) release() {
	p.mu.Lock()
	p.limit = -1
	p.cond.Broadcast()
	p.mu.Unlock()
}

// A caller that gives up mid-payload leaves the rest of its reply to be
// skipped by the next reader, with the receive mark still raised for the
// payload. Skipped a buffer at a time, the last of it is less than the
// mark: a wait in poll(2) for the mark would wait for bytes that never
// come, and the next call would never get its reply.
func TestSkipAfterAbandonedPayload(t *testing.T) {
	const methodBig wire.Method = 140
	big := make([]byte, 1<<20+300<<10)
	for _, blocking := range []bool{false, true} {
		t.Run(fmt.Sprintf("blocking=%v", blocking), func(t *testing.T) {
			started := make(chan struct{}, 1)
			ts := startServer(t, "tcp", ServerConfig{}, func(ts *testServer) {
				ts.Handle(methodBig, func(ctx context.Context, req *Request) (*Response, error) {
					started <- struct{}{}
					return &Response{Payload: [][]byte{big}}, nil
				})
			})
			px := startHeldProxy(t, ts.addr)
			c := dial(t, px.addr, DialOptions{})
			ctx := ctx10(t)
			if blocking {
				ctx = WithBlockingWait(ctx)
			}
			px.hold(256 << 10)
			// Once its reply is claimed, the caller reads its payload, of
			// which the proxy holds back the most.
			giveUp(t, ctx, "call", func(ctx context.Context) error {
				_, err := c.Call(ctx, methodBig, nil, nil, nil)
				return err
			}, func() {
				<-started
				awaitClaimed(c, 0)
			})
			px.release()
			if rep, err := c.Call(ctx, methodEcho, []byte("after"), nil, nil); err != nil || string(rep.Header) != "after" {
				t.Fatalf("the call after a reply given up mid-payload: %q, %v", rep.Header, err)
			}
		})
	}
}

// A wake that no poll took (an interrupt that came while the reader was
// between polls, or with nobody reading) must not stay in the eventfd:
// the next poll would return at once for nothing, and the read after it
// park on the runtime's poller, the hand-off the blocking wait avoids.
func TestWakeNoPollTookIsNotLeftOver(t *testing.T) {
	var w waker
	defer w.close()
	if _, ok := w.acquire(); !ok {
		t.Fatal("no eventfd: eventfd(2) failed")
	}
	w.release()
	w.wake()
	fd, ok := w.acquire()
	if !ok {
		t.Fatal("no eventfd")
	}
	defer w.release()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 0); err != nil || n != 0 {
		t.Fatalf("a poll after a wake nobody took: %d ready (%v), want none", n, err)
	}
}

// giveUp runs call under a context of its own, waits for until, ends
// the context, and checks that the call gave up.
func giveUp(t *testing.T, ctx context.Context, what string, call func(context.Context) error, until func()) {
	t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- call(cctx) }()
	until()
	cancel()
	if err := <-errc; !errors.Is(err, pdc.ErrCanceled) {
		t.Fatalf("%s given up: %v", what, err)
	}
}

// awaitClaimed returns once a reader has claimed the reply to request id
// (0: every request's): it is no longer pending.
func awaitClaimed(c *Conn, id uint64) {
	for {
		c.mu.Lock()
		_, pending := c.mu.pending[id]
		claimed := !pending
		if id == 0 {
			claimed = len(c.mu.pending) == 0
		}
		c.mu.Unlock()
		if claimed {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// checkStream runs a stream of 3 chunks of 100 bytes on c and checks it
// came whole.
func checkStream(t *testing.T, ctx context.Context, c *Conn, what string) {
	t.Helper()
	var chunks int
	rep, err := c.CallStream(ctx, methodStream, streamHdr(3, 100), nil, func(hdr []byte, r io.Reader, n uint64) error {
		chunks++
		_, err := io.Copy(io.Discard, r)
		return err
	})
	if err != nil || string(rep.Header) != "end" || chunks != 3 {
		t.Fatalf("%s: %d chunks, %q, %v", what, chunks, rep.Header, err)
	}
}

// A reader in poll(2) arms the interrupt that ends its wait with its
// context only once its reply is late (lazyInterrupt): a call answered at
// once arms none, and a context that ends before or after that, by a
// cancel or by its deadline, still ends the wait.
func TestBlockingWaitLazyInterrupt(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	base := WithBlockingWait(context.Background())
	if r, err := c.Call(base, methodEcho, []byte("x"), nil, nil); err != nil || string(r.Header) != "x" {
		t.Fatalf("echo: %q, %v", r.Header, err)
	}
	if c.interruptStop != nil || c.interruptFired != nil || c.pollCtx != nil {
		t.Fatal("the reader's interrupt outlived its call")
	}
	for _, noEventfd := range []bool{false, true} {
		t.Run(fmt.Sprintf("eventfd fails=%v", noEventfd), func(t *testing.T) {
			eventfdFails.Store(noEventfd)
			defer eventfdFails.Store(false)
			lazyInterruptCases(t, ts, dial(t, ts.addr, DialOptions{}), base)
		})
	}
	for len(ts.blocked) > 0 {
		<-ts.blocked
	}
}

// lazyInterruptCases are TestBlockingWaitLazyInterrupt's calls on c.
func lazyInterruptCases(t *testing.T, ts *testServer, c *Conn, base context.Context) {
	for _, tc := range []struct {
		name   string
		after  time.Duration // cancel after it; 0: a deadline of within instead
		within time.Duration
		want   error
	}{
		{name: "cancel at once", want: pdc.ErrCanceled},
		{name: "cancel before the interrupt is armed", after: lazyInterrupt / 4, want: pdc.ErrCanceled},
		{name: "cancel after", after: 20 * lazyInterrupt, want: pdc.ErrCanceled},
		{name: "deadline before the interrupt is armed", within: lazyInterrupt / 2, want: pdc.ErrTimeout},
		{name: "deadline after", within: 30 * lazyInterrupt, want: pdc.ErrTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(base)
			if tc.within > 0 {
				ctx, cancel = context.WithTimeout(base, tc.within)
			}
			defer cancel()
			errc := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := c.Call(ctx, methodBlock, nil, nil, nil)
				errc <- err
			}()
			if tc.within == 0 {
				if tc.after == 0 {
					<-ts.blocked
				} else {
					time.Sleep(tc.after)
				}
				cancel()
			}
			select {
			case err := <-errc:
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the wait did not end with its context (%v after the call)", time.Since(start))
			}
			if r, err := c.Call(base, methodEcho, []byte("after"), nil, nil); err != nil || string(r.Header) != "after" {
				t.Fatalf("the call after: %q, %v", r.Header, err)
			}
			if c.interruptStop != nil || c.pollCtx != nil {
				t.Fatal("the reader's interrupt outlived its call")
			}
		})
	}
}
