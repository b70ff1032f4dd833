package dtl_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/rpc"
)

// inproc starts a sender with resolver res on an RPC server in this process.
func inproc(t *testing.T, res dtl.Resolver) (addr string, secret []byte) {
	return inprocCfg(t, dtl.SenderConfig{Resolve: res})
}

func inprocCfg(t *testing.T, cfg dtl.SenderConfig) (addr string, secret []byte) {
	t.Helper()
	secret = []byte("review-secret-0123456789")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.ShmDir, cfg.Logger = t.TempDir(), log
	s, err := dtl.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer(rpc.ServerConfig{Secret: secret, Logger: log})
	s.Register(srv)
	ln, err := rpc.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done; s.Close() })
	return rpc.Addr(ln.Addr()), secret
}

func recv(t *testing.T, secret []byte, m dtl.Mode) *dtl.Receiver {
	r, err := dtl.NewReceiver(dtl.ReceiverConfig{Mode: m, Secret: secret, ClientName: "review",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Source.Release promises "after the send", but an eager buffer answer is
// released before the RPC server writes it: a sender that recycles its
// buffer in Release ships whatever the buffer holds by then.
func TestRegressEagerReleaseBeforeSend(t *testing.T) {
	payload := bytes.Repeat([]byte{0xAB}, 1000)
	addr, secret := inproc(t, func(ctx context.Context, key []byte) (dtl.Source, error) {
		b := append([]byte(nil), payload...)
		return dtl.Source{Buf: b, Release: func() { clear(b) }}, nil // recycle
	})
	for _, m := range dtl.Modes {
		r := recv(t, secret, m)
		got := make([]byte, len(payload))
		if _, err := r.Fetch(context.Background(), addr, []byte("k"), dtl.IntoBuffer(got)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Errorf("%s: payload released before it was sent: got % x...", m, got[:8])
		}
	}
}

// A zero-length buffer sink tells the sender "no bound" (Cap 0), and the
// eager answer is read into the buffer's capacity: Fetch fails with
// ErrBadBuffer yet has written past len(buf) into the caller's memory.
func TestRegressEagerWritesPastLen(t *testing.T) {
	addr, secret := inproc(t, func(ctx context.Context, key []byte) (dtl.Source, error) {
		return dtl.Bytes(bytes.Repeat([]byte{0xAB}, 100)), nil
	})
	r := recv(t, secret, dtl.ModePull) // any mode but stream: Call reads the answer into the sink
	backing := make([]byte, 4096)
	_, err := r.Fetch(context.Background(), addr, []byte("k"), dtl.IntoBuffer(backing[:0]))
	t.Logf("fetch: %v", err)
	if backing[0] != 0 {
		t.Errorf("Fetch wrote into the caller's memory past len(buf) (err %v): % x", err, backing[:4])
	}
}

// slowWriter takes the first write, then blocks until ctx ends.
type slowWriter struct {
	ctx     context.Context
	started chan struct{}
	n       int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		close(w.started)
	}
	w.n += len(p)
	<-w.ctx.Done()
	return 0, w.ctx.Err()
}

// Regression (review): without an acknowledgement the sender returned a push connection
// to its cache as soon as the bytes are in the socket. The next push to the
// same receiver queues behind the first; if the first one then fails on
// the receiver (its fetch canceled, its sink failing), the receiver closes
// the connection and the second push's bytes vanish, while the sender has
// already answered "done". The second fetch waits for its registration
// until its deadline (forever without one).
func TestRegressPushLostBehindFailedPush(t *testing.T) {
	addr, secret := inproc(t, func(ctx context.Context, key []byte) (dtl.Source, error) {
		return dtl.Bytes(make([]byte, 100<<10)), nil
	})
	r := recv(t, secret, dtl.ModePush)
	// Warm up: one push connection in the sender's cache.
	if _, err := r.Fetch(context.Background(), addr, []byte("warm"), dtl.IntoWriter(io.Discard)); err != nil {
		t.Fatal(err)
	}
	actx, cancelA := context.WithCancel(context.Background())
	w := &slowWriter{ctx: actx, started: make(chan struct{})}
	aDone := make(chan error, 1)
	go func() {
		_, err := r.Fetch(actx, addr, []byte("a"), dtl.IntoWriter(w))
		aDone <- err
	}()
	<-w.started // A's push is under way and will fail
	bctx, cancelB := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelB()
	bDone := make(chan error, 1)
	go func() {
		_, err := r.Fetch(bctx, addr, []byte("b"), dtl.IntoWriter(io.Discard))
		bDone <- err
	}()
	cancelA()
	if err := <-aDone; !errors.Is(err, context.Canceled) {
		t.Errorf("A: got %v, want context.Canceled", err)
	}
	if err := <-bDone; err != nil {
		t.Errorf("B, pushed while A failed on the same receiver: %v", err)
	}
}

// tickWriter is a slow but steady consumer: it sleeps per write.
type tickWriter struct{ d time.Duration }

func (w tickWriter) Write(p []byte) (int, error) { time.Sleep(w.d); return len(p), nil }

// Stall is documented as bounding a transfer "that makes no progress", but
// sendPulled puts the whole transfer under one WithTimeout(Stall): a pull
// that keeps moving but takes longer than Stall is cut off.
func TestRegressPullStallIsTotalTimeout(t *testing.T) {
	addr, secret := inprocCfg(t, dtl.SenderConfig{Stall: time.Second,
		Resolve: func(ctx context.Context, key []byte) (dtl.Source, error) {
			return dtl.Bytes(make([]byte, 8<<20)), nil
		}})
	r := recv(t, secret, dtl.ModePull)
	start := time.Now()
	// 8 MiB in 32 KiB writes, 15 ms each: about 4 s, always moving.
	n, err := r.Fetch(context.Background(), addr, []byte("k"), dtl.IntoWriter(tickWriter{15 * time.Millisecond}))
	t.Logf("got %d bytes in %v: %v", n, time.Since(start), err)
	if err != nil {
		t.Errorf("a steadily moving pull was cut off: %v", err)
	}
}

// A pipelined pull waits on the sender for at most HandleTTL from the time
// it arrives; a Resolve slower than that makes the fetch fail with
// ErrNotFound although the payload was exposed (and is left to expire).
func TestRegressPipelinedPullSlowResolve(t *testing.T) {
	addr, secret := inprocCfg(t, dtl.SenderConfig{HandleTTL: 500 * time.Millisecond,
		Resolve: func(ctx context.Context, key []byte) (dtl.Source, error) {
			if string(key) == "slow" {
				time.Sleep(time.Second)
			}
			return dtl.Bytes(make([]byte, 1<<20)), nil
		}})
	r := recv(t, secret, dtl.ModePull)
	// The first pull teaches the receiver the bulk address.
	if _, err := r.Fetch(context.Background(), addr, []byte("fast"), dtl.IntoWriter(io.Discard)); err != nil {
		t.Fatal(err)
	}
	_, err := r.Fetch(context.Background(), addr, []byte("slow"), dtl.IntoWriter(io.Discard))
	if err != nil {
		t.Errorf("pipelined pull with a resolve slower than HandleTTL: %v", err)
	}
}

// blockWriter takes nothing until ctx ends.
type blockWriter struct{ ctx context.Context }

func (w blockWriter) Write(p []byte) (int, error) { <-w.ctx.Done(); return 0, w.ctx.Err() }

// A deadline that passes during the side-channel transfer is reported as
// context.DeadlineExceeded (push) or as ErrPeerFailed (pipelined pull),
// not as dtl.ErrTimeout as in the RPC phase.
func TestRegressTimeoutClassification(t *testing.T) {
	addr, secret := inproc(t, func(ctx context.Context, key []byte) (dtl.Source, error) {
		return dtl.Bytes(make([]byte, 16<<20)), nil
	})
	for _, m := range []dtl.Mode{dtl.ModeStream, dtl.ModePull, dtl.ModePush} {
		r := recv(t, secret, m)
		for i := range 2 { // the second pull is pipelined
			c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			_, err := r.Fetch(c, addr, []byte("k"), dtl.IntoWriter(blockWriter{c}))
			cancel()
			if !errors.Is(err, dtl.ErrTimeout) || errors.Is(err, dtl.ErrPeerFailed) {
				t.Errorf("%s #%d: deadline passed mid-transfer: ErrTimeout %v, ErrPeerFailed %v: %v", m, i,
					errors.Is(err, dtl.ErrTimeout), errors.Is(err, dtl.ErrPeerFailed), err)
			}
		}
	}
}

// FetchView in shm mode maps the sender's own file. The sender (or anyone
// writing that file) can shrink it afterwards, and the receiver's next
// read of View.Bytes() faults (SIGBUS: a fatal crash outside this test,
// which turns it into a panic with SetPanicOnFault).
func TestRegressShmViewTruncated(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	name := f.Name()
	addr, secret := inproc(t, func(ctx context.Context, key []byte) (dtl.Source, error) {
		src := dtl.FileSection(f, 0, 1<<20)
		src.Release = func() { f.Close() }
		return src, nil
	})
	r := recv(t, secret, dtl.ModeShm)
	v, err := r.FetchView(context.Background(), addr, []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := os.Truncate(name, 0); err != nil { // e.g. the object is rewritten
		t.Fatal(err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("reading a View after the sender's file shrank faults: %v", p)
		}
	}()
	var sum byte
	for _, b := range v.Bytes() {
		sum += b
	}
	t.Log(sum)
}

// holdWriter lets its first bytes through, then holds the next write until
// released.
type holdWriter struct {
	started, release chan struct{}
	n                int
}

func (w *holdWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		close(w.started)
	} else if w.n > 0 {
		<-w.release
	}
	w.n += len(p)
	return len(p), nil
}

// Regression (second review): Close left stream and pull fetches under way
// running to their end. They now fail with pdc.ErrClosed. (Push closes its
// connections at Close and waits for a push writing into a sink.)
func TestRegressReceiverCloseEndsFetches(t *testing.T) {
	addr, secret := inproc(t, func(ctx context.Context, key []byte) (dtl.Source, error) {
		return dtl.Bytes(make([]byte, 64<<20)), nil
	})
	for _, m := range []dtl.Mode{dtl.ModeStream, dtl.ModePull} {
		t.Run(m.String(), func(t *testing.T) { regressReceiverClose(t, addr, secret, m) })
	}
}

func regressReceiverClose(t *testing.T, addr string, secret []byte, m dtl.Mode) {
	{
		r := recv(t, secret, m)
		w := &holdWriter{started: make(chan struct{}), release: make(chan struct{})}
		done := make(chan error, 1)
		go func() {
			_, err := r.Fetch(context.Background(), addr, []byte("k"), dtl.IntoWriter(w))
			done <- err
		}()
		<-w.started
		r.Close()
		close(w.release)
		if err := <-done; !errors.Is(err, pdc.ErrClosed) && !errors.Is(err, dtl.ErrPeerFailed) {
			t.Errorf("%s: a fetch under way when its receiver closed: %v, want pdc.ErrClosed", m, err)
		}
	}
}

// serveAt runs a sender on an RPC server listening on addr until stop.
func serveAt(t *testing.T, addr string, secret []byte, res dtl.Resolver) (bound string, stop func()) {
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
	var once sync.Once
	stop = func() { once.Do(func() { srv.Close(); <-done; s.Close() }) }
	t.Cleanup(stop)
	return rpc.Addr(ln.Addr()), stop
}

// A sender restarted at the same address: the receiver's idle RPC
// connections to the one that went are dead. A fetch must not take one
// and fail against a sender that is up; nor must the next one.
func TestRegressReceiverReusesDeadConnection(t *testing.T) {
	secret := []byte("review-secret-0123456789")
	res := func(ctx context.Context, key []byte) (dtl.Source, error) {
		return dtl.Bytes(bytes.Repeat([]byte{7}, 200<<10)), nil
	}
	for _, m := range dtl.Modes {
		t.Run(m.String(), func(t *testing.T) {
			addr, stop := serveAt(t, "127.0.0.1:0", secret, res)
			r := recv(t, secret, m)
			// Several fetches at once: several idle connections to it.
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					if _, err := r.Fetch(context.Background(), addr, []byte("k"), dtl.IntoWriter(io.Discard)); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			stop()
			// A restart takes a while: long enough that an idle
			// connection is checked before it is reused.
			time.Sleep(50 * time.Millisecond)
			serveAt(t, addr, secret, res)
			for i := range 3 {
				var buf bytes.Buffer
				if _, err := r.Fetch(context.Background(), addr, []byte("k"), dtl.IntoWriter(&buf)); err != nil || buf.Len() != 200<<10 {
					t.Errorf("fetch %d from the restarted sender: %d bytes, %v", i, buf.Len(), err)
				}
			}
		})
	}
}
