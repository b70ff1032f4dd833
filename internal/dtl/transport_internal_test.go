package dtl

import (
	"context"
	"errors"
	"io"
	"log/slog"
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
