package bench

import (
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// startRPC starts the raw echo server and an RPC server with an echo ping
// in this process.
func startRPC(tb testing.TB) RPCConfig {
	tb.Helper()
	rawLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	echo := NewEchoServer(rawLn)
	tb.Cleanup(func() { echo.Close() })
	ln, err := rpc.Listen("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := rpc.NewServer(rpc.ServerConfig{})
	srv.Handle(wire.MethodPing, PingHandler, rpc.Inline(), rpc.WithPayload())
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return RPCConfig{RawAddr: echo.Addr(), RPCAddr: rpc.Addr(ln.Addr())}
}

func BenchmarkRPC(b *testing.B) {
	cfg := startRPC(b)
	cfg.Duration = time.Second
	var rs []Result
	for b.Loop() {
		var err error
		rs, err = RPC(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
	}
	report(b, rs)
}

// report gives each result to the benchmark framework as two metrics
// (value and ratio) and prints the table.
func report(b *testing.B, rs []Result) {
	for _, r := range rs {
		name := strings.NewReplacer(" ", "_", ",", "").Replace(r.Case)
		b.ReportMetric(r.Value, name+"_"+strings.ReplaceAll(r.Unit, "/", "_per_"))
		b.ReportMetric(r.Ratio, name+"_ratio")
	}
	WriteTable(os.Stdout, rs)
}

func TestRPCBenchRuns(t *testing.T) {
	cfg := startRPC(t)
	cfg.Duration = 600 * time.Millisecond
	rs, err := RPC(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The cases, their order and their ceilings are what reports and
	// comparisons key on.
	want := []string{
		"64B sequential p50 / raw tcp ping-pong p50",
		"64B sequential p99 / raw tcp ping-pong p99",
		"64B sequential rate / raw tcp ping-pong rate",
		"64B, 64 in flight, 1 conn / raw pipelined, 64 in flight",
		"64B, 16 clients, a connection each / raw ping-pong, 16 clients",
		"64B, 16 goroutines, one client (pool of 2) / raw ping-pong, 16 clients",
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.Case+" / "+r.Ceiling)
		if r.Value <= 0 || r.CeilingValue <= 0 || r.Ratio <= 0 {
			t.Errorf("%s: empty figure %+v", r.Case, r)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("cases:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The pool's case alone measures the clients' case too, whose ceiling it
// shares, and reports both.
func TestRPCBenchPoolOnly(t *testing.T) {
	cfg := startRPC(t)
	cfg.Duration = 300 * time.Millisecond
	cfg.Want = func(key string) bool { return key == "rpc: 64B, 16 goroutines, one client (pool of 2)" }
	rs, err := RPC(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].CeilingValue != rs[1].CeilingValue || rs[1].CeilingValue <= 0 {
		t.Fatalf("got %+v, want the clients' case and the pool's, with one ceiling", rs)
	}
}

// A side's set-up (dials, handshakes, a warm-up call) happens before its
// timed window opens: the window's deadline is a full turn after the
// set-up ended, and the tear-down runs after the window.
func TestAlternateSetUpOutsideWindow(t *testing.T) {
	const turn = 20 * time.Millisecond
	var events []string
	side := func(name string) measured {
		return func(ctx context.Context) (func(ctx context.Context) (int64, error), func(), error) {
			events = append(events, name+" set up")
			ready := time.Now()
			return func(ctx context.Context) (int64, error) {
					dl, ok := ctx.Deadline()
					if !ok || dl.Before(ready.Add(turn)) {
						t.Errorf("%s: window ends %v after its set-up, want at least %v", name, dl.Sub(ready), turn)
					}
					events = append(events, name+" window")
					return 1, nil
				}, func() {
					events = append(events, name+" done")
				}, nil
		}
	}
	a, b, err := alternate(context.Background(), turn, side("raw"), side("ours"))
	if err != nil || a != rounds || b != rounds {
		t.Fatalf("alternate = %d, %d, %v; want %d each", a, b, err, rounds)
	}
	want := "raw set up,raw window,raw done,ours set up,ours window,ours done"
	if got := strings.Join(events[:6], ","); got != want {
		t.Errorf("first turn: %s, want %s", got, want)
	}
}

// With a Base, every case's ceiling is the same calls against the base
// server, in the same turns, and both servers are called.
func TestRPCBenchAgainstABase(t *testing.T) {
	cfg := startRPC(t)
	var calls atomic.Int64
	ln, err := rpc.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer(rpc.ServerConfig{})
	srv.Handle(wire.MethodPing, func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		calls.Add(1)
		return PingHandler(ctx, req)
	}, rpc.Inline(), rpc.WithPayload())
	go srv.Serve(ln)
	defer srv.Close()
	cfg.Base, cfg.Label, cfg.BaseLabel, cfg.BaseTarget = rpc.Addr(ln.Addr()), "with X", "without X", "ratio >= 0.98"
	cfg.Duration = 300 * time.Millisecond
	rs, err := RPC(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 6 {
		t.Fatalf("%d results, want 6", len(rs))
	}
	for _, r := range rs {
		if r.Bench != "rpc (with X)" || r.Ceiling != "the same, without X" || r.Target != "ratio >= 0.98" || r.CeilingValue <= 0 || r.Value <= 0 {
			t.Errorf("%+v", r)
		}
	}
	if calls.Load() == 0 {
		t.Error("the base server was never called")
	}
}

// Each side goes first in every other round, so that a position's bias
// is not charged to one side.
func TestAlternateSwapsTheOrder(t *testing.T) {
	var order []string
	side := func(name string) measured {
		return func(ctx context.Context) (func(ctx context.Context) (int64, error), func(), error) {
			order = append(order, name)
			return func(ctx context.Context) (int64, error) { return 1, nil }, func() {}, nil
		}
	}
	a, b, err := alternate(context.Background(), time.Millisecond, side("ceiling"), side("ours"))
	if err != nil || a != rounds || b != rounds {
		t.Fatalf("alternate: %d, %d, %v", a, b, err)
	}
	for i := 0; i+1 < len(order); i += 2 {
		first := "ceiling"
		if i/2%2 == 1 {
			first = "ours"
		}
		if order[i] != first || order[i] == order[i+1] {
			t.Fatalf("turns %q: round %d should start with %s", order, i/2, first)
		}
	}
}
