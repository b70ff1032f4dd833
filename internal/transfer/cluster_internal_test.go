package transfer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/server"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// testCluster is a Cluster over one real server, with both roles, run in
// this process: what the client gives the engine, without the client.
type testCluster struct {
	servers []cluster.Server
	pools   []*rpc.Pool
	// noData, when set, makes the cluster say it has no data server
	// (a failure of plan, for tests).
	noData atomic.Bool
}

func (tc *testCluster) DataServers() []int {
	if tc.noData.Load() {
		return nil
	}
	return []int{0}
}

func (tc *testCluster) Call(ctx context.Context, rank int, m wire.Method, req, resp wire.Message) error {
	var hdr []byte
	if req != nil {
		hdr = req.Marshal(nil)
	}
	conn, err := tc.Conn(ctx, rank)
	if err != nil {
		return err
	}
	rep, err := conn.Call(ctx, m, hdr, nil, nil)
	if err != nil {
		return err
	}
	if resp != nil {
		return resp.Unmarshal(rep.Header)
	}
	return nil
}

func (tc *testCluster) Conn(ctx context.Context, rank int) (*rpc.Conn, error) {
	return tc.pools[rank].Get(ctx)
}

func (tc *testCluster) StartConn(ctx context.Context, rank int) (*rpc.Conn, error) {
	return tc.pools[rank].First(ctx)
}

func (tc *testCluster) Label(rank int) string { return fmt.Sprintf("rank %d", rank) }

func (tc *testCluster) Addr(rank int) (addr, host string, err error) {
	s := tc.servers[rank]
	return s.Addr, s.Host, nil
}

// testEngine runs a one-server cluster in this process for the test and
// returns an engine on it whose payloads travel by mode, and shut, which
// closes it as a client does (idempotent). The server stops, and its
// error fails the test, when the test ends.
func testEngine(t *testing.T, mode dtl.Mode) (ctx context.Context, e *Engine, shut func()) {
	t.Helper()
	return testEngineVia(t, mode, nil)
}

// testEngineVia is testEngine with the engine's connections dialed to
// via(the server's address) instead, if via is set: a proxy's.
func testEngineVia(t *testing.T, mode dtl.Mode, via func(addr string) string) (ctx context.Context, e *Engine, shut func()) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	sctx, stop := context.WithCancel(ctx)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- server.Run(sctx, server.Config{TmpDir: filepath.Join(dir, "tmp"), DataDir: filepath.Join(dir, "data"),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Ready: func(cluster.Server, *cluster.List) { close(ready) }})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
		cancel()
	})
	select {
	case <-ready:
	case err := <-done:
		done <- err // for the cleanup
		t.Fatal(err)
	}
	list, err := cluster.ReadList(filepath.Join(dir, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := cluster.SecretIn(filepath.Join(dir, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCluster{servers: list.Servers}
	for _, s := range list.Servers {
		addr := s.Addr
		if via != nil {
			addr = via(addr)
		}
		tc.pools = append(tc.pools, rpc.NewPool(addr, 2, rpc.DialOptions{Secret: secret, ClientName: t.Name(), Label: s.Addr}))
	}
	e = NewEngine(tc, Config{Mode: mode})
	closed := false
	shut = func() {
		if closed {
			return
		}
		closed = true
		e.StopPlacer()
		for _, p := range tc.pools {
			p.Close()
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		e.Close(cctx)
	}
	t.Cleanup(shut)
	return ctx, e, shut
}

// testObject creates an object of bytes of dims in a new container and
// returns it as the engine knows it.
func testObject(ctx context.Context, t *testing.T, e *Engine, name string, dims []uint64, posix bool) *Object {
	t.Helper()
	var cont wire.ContReply
	if err := e.cl.Call(ctx, 0, wire.MethodContCreate, &wire.ContCreate{Name: "c-" + name}, &cont); err != nil {
		t.Fatal(err)
	}
	props := wire.ObjectProps{Dims: dims, Type: int32(region.Uint8)}
	if posix {
		props.Consistency = 1
	}
	sp, _ := placement.NewSpread(placement.Key(name, 0), dims, 1, 1)
	props.Spread, props.Home, props.Block = sp.Over, sp.Home, sp.Block
	var res wire.ObjResults
	req := wire.ObjBatch{Creates: []wire.ObjCreate{{ContID: cont.Meta.ID, Name: name, Props: props}}}
	if err := e.cl.Call(ctx, 0, wire.MethodObjCreate, &req, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 1 || res.Items[0].Code != wire.CodeOK {
		t.Fatalf("create object %q: %+v", name, res.Items)
	}
	r := res.Items[0].Meta
	o := &Object{}
	o.Init(e, noRefresh{}, &Meta{ID: r.ID, Name: name, Dims: dims, DimsVersion: r.DimsVersion, Elem: 1, POSIX: posix, Spread: sp})
	return o
}

// noRefresh is the Source of an object whose dims never change.
type noRefresh struct{}

func (noRefresh) Refresh(context.Context) error { return nil }

// startWrite starts writing buf to the object's box.
func startWrite(ctx context.Context, t *testing.T, o *Object, box region.Box, buf []byte) *Transfer {
	t.Helper()
	tr, err := New(ctx, o, buf, Write, region.Shape(box.Volume()), box)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return tr
}
