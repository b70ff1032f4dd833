package rpc

import (
	"context"
	"encoding/binary"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/wire"
)

// A trace id set by the client arrives with the request, is in the
// handler's context, goes on with the requests the handler sends, and
// names the request in the slow-request log with what Describe says it is
// about. A server that does not announce trace support gets no trace flag
// (it would refuse it), and logs an id of its own.
func TestTraceCrossesServers(t *testing.T) {
	const methodFront, methodBack wire.Method = 110, 111
	echoTrace := func(ctx context.Context, req *Request) (*Response, error) {
		if req.Trace != TraceOf(ctx) || req.Trace == 0 {
			t.Errorf("request trace %#x, context's %#x", req.Trace, TraceOf(ctx))
		}
		return &Response{Header: binary.LittleEndian.AppendUint64(nil, req.Trace)}, nil
	}
	back := startServer(t, "mem", ServerConfig{}, func(ts *testServer) { ts.Handle(methodBack, echoTrace) })
	old := startServer(t, "mem", ServerConfig{}, func(ts *testServer) {
		ts.noTrace = true
		ts.Handle(methodBack, echoTrace)
	})
	onward := dial(t, back.addr, DialOptions{})
	front := startServer(t, "mem", ServerConfig{SlowRequest: time.Nanosecond}, func(ts *testServer) {
		ts.Handle(methodFront, func(ctx context.Context, req *Request) (*Response, error) {
			rep, err := onward.Call(ctx, methodBack, nil, nil, nil)
			if err != nil {
				return nil, err
			}
			return &Response{Header: rep.Header}, nil
		}, Describe(func(hdr []byte) []slog.Attr { return []slog.Attr{slog.String("object", string(hdr))} }))
	})
	c := dial(t, front.addr, DialOptions{})
	traceOf := func(c *Conn, ctx context.Context, m wire.Method, hdr string) uint64 {
		t.Helper()
		rep, err := c.Call(ctx, m, []byte(hdr), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint64(rep.Header)
	}

	ctx := WithTrace(context.Background(), 0xabc)
	if got := traceOf(c, ctx, methodFront, "obj-7"); got != 0xabc {
		t.Fatalf("the back server saw trace %#x, want 0xabc", got)
	}
	logs := front.logs.String()
	var line string
	for l := range strings.Lines(logs) {
		if strings.Contains(l, "trace=0000000000000abc") {
			line = l
		}
	}
	for _, want := range []string{"level=WARN", `msg="slow request"`, "object=obj-7", "duration="} {
		if !strings.Contains(line, want) {
			t.Fatalf("no slow-request line with %q for trace 0xabc in the front server's log:\n%s", want, logs)
		}
	}
	if strings.Contains(back.logs.String(), "slow request") {
		t.Fatalf("a server without SlowRequest logged requests:\n%s", back.logs.String())
	}

	// No id given: each call gets a fresh one all the same.
	if a, b := traceOf(c, context.Background(), methodFront, "x"), traceOf(c, context.Background(), methodFront, "x"); a == 0 || a == b {
		t.Fatalf("untraced calls carried ids %#x and %#x; want two fresh ones", a, b)
	}

	// A server of an earlier build: no flag is sent (it would refuse it),
	// and the request is served under an id of its own.
	if got := traceOf(dial(t, old.addr, DialOptions{}), ctx, methodBack, ""); got == 0xabc || got == 0 {
		t.Fatalf("a server that does not read trace ids saw %#x", got)
	}
}

// A method that waits by design is never a slow request; others are.
func TestWaitingMethodIsNotSlow(t *testing.T) {
	const methodWaits wire.Method = 142
	ts := startServer(t, "mem", ServerConfig{SlowRequest: time.Nanosecond}, func(ts *testServer) {
		ts.Handle(methodWaits, func(ctx context.Context, req *Request) (*Response, error) {
			time.Sleep(time.Millisecond) // past SlowRequest however fast the machine
			return &Response{}, nil
		}, Waits())
	})
	c := dial(t, ts.addr, DialOptions{})
	if _, err := c.Call(ctx10(t), methodWaits, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if logs := ts.logs.String(); strings.Contains(logs, "slow request") {
		t.Fatalf("a waiting method was logged as slow:\n%s", logs)
	}
	if _, err := c.Call(ctx10(t), methodEcho, []byte("e"), nil, nil); err != nil {
		t.Fatal(err)
	}
	if logs := ts.logs.String(); !strings.Contains(logs, `msg="slow request" method=`) {
		t.Fatalf("the other method was not logged as slow:\n%s", logs)
	}
}
