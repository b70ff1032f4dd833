package rpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
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
