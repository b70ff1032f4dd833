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
	"github.com/pdcgo/pdc/internal/wire"
)

// Each mode has a transport per direction, and a half of the other
// direction is refused (DYAD_RC_BAD_COMM_MODE).
func TestTransportDirections(t *testing.T) {
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
		if st.Mode() != m || st.Direction() != DirSend || rt.Mode() != m || rt.Direction() != DirRecv {
			t.Fatalf("%s: transports %s/%s and %s/%s", m, st.Mode(), st.Direction(), rt.Mode(), rt.Direction())
		}
		if _, err := st.Prepare(context.Background(), Peer{}, &wire.FetchRequest{}, IntoBuffer(make([]byte, 1))); !errors.Is(err, ErrBadMode) || !errors.Is(err, pdc.ErrInvalid) {
			t.Errorf("%s: a sending transport prepared a receive: %v", m, err)
		}
		if _, err := st.Receive(context.Background(), &Transfer{}, &wire.FetchReply{}); !errors.Is(err, ErrBadMode) {
			t.Errorf("%s: a sending transport received: %v", m, err)
		}
		if err := rt.Send(context.Background(), nil, &wire.FetchRequest{}, Bytes(nil), &wire.FetchReply{}); !errors.Is(err, ErrBadMode) {
			t.Errorf("%s: a receiving transport sent: %v", m, err)
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
