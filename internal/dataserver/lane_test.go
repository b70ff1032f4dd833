package dataserver

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl/lane"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// getLane asks for a lane of size bytes on c and maps it, as a client does.
func getLane(t *testing.T, c *rpc.Conn, size int) (uint64, []byte) {
	t.Helper()
	ctx := testCtx(t)
	rep, err := c.Call(ctx, wire.MethodDataLane, (&wire.DataLaneReq{Size: uint64(size)}).Marshal(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m wire.DataLane
	if err := m.Unmarshal(rep.Header); err != nil {
		t.Fatal(err)
	}
	f, err := lane.Fetch(ctx, m.Path, m.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := lane.Map(f, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lane.Unmap(mem) })
	// The token is good for one hand-over.
	if _, err := lane.Fetch(ctx, m.Path, m.Token); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("second fetch of a lane: %v, want ErrNotFound", err)
	}
	return m.ID, mem
}

// TestLaneWritesAndReads stores writes from a lane, alone (stored as the
// request is read) and next to payload writes and reads (the general
// path), and answers waits into the lane; every byte reads back the same
// through the socket.
func TestLaneWritesAndReads(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	id, mem := getLane(t, c, 1<<20)
	dims := []uint64{256, 64} // 64 KiB of 4-byte elements
	rows := func(r0, n uint64) region.Box { return box([]uint64{r0, 0}, []uint64{n, 64}) }

	// Two lane writes that continue each other, in one request.
	a, b := pattern(32*256, 1), pattern(32*256, 2)
	copy(mem[4096:], a)
	copy(mem[4096+len(a):], b)
	itA, itB := item(5, true, dims, rows(0, 32).Off, rows(0, 32).Size), item(5, true, dims, rows(32, 32).Off, rows(32, 32).Size)
	itA.Lane, itB.Lane = 4096+1, uint64(4096+len(a))+1
	m := wire.DataStart{Items: []wire.DataItem{itA, itB}, Lane: id}
	rep, err := c.Call(ctx, wire.MethodDataStart, m.Marshal(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids wire.DataIDs
	if err := ids.Unmarshal(rep.Header); err != nil || len(ids.IDs) != 2 {
		t.Fatalf("ids %v, %v", ids.IDs, err)
	}
	// Answered means stored: the client may reuse the space at once.
	clear(mem[4096 : 4096+2*len(a)])
	res, _, err := wait(ctx, c, ids.IDs...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if got := read(t, e.dial("d"), 5, dims, rows(0, 64)); !bytes.Equal(got, append(append([]byte(nil), a...), b...)) {
		t.Fatal("lane writes read back wrong")
	}

	// A lane write, a payload write and a read in one request.
	lw, pw := pattern(16*256, 3), pattern(16*256, 4)
	copy(mem[0:], lw)
	itL := item(5, true, dims, rows(64, 16).Off, rows(64, 16).Size)
	itL.Lane = 1
	itP := item(5, true, dims, rows(80, 16).Off, rows(80, 16).Size)
	itR := item(5, false, dims, rows(64, 32).Off, rows(64, 32).Size)
	m = wire.DataStart{Items: []wire.DataItem{itL, itP, itR}, Lane: id}
	rep, err = c.Call(ctx, wire.MethodDataStart, m.Marshal(nil), [][]byte{pw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ids.Unmarshal(rep.Header); err != nil || len(ids.IDs) != 3 {
		t.Fatalf("ids %v, %v", ids.IDs, err)
	}
	clear(mem[:len(lw)])
	// The read's bytes go into the lane at 64 KiB; the writes have none.
	w := wire.DataIDs{IDs: ids.IDs, Lane: id, LaneOffs: []uint64{0, 0, 65536 + 1}}
	rep, err = c.Call(ctx, wire.MethodDataWait, w.Marshal(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, parts, err := results(rep)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	want := append(append([]byte(nil), lw...), pw...)
	if !res.Items[2].InLane || res.Items[2].Size != uint64(len(want)) || len(parts[2]) != 0 {
		t.Fatalf("read result %+v with %d payload bytes, want %d bytes in the lane", res.Items[2], len(parts[2]), len(want))
	}
	if !bytes.Equal(mem[65536:65536+len(want)], want) {
		t.Fatal("the read's bytes in the lane differ")
	}
}

// TestLaneBadInput: a lane that is not the client's, offsets outside the
// lane, a mismatched wait and bad sizes each get an error naming what was
// wrong, and the server goes on serving.
func TestLaneBadInput(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	id, _ := getLane(t, c, 64<<10)
	dims := []uint64{64, 64}
	wr := item(6, true, dims, []uint64{0, 0}, []uint64{16, 64}) // 4 KiB
	for _, tc := range []struct {
		name string
		conn *rpc.Conn
		lane uint64
		off  uint64
		want error
		msg  string
	}{
		{"another client's lane", e.dial("other"), id, 1, pdc.ErrNotFound, "lane"},
		{"unknown lane", c, id + 100, 1, pdc.ErrNotFound, "lane"},
		{"past the end", c, id, 64<<10 - 4096 + 2, pdc.ErrInvalid, "outside"},
		{"far past the end", c, id, 1 << 62, pdc.ErrInvalid, "outside"},
		{"no lane named", c, 0, 1, pdc.ErrInvalid, "lane"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := wr
			it.Lane = tc.off
			m := wire.DataStart{Items: []wire.DataItem{it}, Lane: tc.lane}
			_, err := tc.conn.Call(ctx, wire.MethodDataStart, m.Marshal(nil), nil, nil)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v mentioning %q", err, tc.want, tc.msg)
			}
			// With a read next to it, through the general path.
			rd := item(6, false, dims, []uint64{0, 0}, []uint64{1, 1})
			m.Items = append(m.Items, rd)
			if _, err := tc.conn.Call(ctx, wire.MethodDataStart, m.Marshal(nil), nil, nil); !errors.Is(err, tc.want) {
				t.Fatalf("with a read: got %v, want %v", err, tc.want)
			}
		})
	}
	for _, size := range []uint64{0, 100, lane.Align + 1, MaxLane + lane.Align} {
		_, err := c.Call(ctx, wire.MethodDataLane, (&wire.DataLaneReq{Size: size}).Marshal(nil), nil, nil)
		if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "lane of") {
			t.Fatalf("lane of %d bytes: %v, want ErrInvalid", size, err)
		}
	}
	// A wait whose lane places do not match its ids, or lie outside.
	ids, err := start(ctx, c, []wire.DataItem{item(6, false, dims, []uint64{0, 0}, []uint64{16, 64})})
	if err != nil {
		t.Fatal(err)
	}
	w := wire.DataIDs{IDs: ids, Lane: id, LaneOffs: []uint64{1, 1}}
	if _, err := c.Call(ctx, wire.MethodDataWait, w.Marshal(nil), nil, nil); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("wait with 2 places for 1 id: %v, want ErrInvalid", err)
	}
	w.LaneOffs = []uint64{64<<10 - 100}
	rep, err := c.Call(ctx, wire.MethodDataWait, w.Marshal(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res wire.DataResults
	if err := res.Unmarshal(rep.Header); err != nil {
		t.Fatal(err)
	}
	if r := res.Items[0]; r.Code != wire.CodeOf(pdc.ErrInvalid) || !strings.Contains(r.Message, "object 6") || r.InLane {
		t.Fatalf("read into a place past the lane's end: %+v", r)
	}
	// Still serving, nothing stored by the refused requests.
	if got := read(t, c, 6, dims, region.Shape(dims...)); !bytes.Equal(got, make([]byte, nbytes(dims))) {
		t.Fatal("a refused request left data behind")
	}
}

// TestLaneDroppedWithSession: a client's lane goes with its session, and a
// new lane replaces the old.
func TestLaneDroppedWithSession(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	old, _ := getLane(t, c, 64<<10)
	id, _ := getLane(t, c, 64<<10)
	dims := []uint64{64, 64}
	it := item(7, true, dims, []uint64{0, 0}, []uint64{16, 64})
	it.Lane = 1
	m := wire.DataStart{Items: []wire.DataItem{it}, Lane: old}
	if _, err := c.Call(ctx, wire.MethodDataStart, m.Marshal(nil), nil, nil); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("replaced lane: %v, want ErrNotFound", err)
	}
	m.Lane = id
	if _, err := c.Call(ctx, wire.MethodDataStart, m.Marshal(nil), nil, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := <-e.ended; got != "c" {
		t.Fatalf("session of %q ended", got)
	}
	c2 := e.dial("c")
	if _, err := c2.Call(ctx, wire.MethodDataStart, m.Marshal(nil), nil, nil); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("lane after its session ended: %v, want ErrNotFound", err)
	}
	if n := e.lanes(); n != 0 {
		t.Fatalf("%d lanes kept after their session ended", n)
	}
}

// TestLaneOutlivesItsClient: a client that goes while its lane writes wait
// for a worker does not take the lane's memory from under them: they are
// stored from it once the worker gets to them, the lane is unmapped after,
// and the server goes on serving.
func TestLaneOutlivesItsClient(t *testing.T) {
	cfg := Config{}
	g := newGate(&cfg, 8)
	e := newEnv(t, cfg)
	ctx := testCtx(t)
	a, err := rpc.Dial(ctx, e.addr, rpc.DialOptions{ClientName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	id, mem := getLane(t, a, 1<<20)
	dims := []uint64{256, 64}
	want := pattern(64<<10, 5)
	copy(mem, want)
	it := item(8, true, dims, []uint64{0, 0}, dims)
	it.Lane = 1
	m := wire.DataStart{Items: []wire.DataItem{it}, Lane: id}
	p, err := a.Send(ctx, wire.MethodDataStart, m.Marshal(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered // the write is at a worker, held
	_ = a.Close()
	_, _ = p.Wait(ctx)
	if got := <-e.ended; got != "a" {
		t.Fatalf("session of %q ended, want a", got)
	}
	_ = lane.Unmap(mem) // the client's mapping goes too
	g.release()
	b := e.dial("b")
	if got := read(t, b, 8, dims, region.Shape(dims...)); !bytes.Equal(got, want) {
		t.Fatal("the write from the lane of a client that left did not store its bytes")
	}
	if n := e.lanes(); n != 0 {
		t.Fatalf("%d lanes kept after their session ended", n)
	}
}

// lanes is how many lanes the service holds.
func (e *env) lanes() int {
	e.svc.lanes.mu.Lock()
	defer e.svc.lanes.mu.Unlock()
	return len(e.svc.lanes.byID)
}

// TestLaneCopyAfterCut: a wait copies a viewed read into the lane after
// the object's lock is let go; another client's newer, smaller dims may
// cut the file in between. The copy then reads past the file's end, which
// must fail that read (stale), not kill the server. (Found by review: it
// crashed the process every run.)
func TestLaneCopyAfterCut(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := testCtx(t)
	r, w := e.dial("r"), e.dial("w")
	id, _ := getLane(t, r, 8<<20)
	const rows, cols = 1024, 1024 // 4 MiB of 4-byte elements
	big, small := []uint64{rows, cols}, []uint64{1, cols}
	full := pattern(rows*cols*elem, 1)
	version := uint64(1)
	inLane, stale := 0, 0
	for i, until := 0, time.Now().Add(3*time.Second); time.Now().Before(until); i++ {
		it := item(3, true, big, []uint64{0, 0}, big)
		it.DimsVersion = version
		ids, err := start(ctx, w, []wire.DataItem{it}, full)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := wait(ctx, w, ids...); err != nil {
			t.Fatal(err)
		}
		rd := item(3, false, big, []uint64{rows / 2, 0}, []uint64{rows / 2, cols})
		rd.DimsVersion = version
		rids, err := start(ctx, r, []wire.DataItem{rd})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(time.Duration(i%20) * 50 * time.Microsecond) // vary the race
			sh := item(3, true, small, []uint64{0, 0}, small)
			sh.DimsVersion = version + 1
			if ids, err := start(ctx, w, []wire.DataItem{sh}, full[:cols*elem]); err == nil {
				_, _, _ = wait(ctx, w, ids...)
			}
		})
		m := wire.DataIDs{IDs: rids, Lane: id, LaneOffs: []uint64{1}}
		rep, err := r.Call(ctx, wire.MethodDataWait, m.Marshal(nil), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := results(rep)
		if err != nil {
			t.Fatal(err)
		}
		switch it := res.Items[0]; {
		case it.InLane:
			inLane++
		case it.Code == wire.CodeOf(pdc.ErrStale):
			stale++
		default:
			t.Fatalf("read racing a cut: %+v, want it in the lane or stale", it)
		}
		wg.Wait()
		version += 2
	}
	t.Logf("%d reads copied into the lane, %d stale", inLane, stale)
}

// TestLaneGoneMidWait: a wait naming a lane the client has since replaced
// gets its reads in the answer, not an error.
func TestLaneGoneMidWait(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	old, _ := getLane(t, c, 64<<10)
	dims := []uint64{64, 64}
	want := pattern(nbytes(dims), 3)
	write(t, c, 9, dims, region.Shape(dims...), want)
	ids, err := start(ctx, c, []wire.DataItem{item(9, false, dims, []uint64{0, 0}, dims)})
	if err != nil {
		t.Fatal(err)
	}
	getLane(t, c, 64<<10) // replaces old
	m := wire.DataIDs{IDs: ids, Lane: old, LaneOffs: []uint64{1}}
	rep, err := c.Call(ctx, wire.MethodDataWait, m.Marshal(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, parts, err := results(rep)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if res.Items[0].InLane || !bytes.Equal(parts[0], want) {
		t.Fatalf("read through a replaced lane: %+v, want its bytes in the answer", res.Items[0])
	}
}

// TestLaneSocketSilentPeer: a connection to the lane socket that never
// says anything does not hold up the service's Close.
func TestLaneSocketSilentPeer(t *testing.T) {
	e := newEnv(t, Config{laneHello: time.Hour}) // longer than the test
	c := e.dial("c")
	ctx := testCtx(t)
	rep, err := c.Call(ctx, wire.MethodDataLane, (&wire.DataLaneReq{Size: 64 << 10}).Marshal(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m wire.DataLane
	if err := m.Unmarshal(rep.Header); err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", m.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Wait until the server holds the connection, then close the service.
	for e.laneConns() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the lane socket never took the connection")
		case <-time.After(time.Millisecond):
		}
	}
	closed := make(chan struct{})
	go func() { _ = e.svc.Close(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close waits for a silent peer of the lane socket")
	}
}

// laneConns is how many lane socket connections the service holds.
func (e *env) laneConns() int {
	e.svc.lanes.mu.Lock()
	defer e.svc.lanes.mu.Unlock()
	return len(e.svc.lanes.conns)
}

// TestLaneWaitedStartReads: a waited start puts its reads' bytes in the
// lane where their items say (what the client's Transfer.Do asks for),
// answers the others in the payload, and a start that is not waited may
// not name places for reads.
func TestLaneWaitedStartReads(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("c")
	ctx := testCtx(t)
	id, mem := getLane(t, c, 1<<20)
	dims := []uint64{128, 64}
	rows := func(r0, n uint64) region.Box { return box([]uint64{r0, 0}, []uint64{n, 64}) }
	data := pattern(128*256, 7)
	if got := read(t, c, 8, dims, region.Shape(dims...)); len(got) != len(data) {
		t.Fatalf("read %d bytes of a %d-byte object", len(got), len(data))
	}
	w := item(8, true, dims, rows(0, 128).Off, rows(0, 128).Size)
	if _, err := c.Call(ctx, wire.MethodDataStart, (&wire.DataStart{Items: []wire.DataItem{w}, Wait: true}).Marshal(nil), [][]byte{data}, nil); err != nil {
		t.Fatal(err)
	}
	inLane, inPayload := item(8, false, dims, rows(0, 64).Off, rows(0, 64).Size), item(8, false, dims, rows(64, 64).Off, rows(64, 64).Size)
	inLane.Lane = 4096 + 1
	m := wire.DataStart{Items: []wire.DataItem{inLane, inPayload}, Lane: id, Wait: true}
	rep, err := c.Call(ctx, wire.MethodDataStart, m.Marshal(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, parts, err := results(rep)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	half := len(data) / 2
	if r := res.Items[0]; !r.InLane || r.Size != uint64(half) || len(parts[0]) != 0 || !bytes.Equal(mem[4096:4096+half], data[:half]) {
		t.Fatalf("the read with a place in the lane: %+v, %d payload bytes, lane bytes right: %v", r, len(parts[0]), bytes.Equal(mem[4096:4096+half], data[:half]))
	}
	if r := res.Items[1]; r.InLane || !bytes.Equal(parts[1], data[half:]) {
		t.Fatalf("the read without a place: %+v, payload right: %v", r, bytes.Equal(parts[1], data[half:]))
	}
	m.Wait = false
	if _, err := c.Call(ctx, wire.MethodDataStart, m.Marshal(nil), nil, nil); !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "not waited") {
		t.Fatalf("a read with a lane place in a start not waited: %v, want ErrInvalid", err)
	}
}
