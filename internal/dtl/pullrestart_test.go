package dtl_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/rpc"
)

// serveBulk starts a sender on an RPC server at addr and returns the RPC
// and bulk addresses it took.
func serveBulk(t *testing.T, addr string, secret []byte, res dtl.Resolver) (rpcAddr, bulk string, stop func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := dtl.NewSender(dtl.SenderConfig{Resolve: res, ShmDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer(rpc.ServerConfig{Secret: secret, Logger: log})
	s.Register(srv)
	ln, err := rpc.Listen(addr)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			srv.Close()
			<-done
			s.Close()
		}
	}
	t.Cleanup(stop)
	return rpc.Addr(ln.Addr()), s.BulkAddr(), stop
}

// A sender restarted at the same RPC address listens for pulls at a new
// bulk address, and another process may have taken its old one (another
// server on the node). The receiver pipelines its pull to the bulk address
// it learned before the restart: that pull waited on the process now
// there, which never exposes the payload, until its handle lifetime (30 s)
// or the caller's deadline, and the fetch failed. It must go where the
// answer says.
func TestPipelinedPullAfterTheSenderMovedItsBulkAddress(t *testing.T) {
	secret := []byte("review-secret-0123456789")
	payload := bytes.Repeat([]byte{7}, 200<<10)
	res := func(ctx context.Context, key []byte) (dtl.Source, error) { return dtl.Bytes(payload), nil }
	addr, oldBulk, stop := serveBulk(t, "127.0.0.1:0", secret, res)
	r := recv(t, secret, dtl.ModePull)
	if _, err := r.Fetch(context.Background(), addr, []byte("k"), dtl.IntoWriter(io.Discard)); err != nil {
		t.Fatal(err)
	}
	stop()
	// A restart takes a while: long enough that the idle RPC connection
	// is seen dead before it is reused.
	time.Sleep(50 * time.Millisecond)

	// Another process takes the old bulk address; the sender comes back
	// at its RPC address, with a bulk listener elsewhere.
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	other, err := dtl.NewSender(dtl.SenderConfig{Resolve: res, ShmDir: t.TempDir(), Logger: log, BulkAddr: oldBulk})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, bulk, _ := serveBulk(t, addr, secret, res); bulk == oldBulk {
		t.Fatalf("the restarted sender took its old bulk address %s", bulk)
	}

	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var buf bytes.Buffer
		n, err := r.Fetch(ctx, addr, []byte("k"), dtl.IntoWriter(&buf))
		cancel()
		if err != nil || !bytes.Equal(buf.Bytes(), payload) {
			t.Fatalf("fetch %d from the restarted sender: %d bytes, %v", i, n, err)
		}
	}
}
