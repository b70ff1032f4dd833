package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metaserver"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/rpc"
)

// startMeta starts an in-process metadata server and the raw echo server,
// and writes a server list for clients.
func startMeta(tb testing.TB, durability metastore.Durability) MetaConfig {
	tb.Helper()
	dir := tb.TempDir()
	svc, err := metaserver.Open(metaserver.Config{Dir: dir + "/meta", CheckpointDir: dir + "/cp", Durability: durability})
	if err != nil {
		tb.Fatal(err)
	}
	svc.SetPlacement(0, 1)
	svc.SetReady()
	srv := rpc.NewServer(rpc.ServerConfig{OnSessionEnd: svc.SessionEnded})
	svc.Register(srv)
	ln, err := rpc.Listen("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	tb.Cleanup(func() { srv.Close(); <-done; svc.Close() })
	host, _ := os.Hostname()
	list := &cluster.List{Size: 1, Created: time.Now(), Servers: []cluster.Server{{
		Rank: 0, Addr: rpc.Addr(ln.Addr()), Roles: "both", PID: os.Getpid(), Host: host, Instance: "bench", Start: time.Now()}}}
	if err := cluster.WriteList(dir, list); err != nil {
		tb.Fatal(err)
	}
	rawLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	echo := NewEchoServer(rawLn)
	tb.Cleanup(func() { echo.Close() })
	return MetaConfig{TmpDir: dir, RawAddr: echo.Addr()}
}

func BenchmarkMeta(b *testing.B) {
	for _, d := range []metastore.Durability{metastore.DurabilityProcess, metastore.DurabilitySync} {
		b.Run(d.String(), func(b *testing.B) {
			cfg := startMeta(b, d)
			cfg.N = 2000
			cfg.Label = d.String()
			var rs []Result
			for b.Loop() {
				var err error
				if rs, err = Meta(context.Background(), cfg); err != nil {
					b.Fatal(err)
				}
			}
			report(b, rs)
		})
	}
}

func TestMetaBenchRuns(t *testing.T) {
	cfg := startMeta(t, metastore.DurabilityProcess)
	cfg.N = 50
	rs, err := Meta(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The cases, their order and their ceilings are what reports and
	// comparisons key on.
	want := []string{
		"create, 1 client, one at a time / raw tcp ping-pong rate",
		"open, 1 client, one at a time / raw tcp ping-pong rate",
		"tag put, 1 client, one at a time / raw tcp ping-pong rate",
		"tag get, 1 client, one at a time / raw tcp ping-pong rate",
		fmt.Sprintf("create, 1 client, batches of %d / raw tcp ping-pong rate", client.MaxBatch),
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.Case+" / "+r.Ceiling)
		if r.Value <= 0 || r.CeilingValue <= 0 {
			t.Errorf("%s: empty figure %+v", r.Case, r)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("cases:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The tag gets alone run what they need, the creates and the tag puts,
// and report them; not the opens nor the batches.
func TestMetaBenchTagGetOnly(t *testing.T) {
	cfg := startMeta(t, metastore.DurabilityProcess)
	cfg.N = 20
	cfg.Want = func(key string) bool { return key == "meta: tag get, 1 client, one at a time" }
	rs, err := Meta(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.Case)
	}
	want := []string{"create, 1 client, one at a time", "tag put, 1 client, one at a time", "tag get, 1 client, one at a time"}
	if !slices.Equal(got, want) {
		t.Errorf("cases %q, want %q", got, want)
	}
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// The raw ceiling's turns time round trips on one connection dialed and
// warmed before the first, as the client's connection is: not a dial and
// a cold start in every turn.
func TestMetaCeilingDialsOnce(t *testing.T) {
	cfg := startMeta(t, metastore.DurabilityProcess)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	echo := NewEchoServer(cl)
	t.Cleanup(func() { echo.Close() })
	cfg.RawAddr, cfg.N = ln.Addr().String(), 60
	if _, err := Meta(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if n := cl.n.Load(); n != 1 {
		t.Errorf("the raw ceiling dialed %d connections, want 1", n)
	}
}
