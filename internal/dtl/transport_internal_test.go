package dtl

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
)

// Each mode has a half per direction, and neither half is the other
// (DYAD's DYAD_RC_BAD_COMM_MODE is a compile error here). Only shm hands
// payloads over to read in place, and only from this host.
func TestTransportHalves(t *testing.T) {
	s, err := NewSender(SenderConfig{Resolve: func(context.Context, []byte) (Source, error) { return Bytes(nil), nil }, ShmDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := NewReceiver(ReceiverConfig{Mode: ModeStream})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, m := range Modes {
		st, rt := s.transports[m], r.transports[m]
		if st == nil || rt == nil || st.Mode() != m || rt.Mode() != m {
			t.Fatalf("%s: halves %v and %v", m, st, rt)
		}
		if _, ok := st.(RecvTransport); ok {
			t.Errorf("%s: the sending half can also receive", m)
		}
		if _, ok := rt.(SendTransport); ok {
			t.Errorf("%s: the receiving half can also send", m)
		}
		v, ok := rt.(viewer)
		if ok != (m == ModeShm) {
			t.Errorf("%s: can view in place: %v", m, ok)
		}
		if ok && (!v.canView("127.0.0.1:1") || v.canView("192.0.2.1:1")) {
			t.Errorf("%s: views from this host %v, from another %v", m, v.canView("127.0.0.1:1"), v.canView("192.0.2.1:1"))
		}
	}
}

// Regression (second review): a resolver that panicked during a pipelined
// pull left its token pending for ever, and the bulk connection waiting on
// it. The fetch gets an internal error and the token is settled before the
// answer goes out.
func TestPipelinedPullPanicSettles(t *testing.T) {
	s, err := NewSender(SenderConfig{ShmDir: t.TempDir(), Logger: discard(),
		Resolve: func(_ context.Context, key []byte) (Source, error) {
			if string(key) == "boom" {
				panic("resolver bug")
			}
			return Bytes(make([]byte, 1<<20)), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := rpc.NewServer(rpc.ServerConfig{Logger: discard()})
	s.Register(srv)
	ln, err := rpc.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(served) }()
	defer func() { srv.Close(); <-served }()
	r, err := NewReceiver(ReceiverConfig{Mode: ModePull, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addr := rpc.Addr(ln.Addr())
	// The first fetch teaches the receiver the bulk address: the next
	// one is pipelined.
	if _, err := r.Fetch(context.Background(), addr, []byte("ok"), IntoWriter(io.Discard)); err != nil {
		t.Fatal(err)
	}
	_, err = r.Fetch(context.Background(), addr, []byte("boom"), IntoWriter(io.Discard))
	if !errors.Is(err, pdc.ErrInternal) {
		t.Fatalf("panicking resolver: got %v, want pdc.ErrInternal", err)
	}
	s.mu.Lock()
	for _, e := range s.mu.handles {
		if e.pending {
			t.Errorf("a pending token outlived its fetch")
		}
	}
	s.mu.Unlock()
	if _, err := r.Fetch(context.Background(), addr, []byte("ok"), IntoWriter(io.Discard)); err != nil {
		t.Fatalf("after the panic: %v", err)
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// countingConn counts the writes on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A receiver that knows the sender's bulk address pulls along with the
// request, but not for a payload expected to come in the answer: that
// pull would cost a write and a read on the bulk connection at both ends
// of every small staged file.
func TestNoPipelinedPullForASmallPayload(t *testing.T) {
	s, err := NewSender(SenderConfig{ShmDir: t.TempDir(), Logger: discard(),
		Resolve: func(_ context.Context, key []byte) (Source, error) {
			if string(key) == "big" {
				return Bytes(make([]byte, 1<<20)), nil
			}
			return Bytes(make([]byte, 1<<10)), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := rpc.NewServer(rpc.ServerConfig{Logger: discard()})
	s.Register(srv)
	ln, err := rpc.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(served) }()
	defer func() { srv.Close(); <-served }()
	r, err := NewReceiver(ReceiverConfig{Mode: ModePull, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var bulkWrites atomic.Int64
	r.bulkConns.close()
	r.bulkConns = newEndpointCache(4, func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: nc, writes: &bulkWrites}, nil
	})
	ctx := context.Background()
	addr := rpc.Addr(ln.Addr())
	// Teaches the receiver the bulk address.
	if _, err := r.Fetch(ctx, addr, []byte("big"), IntoWriter(io.Discard)); err != nil {
		t.Fatal(err)
	}
	if bulkWrites.Load() == 0 {
		t.Fatal("the large payload was not pulled over a bulk connection")
	}
	bulkWrites.Store(0)
	var got bytes.Buffer
	if n, err := r.Fetch(ctx, addr, []byte("small"), IntoWriter(&got), WithExpectedSize(1<<10)); err != nil || n != 1<<10 || got.Len() != 1<<10 {
		t.Fatalf("small fetch: %d bytes (%d written), %v", n, got.Len(), err)
	}
	if w := bulkWrites.Load(); w != 0 {
		t.Errorf("a payload expected to come in the answer was also pulled: %d writes on the bulk connection", w)
	}
	// A wrong guess still gets the payload.
	got.Reset()
	if n, err := r.Fetch(ctx, addr, []byte("big"), IntoWriter(&got), WithExpectedSize(1<<10)); err != nil || n != 1<<20 || got.Len() != 1<<20 {
		t.Fatalf("large fetch expected small: %d bytes (%d written), %v", n, got.Len(), err)
	}
}
