package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/memnet"
	"github.com/pdcgo/pdc/internal/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	methodEcho    wire.Method = 100
	methodFail    wire.Method = 101
	methodBlock   wire.Method = 102
	methodPanic   wire.Method = 103
	methodTimeout wire.Method = 104
	methodInline  wire.Method = 105
)

type testServer struct {
	*Server
	addr    string
	blocked chan context.Context // methodBlock handlers announce themselves
	logs    *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServer starts an in-process server on network: "tcp", "unix", or
// "mem" (package memnet: no socket, for tests of what the protocol does
// rather than what the kernel does). extra registers further handlers
// before the server starts serving.
func startServer(t *testing.T, network string, cfg ServerConfig, extra ...func(*testServer)) *testServer {
	t.Helper()
	if network == "mem" && blockingAlways.Load() {
		network = "tcp" // a blocking wait needs a socket to poll (TestBlockingWait)
	}
	ln := listen(t, network)
	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	ts := &testServer{Server: NewServer(cfg), addr: Addr(ln.Addr()), blocked: make(chan context.Context, 64), logs: logs}
	ts.Handle(methodEcho, func(ctx context.Context, req *Request) (*Response, error) {
		return &Response{Header: req.Header, Payload: [][]byte{req.Payload}}, nil
	}, WithPayload())
	ts.Handle(methodFail, func(ctx context.Context, req *Request) (*Response, error) {
		var eb wire.ErrorBody
		if err := eb.Unmarshal(req.Header); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("object %q: %w", eb.Message, eb.Code.Err())
	})
	ts.Handle(methodBlock, func(ctx context.Context, req *Request) (*Response, error) {
		ts.blocked <- ctx
		<-ctx.Done()
		return nil, ctx.Err()
	}, WithPayload())
	ts.Handle(methodInline, func(ctx context.Context, req *Request) (*Response, error) {
		return &Response{Header: []byte("pong")}, nil
	}, Inline())
	ts.Handle(methodPanic, func(ctx context.Context, req *Request) (*Response, error) {
		panic("boom")
	})
	ts.Handle(methodTimeout, func(ctx context.Context, req *Request) (*Response, error) {
		d, ok := ctx.Deadline()
		if !ok {
			return nil, fmt.Errorf("no deadline: %w", pdc.ErrInvalid)
		}
		return &Response{Payload: [][]byte{[]byte(time.Until(d).String())}}, nil
	})
	for _, f := range extra {
		f(ts)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ts.Serve(ln)
	}()
	t.Cleanup(func() {
		ts.Close()
		<-done
	})
	return ts
}

// listen listens on network as startServer says.
func listen(t *testing.T, network string) net.Listener {
	t.Helper()
	var addr string
	switch network {
	case "mem":
		ln := memnet.Listen(fmt.Sprintf("%s#%d", t.Name(), memSeq.Add(1)))
		memListeners.Store(Addr(ln.Addr()), ln)
		t.Cleanup(func() { memListeners.Delete(Addr(ln.Addr())) })
		return ln
	case "unix":
		addr = "unix:" + filepath.Join(t.TempDir(), "s.sock")
	default:
		addr = "127.0.0.1:0"
	}
	ln, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// memListeners are the in-memory listeners of running tests by address,
// for dial; memSeq numbers them.
var (
	memListeners sync.Map
	memSeq       atomic.Uint64
)

// dialAny is Dial that also reaches in-memory listeners.
func dialAny(ctx context.Context, addr string, opts DialOptions) (*Conn, error) {
	ln, ok := memListeners.Load(addr)
	if !ok {
		return Dial(ctx, addr, opts)
	}
	nc, err := ln.(*memnet.Listener).Dial(ctx)
	if err != nil {
		return nil, err
	}
	return NewConn(ctx, nc, opts)
}

func dial(t *testing.T, addr string, opts DialOptions) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialAny(ctx, addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestEcho(t *testing.T) {
	for _, network := range []string{"tcp", "unix", "mem"} {
		t.Run(network, func(t *testing.T) {
			ts := startServer(t, network, ServerConfig{})
			c := dial(t, ts.addr, DialOptions{})
			for _, size := range []int{0, 1, 64, copyLimit, copyLimit + 1, 8 << 20} {
				payload := bytes.Repeat([]byte{byte(size)}, size)
				into := make([]byte, size)
				r, err := c.Call(ctx10(t), methodEcho, []byte("hdr"), [][]byte{payload}, into)
				if err != nil {
					t.Fatalf("size %d: %v", size, err)
				}
				if string(r.Header) != "hdr" || !bytes.Equal(r.Payload, payload) {
					t.Fatalf("size %d: got header %q and %d payload bytes", size, r.Header, len(r.Payload))
				}
				if size > 0 && &r.Payload[0] != &into[0] {
					t.Fatalf("size %d: payload not read into the caller's buffer", size)
				}
			}
		})
	}
}

func TestErrorsCrossTheWire(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{Label: "rank 0"})
	for code := wire.CodeInternal; code <= wire.CodeIO; code++ {
		eb := wire.ErrorBody{Code: code, Message: "obj" + fmt.Sprint(code)}
		_, err := c.Call(ctx10(t), methodFail, eb.Marshal(nil), nil, nil)
		if !errors.Is(err, code.Err()) {
			t.Errorf("code %d: got %v, want errors.Is %v", code, err, code.Err())
		}
		var se *pdc.ServerError
		if !errors.As(err, &se) || se.Server != "rank 0" || !strings.Contains(se.Msg, eb.Message) {
			t.Errorf("code %d: got %#v, want a ServerError naming rank 0 and %q", code, err, eb.Message)
		}
	}
}

func TestUnknownMethod(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	_, err := c.Call(ctx10(t), 9999, []byte("x"), [][]byte{[]byte("y")}, nil)
	if !errors.Is(err, pdc.ErrUnimplemented) || !strings.Contains(err.Error(), "9999") {
		t.Fatalf("got %v, want ErrUnimplemented naming method 9999", err)
	}
	// The connection still works.
	if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestHandlerPanicKeepsServing(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	_, err := c.Call(ctx10(t), methodPanic, nil, nil, nil)
	if !errors.Is(err, pdc.ErrInternal) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("got %v, want ErrInternal naming the panic", err)
	}
	if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestDeadlineReachesServer(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	r, err := c.Call(ctx, methodTimeout, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	left, err := time.ParseDuration(string(r.Payload))
	if err != nil || left <= 50*time.Minute || left > time.Hour {
		t.Fatalf("server saw %q left, want just under an hour (%v)", r.Payload, err)
	}
	_, err = c.Call(context.Background(), methodTimeout, nil, nil, nil)
	if !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("without a deadline: got %v, want the handler's ErrInvalid", err)
	}
}

func TestCancelReachesServer(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, methodBlock, nil, nil, nil)
		errc <- err
	}()
	hctx := <-ts.blocked
	cancel()
	if err := <-errc; !errors.Is(err, pdc.ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want ErrCanceled", err)
	}
	<-hctx.Done() // the server's handler was canceled too; hangs otherwise
}

func TestTimeoutReachesServer(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, methodBlock, nil, nil, nil)
		errc <- err
	}()
	hctx := <-ts.blocked
	<-hctx.Done()
	if !errors.Is(hctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("server handler ended with %v, want its deadline", hctx.Err())
	}
	if err := <-errc; !errors.Is(err, pdc.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
}

func TestOutOfOrderResponses(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	// The first call blocks on the server until canceled; the others must
	// complete in the meantime on the same connection.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, methodBlock, nil, nil, nil)
		errc <- err
	}()
	<-ts.blocked
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			want := []byte(fmt.Sprint(i))
			r, err := c.Call(ctx10(t), methodEcho, nil, [][]byte{want}, nil)
			if err != nil || !bytes.Equal(r.Payload, want) {
				t.Errorf("call %d: %q, %v", i, r.Payload, err)
			}
		})
	}
	wg.Wait()
	cancel()
	if err := <-errc; !errors.Is(err, pdc.ErrCanceled) {
		t.Fatal(err)
	}
}

func TestServerCloseFailsCalls(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), methodBlock, nil, nil, nil)
		errc <- err
	}()
	<-ts.blocked
	ts.Close()
	if err := <-errc; !errors.Is(err, pdc.ErrUnavailable) && !errors.Is(err, pdc.ErrCanceled) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	// The blocked call may have been answered with an error before the
	// server closed the connection, and with no reader goroutine nobody
	// sees the close until the next call reads: that call fails, and the
	// connection is ended from then on.
	if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); !errors.Is(err, pdc.ErrUnavailable) {
		t.Fatalf("call on a dead connection: got %v, want ErrUnavailable", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("the connection is not ended after a call found it closed")
	}
	if _, err := Dial(ctx10(t), ts.addr, DialOptions{}); !errors.Is(err, pdc.ErrUnavailable) {
		t.Fatalf("dial a closed server: got %v, want ErrUnavailable", err)
	}
}

func TestAuth(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	ts := startServer(t, "tcp", ServerConfig{Secret: secret})
	c := dial(t, ts.addr, DialOptions{Secret: secret})
	if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	_, err := Dial(ctx10(t), ts.addr, DialOptions{})
	if !errors.Is(err, pdc.ErrPermission) {
		t.Fatalf("no secret: got %v, want ErrPermission", err)
	}
	_, err = Dial(ctx10(t), ts.addr, DialOptions{Secret: []byte("wrong")})
	if !errors.Is(err, pdc.ErrPermission) || !strings.Contains(err.Error(), "wrong cluster secret") {
		t.Fatalf("wrong secret: got %v, want ErrPermission saying the secret is wrong", err)
	}
	// A client that skips the check and sends an empty proof is refused by
	// the server, not just by a polite client.
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := newFrameReader(nc, wire.Limits{})
	if _, err := r.next(); err != nil {
		t.Fatal(err)
	}
	_ = r.discard(uint64(r.lastHeaderLen()))
	auth := wire.Auth{Client: "rogue"}
	hdr := auth.Marshal(nil)
	f := wire.Frame{Method: wire.MethodAuth, HeaderLen: uint32(len(hdr))}
	if _, err := nc.Write(append(f.Append(nil), hdr...)); err != nil {
		t.Fatal(err)
	}
	rf, err := r.next()
	if err != nil || rf.Flags&wire.FlagError == 0 {
		t.Fatalf("rogue auth: got frame %+v, %v; want an error reply", rf, err)
	}
	_ = r.discard(uint64(rf.HeaderLen))
	if _, err := r.next(); !errors.Is(err, io.EOF) && !isConnReset(err) {
		t.Fatalf("after refusal: got %v, want the connection closed", err)
	}
	if logs := ts.logs.String(); !strings.Contains(logs, "refused connection") || !strings.Contains(logs, "rogue") {
		t.Fatalf("refusal not logged:\n%s", logs)
	}
}
