package bench

import (
	"context"
	"net"
	"os"
	"strings"
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
	if len(rs) != 6 {
		t.Fatalf("got %d results, want 6", len(rs))
	}
	for _, r := range rs {
		if r.Value <= 0 || r.CeilingValue <= 0 || r.Ratio <= 0 {
			t.Errorf("%s: empty figure %+v", r.Case, r)
		}
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
