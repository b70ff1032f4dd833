package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Requests sent without waiting are all answered, each to its own Pending,
// whatever order their replies are collected in, and a scattered reply
// lands in the buffers given at Send.
func TestSendThenWaitInAnyOrder(t *testing.T) {
	for _, network := range []string{"tcp", "unix", "mem"} {
		t.Run(network, func(t *testing.T) {
			ts := startServer(t, network, ServerConfig{})
			c := dial(t, ts.addr, DialOptions{})
			ctx := ctx10(t)
			const n = 32
			ps := make([]*Pending, n)
			into := make([][][]byte, n)
			for i := range n {
				payload := bytes.Repeat([]byte{byte(i)}, 1000+i)
				into[i] = [][]byte{make([]byte, 500), make([]byte, 500+i)}
				p, err := c.Send(ctx, methodEcho, []byte(fmt.Sprint(i)), [][]byte{payload}, into[i])
				if err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				ps[i] = p
			}
			for i := n - 1; i >= 0; i-- {
				r, err := ps[i].Wait(ctx)
				if err != nil {
					t.Fatalf("wait %d: %v", i, err)
				}
				if string(r.Header) != fmt.Sprint(i) || !r.Scattered {
					t.Fatalf("reply %d: header %q scattered %v", i, r.Header, r.Scattered)
				}
				for _, b := range into[i] {
					if !bytes.Equal(b, bytes.Repeat([]byte{byte(i)}, len(b))) {
						t.Fatalf("reply %d: payload not in its buffers", i)
					}
				}
			}
		})
	}
}

// A Pending whose Wait gives up tells the server to drop the request; the
// connection goes on serving.
func TestPendingWaitCanceled(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	p, err := c.Send(context.Background(), methodBlock, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hctx := <-ts.blocked
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Wait(ctx); !errors.Is(err, pdc.ErrCanceled) {
		t.Fatalf("wait: %v, want ErrCanceled", err)
	}
	<-hctx.Done() // the handler was canceled; hangs otherwise
	if r, err := c.Call(ctx10(t), methodEcho, []byte("x"), nil, nil); err != nil || string(r.Header) != "x" {
		t.Fatalf("call after: %q, %v", r.Header, err)
	}
}

// A request sent on a connection the server then closes gets an error from
// Wait, not a hang.
func TestPendingFailsWhenServerCloses(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	p, err := c.Send(context.Background(), methodBlock, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-ts.blocked
	ts.Close()
	if _, err := p.Wait(ctx10(t)); !errors.Is(err, pdc.ErrUnavailable) && !errors.Is(err, pdc.ErrClosed) {
		t.Fatalf("wait: %v, want ErrUnavailable", err)
	}
}

// Poll gives up at its context's end without giving up the request: a
// later Poll gets the reply.
func TestPollKeepsTheRequest(t *testing.T) {
	const methodGate wire.Method = 120
	gate := make(chan struct{})
	ts := startServer(t, "mem", ServerConfig{}, func(ts *testServer) {
		ts.Handle(methodGate, func(ctx context.Context, req *Request) (*Response, error) {
			<-gate
			return &Response{Header: []byte("late")}, nil
		})
	})
	c := dial(t, ts.addr, DialOptions{})
	p, err := c.Send(ctx10(t), methodGate, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Poll(ctx); !errors.Is(err, pdc.ErrCanceled) {
		t.Fatalf("poll with its context ended: %v, want ErrCanceled", err)
	}
	close(gate)
	r, err := p.Poll(ctx10(t))
	if err != nil || string(r.Header) != "late" {
		t.Fatalf("poll after: %q, %v", r.Header, err)
	}
}
