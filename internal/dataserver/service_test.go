package dataserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/regionstore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// elem is the element size of every test object.
const elem = 4

// env is a Service on a real rpc server over TCP, storing in a real
// regionstore under t.TempDir().
type env struct {
	t     *testing.T
	svc   *Service
	store *regionstore.Store
	dir   string // the store's
	addr  string
	ended chan string // clients whose session ended, once SessionEnded ran
	// started has how each DataStart handler returned, once it has.
	started chan error
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	return newEnvFS(t, cfg, nil)
}

// newEnvFS is newEnv with the store's files in fsys (nil: the OS's).
func newEnvFS(t *testing.T, cfg Config, fsys vfs.FS) *env {
	t.Helper()
	return newEnvAt(t, cfg, fsys, t.TempDir())
}

// newEnvAt is newEnvFS with the store in dir, which may hold files
// already: a server restarted on its data.
func newEnvAt(t *testing.T, cfg Config, fsys vfs.FS, dir string) *env {
	t.Helper()
	store, err := regionstore.Open(regionstore.Options{Dir: dir, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Error(err)
		}
	})
	log := slog.New(slog.DiscardHandler)
	cfg.Store, cfg.Logger = store, log
	e := &env{t: t, store: store, dir: dir, ended: make(chan string, 256), started: make(chan error, 1024)}
	e.svc = New(cfg)
	t.Cleanup(func() { _ = e.svc.Close() })
	srv := rpc.NewServer(rpc.ServerConfig{Logger: log, OnSessionEnd: func(client string) {
		e.svc.SessionEnded(client)
		e.ended <- client
	}})
	e.svc.Register(srv)
	report := func(err error) {
		select {
		case e.started <- err:
		default:
		}
	}
	srv.Handle(wire.MethodDataStart, func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		resp, err := e.svc.start(ctx, req)
		report(err)
		return resp, err
	}, rpc.TryHere(func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		resp, err := e.svc.startHere(ctx, req)
		if !errors.Is(err, rpc.ErrElsewhere) {
			report(err)
		}
		return resp, err
	}))
	ln, err := rpc.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = rpc.Addr(ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, pdc.ErrClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return e
}

// dial connects as client name; the connection closes at the test's end.
func (e *env) dial(name string) *rpc.Conn {
	e.t.Helper()
	c, err := rpc.Dial(testCtx(e.t), e.addr, rpc.DialOptions{ClientName: name})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// testCtx bounds a test's calls, so that a hang fails instead of
// blocking the run.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func item(obj uint64, write bool, dims, off, size []uint64) wire.DataItem {
	return wire.DataItem{Obj: obj, Write: write, Off: off, Size: size, Dims: dims, Elem: elem}
}

// regItem is item for an object stored by region.
func regItem(obj uint64, write bool, dims, off, size []uint64) wire.DataItem {
	it := item(obj, write, dims, off, size)
	it.Storage = uint32(regionstore.ByRegion)
	return it
}

func nbytes(size []uint64) int {
	n := elem
	for _, s := range size {
		n *= int(s)
	}
	return n
}

// pattern is n bytes that differ with seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed ^ byte(i>>8)
	}
	return b
}

func start(ctx context.Context, c *rpc.Conn, items []wire.DataItem, payload ...[]byte) ([]uint64, error) {
	m := wire.DataStart{Items: items}
	rep, err := c.Call(ctx, wire.MethodDataStart, m.Marshal(nil), payload, nil)
	if err != nil {
		return nil, err
	}
	var ids wire.DataIDs
	if err := ids.Unmarshal(rep.Header); err != nil {
		return nil, err
	}
	if len(ids.IDs) != len(items) {
		return nil, fmt.Errorf("%d ids for %d items", len(ids.IDs), len(items))
	}
	return ids.IDs, nil
}

// results splits a DataResults answer's payload among its results.
func results(rep rpc.Reply) (wire.DataResults, [][]byte, error) {
	var res wire.DataResults
	if err := res.Unmarshal(rep.Header); err != nil {
		return res, nil, err
	}
	parts := make([][]byte, len(res.Items))
	p := rep.Payload
	for i, r := range res.Items {
		if r.InLane {
			continue // the bytes are in the wait's lane
		}
		if r.Size > uint64(len(p)) {
			return res, nil, fmt.Errorf("result %d is %d bytes, %d left in the payload", i, r.Size, len(p))
		}
		parts[i], p = p[:r.Size], p[r.Size:]
	}
	if len(p) != 0 {
		return res, nil, fmt.Errorf("%d payload bytes beyond the results", len(p))
	}
	return res, parts, nil
}

func startWait(ctx context.Context, c *rpc.Conn, items []wire.DataItem, payload ...[]byte) (wire.DataResults, [][]byte, error) {
	m := wire.DataStart{Items: items, Wait: true}
	rep, err := c.Call(ctx, wire.MethodDataStart, m.Marshal(nil), payload, nil)
	if err != nil {
		return wire.DataResults{}, nil, err
	}
	return results(rep)
}

func wait(ctx context.Context, c *rpc.Conn, ids ...uint64) (wire.DataResults, [][]byte, error) {
	m := wire.DataIDs{IDs: ids}
	rep, err := c.Call(ctx, wire.MethodDataWait, m.Marshal(nil), nil, nil)
	if err != nil {
		return wire.DataResults{}, nil, err
	}
	res, parts, err := results(rep)
	if err == nil && len(res.Items) != len(ids) {
		err = fmt.Errorf("%d results for %d ids", len(res.Items), len(ids))
	}
	return res, parts, err
}

func status(ctx context.Context, c *rpc.Conn, ids ...uint64) ([]wire.DataResult, error) {
	m := wire.DataIDs{IDs: ids}
	rep, err := c.Call(ctx, wire.MethodDataStatus, m.Marshal(nil), nil, nil)
	if err != nil {
		return nil, err
	}
	var res wire.DataResults
	if err := res.Unmarshal(rep.Header); err != nil {
		return nil, err
	}
	if len(res.Items) != len(ids) {
		return nil, fmt.Errorf("%d results for %d ids", len(res.Items), len(ids))
	}
	return res.Items, nil
}

func idArg(ctx context.Context, c *rpc.Conn, m wire.Method, obj uint64) error {
	a := wire.IDArg{ID: obj}
	_, err := c.Call(ctx, m, a.Marshal(nil), nil, nil)
	return err
}

// mustOK fails the test unless every result succeeded.
func mustOK(t *testing.T, res wire.DataResults) {
	t.Helper()
	for i, r := range res.Items {
		if r.Code != wire.CodeOK {
			t.Fatalf("result %d: code %v: %s", i, r.Code, r.Message)
		}
	}
}

// write stores data at box and waits for it.
func write(t *testing.T, c *rpc.Conn, obj uint64, dims []uint64, box region.Box, data []byte) {
	t.Helper()
	ctx := testCtx(t)
	ids, err := start(ctx, c, []wire.DataItem{item(obj, true, dims, box.Off, box.Size)}, data)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := wait(ctx, c, ids...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
}

// read returns the bytes of box, read through c.
func read(t *testing.T, c *rpc.Conn, obj uint64, dims []uint64, box region.Box) []byte {
	t.Helper()
	ctx := testCtx(t)
	ids, err := start(ctx, c, []wire.DataItem{item(obj, false, dims, box.Off, box.Size)})
	if err != nil {
		t.Fatal(err)
	}
	res, parts, err := wait(ctx, c, ids...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if len(parts[0]) != nbytes(box.Size) {
		t.Fatalf("read %v: %d bytes, want %d", box, len(parts[0]), nbytes(box.Size))
	}
	return parts[0]
}

func box(off, size []uint64) region.Box { return region.Box{Off: off, Size: size} }

func TestWriteWaitRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		dims []uint64
		box  region.Box
	}{
		{"1d", []uint64{1000}, box([]uint64{100}, []uint64{300})},
		{"2d", []uint64{40, 50}, box([]uint64{3, 7}, []uint64{20, 11})},
		{"3d", []uint64{8, 9, 10}, box([]uint64{1, 2, 3}, []uint64{5, 6, 4})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			w, r := e.dial("writer"), e.dial("reader")
			data := pattern(nbytes(tc.box.Size), 1)
			write(t, w, 1, tc.dims, tc.box, data)

			if got := read(t, r, 1, tc.dims, tc.box); !bytes.Equal(got, data) {
				t.Fatalf("read back %v differs from what was written", tc.box)
			}
			// The whole object: the box where it was written, zeros
			// elsewhere.
			whole := region.Shape(tc.dims...)
			want := make([]byte, nbytes(tc.dims))
			if err := region.Copy(want, whole, data, tc.box, tc.box, elem); err != nil {
				t.Fatal(err)
			}
			if got := read(t, r, 1, tc.dims, whole); !bytes.Equal(got, want) {
				t.Fatalf("whole object read back differs from the model")
			}
		})
	}
}

// TestWritesThenReadsInOneStart checks that the reads of a request see its
// writes, even when listed before them, and that ids and results follow
// the request's item order.
func TestWritesThenReadsInOneStart(t *testing.T) {
	e := newEnv(t, Config{Workers: 8})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{16, 16, 16}
	boxes := []region.Box{
		box([]uint64{0, 0, 0}, []uint64{4, 16, 16}),
		box([]uint64{4, 2, 0}, []uint64{8, 5, 16}),
		box([]uint64{12, 0, 3}, []uint64{4, 16, 9}),
	}
	var items []wire.DataItem
	var payload [][]byte
	for _, b := range boxes { // reads first, on purpose
		items = append(items, item(7, false, dims, b.Off, b.Size))
	}
	for i, b := range boxes {
		items = append(items, item(7, true, dims, b.Off, b.Size))
		payload = append(payload, pattern(nbytes(b.Size), byte(10+i)))
	}
	ids, err := start(ctx, c, items, payload...)
	if err != nil {
		t.Fatal(err)
	}
	res, parts, err := wait(ctx, c, ids...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	for i := range boxes {
		if !bytes.Equal(parts[i], payload[i]) {
			t.Errorf("read %d of %v does not see the write of the same request", i, boxes[i])
		}
		if len(parts[len(boxes)+i]) != 0 {
			t.Errorf("write %d answered with %d bytes", i, len(parts[len(boxes)+i]))
		}
	}
}

func TestWaitUnknownID(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{100}
	write(t, c, 1, dims, box([]uint64{0}, []uint64{10}), pattern(40, 3))
	ids, err := start(ctx, c, []wire.DataItem{item(1, false, dims, []uint64{0}, []uint64{10})})
	if err != nil {
		t.Fatal(err)
	}
	res, parts, err := wait(ctx, c, 1<<40, ids[0], ids[0])
	if err != nil {
		t.Fatalf("waiting on an unknown id failed the call: %v", err)
	}
	if res.Items[0].Code != wire.CodeNotFound || !strings.Contains(res.Items[0].Message, "not found") {
		t.Errorf("unknown id: %+v, want not found", res.Items[0])
	}
	if res.Items[1].Code != wire.CodeOK || !bytes.Equal(parts[1], pattern(40, 3)) {
		t.Errorf("known id next to an unknown one: %+v", res.Items[1])
	}
	if res.Items[2].Code != wire.CodeNotFound || len(parts[2]) != 0 {
		t.Errorf("an id listed twice in one wait: %+v, want not found the second time", res.Items[2])
	}
	// Waited: gone.
	res, _, err = wait(ctx, c, ids[0])
	if err != nil || res.Items[0].Code != wire.CodeNotFound {
		t.Errorf("second wait: %+v %v, want not found", res.Items, err)
	}
	// Another client's transfer is not found either.
	ids, err = start(ctx, c, []wire.DataItem{item(1, false, dims, []uint64{0}, []uint64{10})})
	if err != nil {
		t.Fatal(err)
	}
	res, _, err = wait(ctx, e.dial("other"), ids[0])
	if err != nil || res.Items[0].Code != wire.CodeNotFound {
		t.Errorf("another client's id: %+v %v, want not found", res.Items, err)
	}
}

// gate blocks the workers' I/O of chosen objects until opened.
type gate struct {
	obj     uint64
	entered chan struct{} // a worker reached a gated transfer
	open    chan struct{}
	once    sync.Once
}

// newGate returns a gate for obj, set in cfg.
func newGate(cfg *Config, obj uint64) *gate {
	g := &gate{obj: obj, entered: make(chan struct{}, 1024), open: make(chan struct{})}
	cfg.beforeIO = func(it wire.DataItem) {
		if it.Obj == g.obj {
			g.entered <- struct{}{}
			<-g.open
		}
	}
	return g
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func TestStatus(t *testing.T) {
	// One worker: the queue is served in order, reads too.
	cfg := Config{Workers: 1, buffered: true}
	g := newGate(&cfg, 9)
	e := newEnv(t, cfg)
	defer g.release()
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{64}
	w, err := start(ctx, c, []wire.DataItem{regItem(8, true, dims, []uint64{0}, []uint64{8})}, pattern(32, 6))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := wait(ctx, c, w...); err != nil {
		t.Fatal(err)
	}
	// A write held by the gate, and a read of another object behind it.
	ids, err := start(ctx, c, []wire.DataItem{
		regItem(8, false, dims, []uint64{0}, []uint64{8}),
		item(9, true, dims, []uint64{0}, []uint64{8}),
	}, pattern(32, 5))
	if err != nil {
		t.Fatal(err)
	}
	rd, wr := ids[0], ids[1]
	<-g.entered
	st, err := status(ctx, c, wr, rd, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	if st[0].State != wire.StatePending || st[1].State != wire.StatePending || st[2].State != wire.StateNotFound {
		t.Fatalf("while the write is held: states %d %d %d, want pending, pending, not found", st[0].State, st[1].State, st[2].State)
	}
	g.release()
	// A later transfer done means the earlier ones are.
	later, err := start(ctx, c, []wire.DataItem{regItem(8, false, dims, []uint64{0}, []uint64{1})})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := wait(ctx, c, later...); err != nil {
		t.Fatal(err)
	}
	st, err = status(ctx, c, wr, rd)
	if err != nil {
		t.Fatal(err)
	}
	if st[0].State != wire.StateComplete || st[0].Code != wire.CodeOK || st[1].State != wire.StateComplete || st[1].Code != wire.CodeOK {
		t.Fatalf("done: %+v, want both complete", st)
	}
	st, err = status(ctx, c, wr, rd)
	if err != nil {
		t.Fatal(err)
	}
	if st[0].State != wire.StateNotFound || st[1].State != wire.StateComplete {
		t.Fatalf("reported again: write %d read %d, want not found (reported once) and complete (not yet waited)", st[0].State, st[1].State)
	}
	res, parts, err := wait(ctx, c, rd)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if !bytes.Equal(parts[0], pattern(32, 6)) {
		t.Errorf("the read reported complete came back wrong")
	}
	if st, err = status(ctx, c, rd); err != nil || st[0].State != wire.StateNotFound {
		t.Fatalf("waited read: %+v %v, want not found", st, err)
	}
	if got := read(t, c, 9, dims, box([]uint64{0}, []uint64{8})); !bytes.Equal(got, pattern(32, 5)) {
		t.Errorf("the write reported complete was not stored")
	}
}

// TestStartWait checks POSIX mode: the answer carries the results, the ids
// and the reads' bytes, and the transfers are collected by it.
func TestStartWait(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{20, 30}
	b := box([]uint64{2, 3}, []uint64{10, 20})
	data := pattern(nbytes(b.Size), 8)
	res, parts, err := startWait(ctx, c, []wire.DataItem{
		item(4, false, dims, b.Off, b.Size),
		item(4, true, dims, b.Off, b.Size),
	}, data)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if len(res.Items) != 2 || len(res.IDs) != 2 {
		t.Fatalf("%d results and %d ids for 2 items", len(res.Items), len(res.IDs))
	}
	if !bytes.Equal(parts[0], data) || len(parts[1]) != 0 {
		t.Fatalf("the read of a waiting start does not see its write")
	}
	// Answered: already collected.
	res, _, err = wait(ctx, c, res.IDs...)
	if err != nil || res.Items[0].Code != wire.CodeNotFound || res.Items[1].Code != wire.CodeNotFound {
		t.Fatalf("wait after a waiting start: %+v %v, want not found", res.Items, err)
	}
	// Stored for everyone.
	if got := read(t, e.dial("other"), 4, dims, b); !bytes.Equal(got, data) {
		t.Fatalf("another client reads other bytes")
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{10, 10}
	ok := item(77, true, dims, []uint64{0, 0}, []uint64{2, 2})
	for _, tc := range []struct {
		name    string
		item    func(it *wire.DataItem)
		payload int // bytes, -1 for the item's
		want    error
		obj     bool // the message names the object
	}{
		{"outside dims", func(it *wire.DataItem) { it.Off = []uint64{9, 0} }, -1, pdc.ErrOutOfRange, true},
		{"ndim mismatch", func(it *wire.DataItem) { it.Off, it.Size = []uint64{0}, []uint64{4} }, 16, pdc.ErrInvalid, true},
		{"off and size differ", func(it *wire.DataItem) { it.Off = []uint64{0} }, -1, pdc.ErrInvalid, true},
		{"zero size", func(it *wire.DataItem) { it.Size = []uint64{0, 2} }, 0, pdc.ErrInvalid, true},
		{"no dims", func(it *wire.DataItem) { it.Off, it.Size, it.Dims = nil, nil, nil }, 0, pdc.ErrInvalid, true},
		{"elem 0", func(it *wire.DataItem) { it.Elem = 0 }, 0, pdc.ErrInvalid, true},
		{"elem too large", func(it *wire.DataItem) { it.Elem = 1<<16 + 1 }, -1, pdc.ErrInvalid, true},
		{"unknown storage mode", func(it *wire.DataItem) { it.Storage = 3 }, -1, pdc.ErrInvalid, true},
		{"payload short", func(it *wire.DataItem) {}, 15, pdc.ErrInvalid, false},
		{"payload long", func(it *wire.DataItem) {}, 17, pdc.ErrInvalid, false},
		{"payload for a read", func(it *wire.DataItem) { it.Write = false }, 16, pdc.ErrInvalid, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := ok
			it.Off, it.Size = slicesClone(ok.Off), slicesClone(ok.Size)
			tc.item(&it)
			n := tc.payload
			if n < 0 {
				n = 16
			}
			_, err := start(ctx, c, []wire.DataItem{it}, make([]byte, n))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.obj && !strings.Contains(err.Error(), "object 77") {
				t.Errorf("%q does not name the object", err)
			}
			// A bad item fails the whole request: the good one next to
			// it is not started.
			_, err = start(ctx, c, []wire.DataItem{ok, it}, make([]byte, 16+n))
			if !errors.Is(err, tc.want) {
				t.Fatalf("after a good item: got %v, want %v", err, tc.want)
			}
		})
	}
	// The server still serves, and nothing of the bad requests was stored.
	if got := read(t, c, 77, dims, region.Shape(dims...)); !bytes.Equal(got, make([]byte, nbytes(dims))) {
		t.Fatalf("a refused request left data behind")
	}
	write(t, c, 77, dims, box(ok.Off, ok.Size), pattern(16, 1))
	if got := read(t, e.dial("d"), 77, dims, box(ok.Off, ok.Size)); !bytes.Equal(got, pattern(16, 1)) {
		t.Fatalf("read after refusals differs")
	}
}

func slicesClone(s []uint64) []uint64 { return append([]uint64(nil), s...) }

func TestStaleDims(t *testing.T) {
	e := newEnv(t, Config{})
	a, b := e.dial("a"), e.dial("b")
	ctx := testCtx(t)
	grown := item(5, true, []uint64{20}, []uint64{0}, []uint64{4})
	grown.DimsVersion = 2
	wids, err := start(ctx, a, []wire.DataItem{grown}, pattern(16, 2))
	if err != nil {
		t.Fatal(err)
	}
	// Waited, so that b's read below sees it: nothing orders another
	// client's unwaited write before a read.
	if res, _, err := wait(ctx, a, wids...); err != nil {
		t.Fatal(err)
	} else {
		mustOK(t, res)
	}
	old := item(5, false, []uint64{10}, []uint64{0}, []uint64{4})
	old.DimsVersion = 1
	_, err = start(ctx, b, []wire.DataItem{old})
	if !errors.Is(err, pdc.ErrStale) || !strings.Contains(err.Error(), "object 5") {
		t.Fatalf("read with older dims: %v, want ErrStale naming object 5", err)
	}
	old.Write = true
	if _, err := start(ctx, b, []wire.DataItem{old}, make([]byte, 16)); !errors.Is(err, pdc.ErrStale) {
		t.Fatalf("write with older dims: %v, want ErrStale", err)
	}
	// The same or a newer version is fine; other objects are unaffected.
	cur := item(5, false, []uint64{20}, []uint64{0}, []uint64{4})
	cur.DimsVersion = 2
	other := item(6, false, []uint64{10}, []uint64{0}, []uint64{4})
	ids, err := start(ctx, b, []wire.DataItem{cur, other})
	if err != nil {
		t.Fatal(err)
	}
	res, parts, err := wait(ctx, b, ids...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if !bytes.Equal(parts[0], pattern(16, 2)) {
		t.Fatalf("read with current dims differs")
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{8, 8}
	whole := region.Shape(dims...)
	write(t, c, 3, dims, whole, pattern(nbytes(dims), 4))
	if err := idArg(ctx, c, wire.MethodDataFlush, 3); err != nil {
		t.Fatal(err)
	}
	if got := read(t, c, 3, dims, whole); !bytes.Equal(got, pattern(nbytes(dims), 4)) {
		t.Fatal("read before delete differs")
	}
	if err := idArg(ctx, c, wire.MethodDataDelete, 3); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(e.dir, "*")); len(files) != 0 {
		t.Fatalf("files left after delete: %v", files)
	}
	if got := read(t, c, 3, dims, whole); !bytes.Equal(got, make([]byte, nbytes(dims))) {
		t.Fatal("read after delete is not zeros")
	}
	// A tombstone (the metadata server's, once the metadata is gone)
	// refuses the object for good: ids are never reused.
	gone := wire.IDList{IDs: []uint64{3}}
	if _, err := c.Call(ctx, wire.MethodDataGone, gone.Marshal(nil), nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := start(ctx, c, []wire.DataItem{item(3, false, dims, []uint64{0, 0}, dims)}); !errors.Is(err, pdc.ErrNotFound) || !strings.Contains(err.Error(), "object 3 was deleted") {
		t.Fatalf("read after the tombstone: %v, want ErrNotFound naming object 3", err)
	}
	if _, err := start(ctx, c, []wire.DataItem{item(3, true, dims, []uint64{0, 0}, dims)}, pattern(nbytes(dims), 5)); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("write after the tombstone: %v, want ErrNotFound", err)
	}
	if files, _ := filepath.Glob(filepath.Join(e.dir, "*")); len(files) != 0 {
		t.Fatalf("a write after the tombstone made files: %v", files)
	}
	// Deleting again, or an object never written, is fine.
	if err := idArg(ctx, c, wire.MethodDataDelete, 3); err != nil {
		t.Fatal(err)
	}
	if err := idArg(ctx, c, wire.MethodDataDelete, 1234); err != nil {
		t.Fatal(err)
	}
}

// TestBackpressure runs many writes through a budget of two of them and a
// queue of one: all are stored, none deadlocks.
func TestBackpressure(t *testing.T) {
	const (
		writers = 4
		each    = 16
		size    = 8 << 10 // elements: 32 KiB
	)
	e := newEnv(t, Config{MaxBytes: 64 << 10, QueueDepth: 1, Workers: 2})
	ctx := testCtx(t)
	dims := []uint64{writers * each * size}
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		c := e.dial(fmt.Sprintf("w%d", w))
		for i := range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := uint64(w*each + i)
				it := item(1, true, dims, []uint64{k * size}, []uint64{size})
				ids, err := start(ctx, c, []wire.DataItem{it}, pattern(size*elem, byte(k)))
				if err == nil {
					var res wire.DataResults
					res, _, err = wait(ctx, c, ids...)
					if err == nil && res.Items[0].Code != wire.CodeOK {
						err = errors.New(res.Items[0].Message)
					}
				}
				if err != nil {
					errs <- fmt.Errorf("write %d: %w", k, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := e.dial("r")
	for k := range uint64(writers * each) {
		if got := read(t, r, 1, dims, box([]uint64{k * size}, []uint64{size})); !bytes.Equal(got, pattern(size*elem, byte(k))) {
			t.Fatalf("write %d read back differs", k)
		}
	}
	// One write larger than the whole budget goes alone.
	big := box([]uint64{0}, []uint64{64 << 10}) // 256 KiB
	data := pattern(nbytes(big.Size), 99)
	write(t, r, 2, []uint64{64 << 10}, big, data)
	if got := read(t, r, 2, []uint64{64 << 10}, big); !bytes.Equal(got, data) {
		t.Fatal("write larger than the budget read back differs")
	}
}

// TestSessionEnded checks that a client's transfers go with its session,
// and their budget with them.
func TestSessionEnded(t *testing.T) {
	const max = 64 << 10
	e := newEnv(t, Config{MaxBytes: max})
	ctx := testCtx(t)
	dims := []uint64{max / elem}
	a, err := rpc.Dial(ctx, e.addr, rpc.DialOptions{ClientName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	// Uncollected reads hold the whole budget.
	ids, err := start(ctx, a, []wire.DataItem{item(1, false, dims, []uint64{0}, dims)})
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	if got := <-e.ended; got != "a" {
		t.Fatalf("session of %q ended, want a", got)
	}
	// The budget is back: a write of all of it proceeds.
	b := e.dial("b")
	write(t, b, 2, dims, region.Shape(dims...), pattern(max, 1))
	// a, back, is told its transfer was dropped with its connections
	// (unavailable: start it again), not that it never started; b, who
	// never had it, is told it is not found.
	a = e.dial("a")
	res, _, err := wait(ctx, a, ids...)
	if err != nil || res.Items[0].Code != wire.CodeUnavailable || !strings.Contains(res.Items[0].Message, "every connection of client a") {
		t.Fatalf("wait after the session ended: %+v %v, want unavailable, dropped with the connections", res.Items, err)
	}
	if res, _, err := wait(ctx, b, ids...); err != nil || res.Items[0].Code != wire.CodeNotFound {
		t.Fatalf("another client's wait for it: %+v %v, want not found", res.Items, err)
	}
	if got := read(t, a, 2, dims, region.Shape(dims...)); !bytes.Equal(got, pattern(max, 1)) {
		t.Fatal("read back differs")
	}
}

// TestSessionEndedPending ends a session while its transfers are queued
// and running.
func TestSessionEndedPending(t *testing.T) {
	const max = 64 << 10
	cfg := Config{MaxBytes: max, Workers: 1}
	g := newGate(&cfg, 1)
	defer g.release()
	e := newEnv(t, cfg)
	ctx := testCtx(t)
	dims := []uint64{max / elem}
	a, err := rpc.Dial(ctx, e.addr, rpc.DialOptions{ClientName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	half := []uint64{max / 2 / elem}
	if _, err := start(ctx, a, []wire.DataItem{
		item(1, true, dims, []uint64{0}, half),
		item(1, false, dims, half, half),
	}, pattern(max/2, 3)); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	_ = a.Close()
	if got := <-e.ended; got != "a" {
		t.Fatalf("session of %q ended, want a", got)
	}
	g.release()
	// The write started before the session ended is stored all the same,
	// and the budget comes back once the I/O is done.
	b := e.dial("b")
	write(t, b, 2, dims, region.Shape(dims...), pattern(max, 1))
	if got := read(t, b, 1, dims, box([]uint64{0}, half)); !bytes.Equal(got, pattern(max/2, 3)) {
		t.Fatal("a write started before its session ended was not stored")
	}
}

func TestClose(t *testing.T) {
	e := newEnv(t, Config{Workers: 1, QueueDepth: 4})
	c := e.dial("c")
	ctx := testCtx(t)
	const n = 32
	dims := []uint64{n * 100}
	for k := range uint64(n) {
		if _, err := start(ctx, c, []wire.DataItem{item(1, true, dims, []uint64{k * 100}, []uint64{100})}, pattern(400, byte(k))); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.svc.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// Close has waited for the queued writes: they are in the store.
	got := make([]byte, n*400)
	l := regionstore.Layout{Dims: dims, Elem: elem, Mode: regionstore.ByOffset}
	if err := e.store.Read(1, l, region.Shape(dims...), got); err != nil {
		t.Fatal(err)
	}
	for k := range n {
		if !bytes.Equal(got[k*400:(k+1)*400], pattern(400, byte(k))) {
			t.Fatalf("write %d queued before Close is not stored", k)
		}
	}
	_, err := start(ctx, c, []wire.DataItem{item(1, false, dims, []uint64{0}, []uint64{1})})
	if !errors.Is(err, pdc.ErrUnavailable) {
		t.Fatalf("start after Close: %v, want ErrUnavailable", err)
	}
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStorageModeTruncated: a storage mode is a uint32 on the wire; one
// that is a known mode only in its low byte is still unknown.
func TestStorageModeTruncated(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	it := item(1, true, []uint64{4}, []uint64{0}, []uint64{4})
	it.Storage = 256 + uint32(regionstore.ByRegion)
	_, err := start(testCtx(t), c, []wire.DataItem{it}, make([]byte, 16))
	if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "object 1") {
		t.Fatalf("storage mode %d: %v, want ErrInvalid naming object 1", it.Storage, err)
	}
}

// TestHugeRead: a read whose bytes cannot be allocated is refused, not
// left to crash a worker.
func TestHugeRead(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	for _, it := range []wire.DataItem{
		item(1, false, []uint64{1 << 62}, []uint64{0}, []uint64{1 << 62}), // 2^64 bytes: wraps to 0
		item(1, false, []uint64{1 << 50}, []uint64{0}, []uint64{1 << 50}), // 2^52 bytes
	} {
		_, err := start(ctx, c, []wire.DataItem{it})
		if !errors.Is(err, pdc.ErrTooLarge) || !strings.Contains(err.Error(), "object 1") {
			t.Fatalf("read of %v elements: %v, want ErrTooLarge naming object 1", it.Size, err)
		}
	}
	write(t, c, 2, []uint64{4}, region.Shape(4), pattern(16, 1))
}

// TestFailedStartReleases: when a request fails part way, the transfers it
// had already registered (whose ids the client never learns) give their
// budget back.
func TestFailedStartReleases(t *testing.T) {
	const max = 128 << 10
	e := newEnv(t, Config{MaxBytes: max})
	a, b := e.dial("a"), e.dial("b")
	ctx := testCtx(t)
	newer := item(2, true, []uint64{16}, []uint64{0}, []uint64{4})
	newer.DimsVersion = 2
	if _, err := start(ctx, b, []wire.DataItem{newer}, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	dims := []uint64{max / 2 / elem}
	stale := item(2, false, []uint64{16}, []uint64{0}, []uint64{4})
	stale.DimsVersion = 1
	_, err := start(ctx, a, []wire.DataItem{item(1, false, dims, []uint64{0}, dims), stale})
	if !errors.Is(err, pdc.ErrStale) {
		t.Fatalf("got %v, want ErrStale", err)
	}
	// The whole budget is free again.
	all := []uint64{max / elem}
	write(t, b, 3, all, region.Shape(all...), pattern(max, 1))
}

// TestReadsOverBudgetInOneStart: the reads of one request are held until
// the client collects them, which it can only do once the request is
// answered: a request whose reads pass the budget must not wait for
// itself.
func TestReadsOverBudgetInOneStart(t *testing.T) {
	const max = 64 << 10
	e := newEnv(t, Config{MaxBytes: max})
	c := e.dial("c")
	ctx := testCtx(t)
	half := []uint64{max / 2 / elem}
	dims := []uint64{3 * half[0]}
	data := pattern(nbytes(dims), 7)
	write(t, c, 1, dims, region.Shape(dims...), data)
	var items []wire.DataItem
	for k := range uint64(3) {
		items = append(items, item(1, false, dims, []uint64{k * half[0]}, half))
	}
	ids, err := start(ctx, c, items)
	if err != nil {
		t.Fatal(err)
	}
	res, parts, err := wait(ctx, c, ids...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	n := nbytes(half)
	for k, p := range parts {
		if !bytes.Equal(p, data[k*n:(k+1)*n]) {
			t.Fatalf("read %d differs", k)
		}
	}
	// The same in one waiting request, with a write.
	items = append(items, item(1, true, dims, []uint64{0}, half))
	res, parts, err = startWait(ctx, c, items, pattern(n, 8))
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if !bytes.Equal(parts[0], pattern(n, 8)) || !bytes.Equal(parts[2], data[2*n:3*n]) {
		t.Fatal("waiting start read back differs")
	}
}

// TestStartWaitCanceled: a waiting request that the client gives up leaves
// nothing held: the client has no ids to collect with.
func TestStartWaitCanceled(t *testing.T) {
	const max = 64 << 10
	cfg := Config{MaxBytes: max, Workers: 1, buffered: true}
	g := newGate(&cfg, 1)
	defer g.release()
	e := newEnv(t, cfg)
	c := e.dial("c")
	dims := []uint64{max / elem}
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, _, err := startWait(ctx, c, []wire.DataItem{regItem(1, false, dims, []uint64{0}, dims)})
		done <- err
	}()
	<-g.entered
	cancel()
	if err := <-done; !errors.Is(err, pdc.ErrCanceled) {
		t.Fatalf("canceled waiting start: %v, want ErrCanceled", err)
	}
	// The server gave up too (before the read could finish and be
	// answered).
	if err := <-e.started; !errors.Is(err, pdc.ErrCanceled) {
		t.Fatalf("server side of a canceled waiting start: %v, want ErrCanceled", err)
	}
	g.release()
	write(t, e.dial("d"), 2, dims, region.Shape(dims...), pattern(max, 1))
}

// TestStartAfterCloseBudgetFull: a start after Close fails at once even
// when the budget is held by reads nobody collected.
func TestStartAfterCloseBudgetFull(t *testing.T) {
	const max = 64 << 10
	e := newEnv(t, Config{MaxBytes: max})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{max / elem}
	ids, err := start(ctx, c, []wire.DataItem{item(1, false, dims, []uint64{0}, dims)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = start(ctx, c, []wire.DataItem{item(1, true, dims, []uint64{0}, []uint64{1})}, make([]byte, elem))
	if !errors.Is(err, pdc.ErrUnavailable) {
		t.Fatalf("start after Close: %v, want ErrUnavailable", err)
	}
	// What was done before Close can still be collected.
	res, parts, err := wait(ctx, c, ids...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if len(parts[0]) != max {
		t.Fatalf("read collected after Close: %d bytes, want %d", len(parts[0]), max)
	}
}

// Writes of one request that continue each other along the first dim are
// stored as one I/O; each still has its own id and result, and runs that
// break (another object, a gap, other columns) are stored on their own.
// Every byte lands where its own write put it.
func TestMergedWrites(t *testing.T) {
	e := newEnv(t, Config{Workers: 2})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{32, 8}
	boxes := []struct {
		obj uint64
		b   region.Box
	}{
		{5, box([]uint64{0, 0}, []uint64{2, 8})},
		{5, box([]uint64{2, 0}, []uint64{1, 8})},  // continues
		{5, box([]uint64{3, 0}, []uint64{4, 8})},  // continues
		{6, box([]uint64{7, 0}, []uint64{1, 8})},  // another object
		{5, box([]uint64{7, 0}, []uint64{1, 8})},  // back to 5: a new run
		{5, box([]uint64{9, 0}, []uint64{1, 8})},  // a gap
		{5, box([]uint64{10, 2}, []uint64{2, 3})}, // other columns
		{5, box([]uint64{12, 2}, []uint64{3, 3})}, // continues those
		{5, box([]uint64{15, 0}, []uint64{1, 8})}, // full rows again
	}
	var items []wire.DataItem
	var payload [][]byte
	for i, w := range boxes {
		items = append(items, item(w.obj, true, dims, w.b.Off, w.b.Size))
		payload = append(payload, pattern(nbytes(w.b.Size), byte(30+i)))
	}
	ids, err := start(ctx, c, items, payload...)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, id := range ids {
		if id == 0 || seen[id] {
			t.Fatalf("ids %v: each write needs an id of its own", ids)
		}
		seen[id] = true
	}
	res, _, err := wait(ctx, c, ids...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if len(res.Items) != len(boxes) {
		t.Fatalf("%d results for %d writes", len(res.Items), len(boxes))
	}
	// A second wait finds none of them: each was collected.
	res, _, err = wait(ctx, c, ids...)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Items {
		if r.Code != wire.CodeNotFound {
			t.Fatalf("write %d waited twice: code %v", i, r.Code)
		}
	}
	for i, w := range boxes {
		if got := read(t, c, w.obj, dims, w.b); !bytes.Equal(got, payload[i]) {
			t.Errorf("write %d (object %d %v) did not land where it was written", i, w.obj, w.b)
		}
	}
	// Rows never written between the runs stay zero.
	if got := read(t, c, 5, dims, box([]uint64{8, 0}, []uint64{1, 8})); !bytes.Equal(got, make([]byte, nbytes([]uint64{1, 8}))) {
		t.Error("the gap between two runs was written")
	}
}

func TestMergeWritesGroups(t *testing.T) {
	dims := []uint64{32, 8}
	mk := func(obj uint64, b region.Box, off uint64) *transfer {
		n := uint64(nbytes(b.Size))
		return &transfer{item: item(obj, true, dims, b.Off, b.Size), box: b, payOff: off, data: make([]byte, n)}
	}
	var order []*transfer
	var pos uint64
	for _, w := range []struct {
		obj uint64
		b   region.Box
	}{
		{5, box([]uint64{0, 0}, []uint64{2, 8})},
		{5, box([]uint64{2, 0}, []uint64{1, 8})},
		{6, box([]uint64{3, 0}, []uint64{1, 8})},
		{6, box([]uint64{4, 0}, []uint64{1, 8})},
		{6, box([]uint64{6, 0}, []uint64{1, 8})},
	} {
		tr := mk(w.obj, w.b, pos)
		pos += uint64(len(tr.data))
		order = append(order, tr)
	}
	merge(order, make([]byte, pos), nil)
	if len(order[0].followers) != 1 || !order[1].follower || len(order[2].followers) != 1 || !order[3].follower || order[4].follower {
		t.Fatalf("groups: leader 0 has %d followers, leader 2 has %d, 4 follows: %v", len(order[0].followers), len(order[2].followers), order[4].follower)
	}
	if got := order[0].ioBox; !got.Equal(box([]uint64{0, 0}, []uint64{3, 8})) || len(order[0].ioData) != nbytes([]uint64{3, 8}) {
		t.Fatalf("leader 0 stores %v with %d bytes", got, len(order[0].ioData))
	}
}

// Reads of one request that continue each other are read as one, each
// answered with its own bytes, with budget to spare and without any (the
// wait then reads them).
func TestMergedReads(t *testing.T) {
	for _, budget := range []int64{0, 1024} {
		t.Run(fmt.Sprintf("budget %d", budget), func(t *testing.T) {
			e := newEnv(t, Config{Workers: 2, MaxBytes: budget})
			c := e.dial("c")
			ctx := testCtx(t)
			dims := []uint64{40, 16}
			whole := box([]uint64{0, 0}, dims)
			data := pattern(nbytes(dims), 3)
			write(t, c, 9, dims, whole, data)
			var items []wire.DataItem
			var want [][]byte
			for r := uint64(0); r < 20; r++ {
				b := box([]uint64{r, 0}, []uint64{1, 16})
				if r == 12 {
					b = box([]uint64{30, 4}, []uint64{2, 5}) // breaks the run
				}
				items = append(items, item(9, false, dims, b.Off, b.Size))
				want = append(want, read(t, c, 9, dims, b))
			}
			ids, err := start(ctx, c, items)
			if err != nil {
				t.Fatal(err)
			}
			// Wait for the second half first, then all: both see their
			// own bytes.
			res, parts, err := wait(ctx, c, ids[10:]...)
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, res)
			for i, p := range parts {
				if !bytes.Equal(p, want[10+i]) {
					t.Fatalf("read %d answered other bytes", 10+i)
				}
			}
			res, parts, err = wait(ctx, c, ids[:10]...)
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, res)
			for i, p := range parts {
				if !bytes.Equal(p, want[i]) {
					t.Fatalf("read %d answered other bytes", i)
				}
			}
		})
	}
}

// A by-offset read (answered from a view of the file) started after a
// write of the same client that it overlaps waits for it, and reads it.
func TestViewReadWaitsForWrite(t *testing.T) {
	cfg := Config{Workers: 1}
	g := newGate(&cfg, 3)
	defer g.release()
	e := newEnv(t, cfg)
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{64}
	ids, err := start(ctx, c, []wire.DataItem{item(3, true, dims, []uint64{0}, []uint64{16})}, pattern(64, 7))
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered // the write is held
	rd, err := start(ctx, c, []wire.DataItem{item(3, false, dims, []uint64{8}, []uint64{8})})
	if err != nil {
		t.Fatal(err)
	}
	st, err := status(ctx, c, rd[0])
	if err != nil || st[0].State != wire.StatePending {
		t.Fatalf("read behind a held write it overlaps: %+v %v, want pending", st, err)
	}
	g.release()
	res, parts, err := wait(ctx, c, rd[0], ids[0])
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if !bytes.Equal(parts[0], pattern(64, 7)[32:]) {
		t.Fatal("the read did not see the write it waited for")
	}
}

// By-offset reads hold no budget: far more of them than the budget, then
// a write, all waited together.
func TestViewReadsHoldNoBudget(t *testing.T) {
	const max = 64 << 10
	e := newEnv(t, Config{MaxBytes: max})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{16 * max / elem}
	write(t, c, 4, dims, region.Shape(dims...), pattern(16*max, 2))
	var items []wire.DataItem
	for i := range uint64(16) {
		items = append(items, item(4, false, dims, []uint64{i * max / elem}, []uint64{max / elem}))
	}
	rd, err := start(ctx, c, items)
	if err != nil {
		t.Fatal(err)
	}
	wr, err := start(ctx, c, []wire.DataItem{item(5, true, []uint64{max / elem}, []uint64{0}, []uint64{max / elem})}, pattern(max, 3))
	if err != nil {
		t.Fatal(err)
	}
	res, parts, err := wait(ctx, c, append(rd, wr...)...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if got := bytes.Join(parts, nil); !bytes.Equal(got, pattern(16*max, 2)) {
		t.Fatal("reads of 16 times the budget came back wrong")
	}
}

// A read waited after the object grew is read with the newest dims, and
// never applies its older ones (which would cut what was written since).
func TestViewReadAfterDimsGrew(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	v1 := func(it wire.DataItem) wire.DataItem { it.DimsVersion = 1; return it }
	v2 := func(it wire.DataItem) wire.DataItem { it.DimsVersion = 2; return it }
	small, big := []uint64{100}, []uint64{200}
	ids, err := start(ctx, c, []wire.DataItem{v1(item(6, true, small, []uint64{0}, small))}, pattern(100*elem, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := wait(ctx, c, ids...); err != nil {
		t.Fatal(err)
	}
	rd, err := start(ctx, c, []wire.DataItem{v1(item(6, false, small, []uint64{0}, []uint64{10}))})
	if err != nil {
		t.Fatal(err)
	}
	wr, err := start(ctx, c, []wire.DataItem{v2(item(6, true, big, []uint64{150}, []uint64{10}))}, pattern(10*elem, 9))
	if err != nil {
		t.Fatal(err)
	}
	res, parts, err := wait(ctx, c, append(wr, rd...)...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if !bytes.Equal(parts[1], pattern(100*elem, 1)[:10*elem]) {
		t.Fatal("the read waited after the dims grew came back wrong")
	}
	res, parts, err = startWait(ctx, c, []wire.DataItem{v2(item(6, false, big, []uint64{150}, []uint64{10}))})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if !bytes.Equal(parts[0], pattern(10*elem, 9)) {
		t.Fatal("rows written under the grown dims were lost to a read with the older ones")
	}
}

// A column of a wide by-offset object (a run per element) is gathered
// into a buffer rather than sent as a view slice per element; either
// way its values come back.
func TestViewReadOfAColumn(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{200, 64}
	all := pattern(200*64*elem, 4)
	write(t, c, 7, dims, region.Shape(dims...), all)
	res, parts, err := startWait(ctx, c, []wire.DataItem{item(7, false, dims, []uint64{0, 3}, []uint64{200, 1})})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	var want []byte
	for r := range 200 {
		off := (r*64 + 3) * elem
		want = append(want, all[off:off+elem]...)
	}
	if !bytes.Equal(parts[0], want) {
		t.Fatal("a column read back wrong")
	}
}

// A request of writes with nothing queued before it is stored by the
// goroutine that read it, as its bytes arrive: they are in the store when
// its ids come back, and it holds no budget, however many follow.
func TestWritesStoredBeforeTheirAnswer(t *testing.T) {
	const budget = 64 << 10
	e := newEnv(t, Config{MaxBytes: budget})
	c := e.dial("a")
	ctx := testCtx(t)
	rows := uint64(budget / elem)
	dims := []uint64{20 * rows}
	layout := regionstore.Layout{Dims: dims, Elem: elem, Mode: regionstore.ByOffset}
	var ids []uint64
	want := make([]byte, nbytes(dims))
	// 16 writes of the whole budget each, none waited: a write that kept
	// budget would leave the next one waiting for room until ctx ends.
	for i := range uint64(16) {
		box := region.Box{Off: []uint64{i * rows}, Size: []uint64{rows}}
		data := pattern(budget, byte(i))
		got, err := start(ctx, c, []wire.DataItem{item(1, true, dims, box.Off, box.Size)}, data)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		ids = append(ids, got...)
		stored := make([]byte, len(data))
		if err := e.store.Read(1, layout, box, stored); err != nil || !bytes.Equal(stored, data) {
			t.Fatalf("write %d answered before its bytes were stored (read: %v)", i, err)
		}
		copy(want[i*budget:], data)
	}
	// One larger than the whole budget, in two items, goes alone.
	box := region.Box{Off: []uint64{16 * rows}, Size: []uint64{4 * rows}}
	data := pattern(4*budget, 99)
	half := region.Box{Off: []uint64{18 * rows}, Size: []uint64{2 * rows}}
	got, err := start(ctx, c, []wire.DataItem{
		item(1, true, dims, box.Off, []uint64{2 * rows}),
		item(1, true, dims, half.Off, half.Size)}, data)
	if err != nil {
		t.Fatalf("write larger than the budget: %v", err)
	}
	ids = append(ids, got...)
	copy(want[16*budget:], data)
	res, _, err := wait(ctx, c, ids...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if got := read(t, e.dial("b"), 1, dims, region.Box{Off: []uint64{0}, Size: dims}); !bytes.Equal(got, want) {
		t.Fatalf("read back differs from what was written at byte %d", firstDiff(got, want))
	}
	// A bad write answers with its error and leaves the connection serving.
	if _, err := start(ctx, c, []wire.DataItem{item(1, true, dims, []uint64{dims[0]}, []uint64{1})}, make([]byte, elem)); !errors.Is(err, pdc.ErrOutOfRange) {
		t.Fatalf("write outside the dims: got %v, want ErrOutOfRange", err)
	}
	write(t, c, 1, dims, region.Box{Off: []uint64{0}, Size: []uint64{1}}, []byte{1, 2, 3, 4})
}

// firstDiff is the first index where a and b differ, -1 if none.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// A client cut off part way through a write's bytes fails that write only:
// what it stored reads back without a checksum error, and the server goes
// on serving the object.
func TestWriteCutOffMidPayload(t *testing.T) {
	e := newEnv(t, Config{})
	const n = 64 << 20
	dims := []uint64{n / elem}
	whole := region.Box{Off: []uint64{0}, Size: dims}
	for _, st := range []uint32{0, uint32(regionstore.ByRegion)} {
		obj := uint64(1 + st)
		it := item(obj, true, dims, whole.Off, whole.Size)
		it.Storage = st
		c := e.dial(fmt.Sprint("cut-", st))
		// Cut off a moment into sending: the payload is torn wherever
		// the deadline finds it (or, on a fast machine, not at all).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
		_, err := start(ctx, c, []wire.DataItem{it}, pattern(n, 5))
		cancel()
		t.Logf("storage %d: cut-off write: %v", st, err)
		b := e.dial(fmt.Sprint("after-", st))
		ids, err := start(testCtx(t), b, []wire.DataItem{{Obj: obj, Off: whole.Off, Size: whole.Size, Dims: dims, Elem: elem, Storage: st}})
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := wait(testCtx(t), b, ids...)
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, res)
		data := pattern(n/4, 9)
		box := region.Box{Off: []uint64{n / elem / 2}, Size: []uint64{n / 4 / elem}}
		it = item(obj, true, dims, box.Off, box.Size)
		it.Storage = st
		if ids, err = start(testCtx(t), b, []wire.DataItem{it}, data); err != nil {
			t.Fatal(err)
		}
		if res, _, err = wait(testCtx(t), b, ids...); err != nil {
			t.Fatal(err)
		}
		mustOK(t, res)
		rd := item(obj, false, dims, box.Off, box.Size)
		rd.Storage = st
		if ids, err = start(testCtx(t), b, []wire.DataItem{rd}); err != nil {
			t.Fatal(err)
		}
		res, parts, err := wait(testCtx(t), b, ids...)
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, res)
		if !bytes.Equal(parts[0], data) {
			t.Fatalf("storage %d: read back differs at byte %d", st, firstDiff(parts[0], data))
		}
	}
}

// Writes of one client that overlap, queued for the workers, are stored
// in the order they were started: the later one wins, even when a second
// worker is free while the first write is still being stored.
func TestQueuedOverlappingWritesKeepTheirOrder(t *testing.T) {
	cfg := Config{Workers: 2}
	entered, open := make(chan struct{}, 1), make(chan struct{})
	cfg.beforeIO = func(it wire.DataItem) { // holds the first, larger write
		if it.Write && it.Size[0] == 8 {
			entered <- struct{}{}
			<-open
		}
	}
	e := newEnv(t, cfg)
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{16, 16}
	first, second := box([]uint64{0, 0}, []uint64{8, 16}), box([]uint64{3, 0}, []uint64{1, 16})
	a, b := pattern(nbytes(first.Size), 1), pattern(nbytes(second.Size), 2)
	ids, err := start(ctx, c, []wire.DataItem{item(7, true, dims, first.Off, first.Size), item(7, true, dims, second.Off, second.Size)}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	// The second write waits for the first, or (wrongly) a free worker
	// has stored it meanwhile: let that happen before the first goes on.
	e.svc.mu.Lock()
	later := e.svc.mu.transfers.get(ids[1])
	parked := len(later.deps) > 0
	e.svc.mu.Unlock()
	if !parked {
		<-later.done
	}
	close(open)
	res, _, err := wait(ctx, c, ids...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if got := read(t, c, 7, dims, second); !bytes.Equal(got, b) {
		t.Fatal("an earlier overlapping write was stored over a later one")
	}
}

// mapsUnder reports whether this process maps a file under dir.
func mapsUnder(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return bytes.Contains(b, []byte(dir))
}

// The first read of an object is read into a buffer, not mapped: mapping
// a file costs a page fault per few pages, which pays only when the
// object is read again. The second read maps it.
func TestFirstReadIsNotMapped(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	dims := []uint64{(1 << 20) / elem}
	want := pattern(1<<20, 7)
	write(t, c, 7, dims, region.Shape(dims...), want)
	for i, mapped := range []bool{false, true, true} {
		if got := read(t, c, 7, dims, region.Shape(dims...)); !bytes.Equal(got, want) {
			t.Fatalf("read %d: differs at byte %d", i+1, firstDiff(got, want))
		}
		if got := mapsUnder(t, e.dir); got != mapped {
			t.Fatalf("after read %d the object's file is mapped: %v, want %v", i+1, got, mapped)
		}
	}
}

// Small reads are mapped at once: read into buffers, each would be a
// pread of its own.
func TestFirstSmallReadsAreMapped(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	const n, size = 64, 1 << 10
	dims := []uint64{n * size / elem}
	want := pattern(n*size, 9)
	write(t, c, 8, dims, region.Shape(dims...), want)
	var items []wire.DataItem
	for i := range uint64(n) {
		items = append(items, item(8, false, dims, []uint64{i * size / elem}, []uint64{size / elem}))
	}
	ids, err := start(ctx, c, items)
	if err != nil {
		t.Fatal(err)
	}
	res, parts, err := wait(ctx, c, ids...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if got := bytes.Join(parts, nil); !bytes.Equal(got, want) {
		t.Fatalf("read back differs at byte %d", firstDiff(got, want))
	}
	if !mapsUnder(t, e.dir) {
		t.Fatal("the first read of 64 regions of 1 KiB was not mapped")
	}
}
