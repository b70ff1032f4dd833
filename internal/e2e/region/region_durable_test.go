package region_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// Waited writes are in the servers' files when wait returns: they survive
// kill -9 of every server, in every partition and storage mode, and a clean
// restart after that. Overwrites, many small appends and a grown object
// come back too.
func TestRegionDataSurvivesKillAndRestart(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "durable", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{64, 24}
	all := writeDurableObjects(ctx, t, ct, dims)
	e2e.KillAll(t, tmpdir)
	e2e.MustRun(t, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", datadir)
	checkDurable(ctx, t, tmpdir, all, "after kill -9 of every server")

	// Grow the first dim of one object, write the new rows: old rows stay.
	growDurableObject(ctx, t, tmpdir, &all[0], dims)

	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", datadir)
	checkDurable(ctx, t, tmpdir, all, "after a clean restart")
}

// durableObject is an object TestRegionDataSurvivesKillAndRestart wrote
// and what it must hold.
type durableObject struct {
	name  string
	model *clitest.Model
}

// writeDurableObjects creates an object of dims in every partition and
// storage mode and writes it row by row, then overwrites parts of it, each
// write waited; no close, no flush.
func writeDurableObjects(ctx context.Context, t *testing.T, ct *client.Container, dims []uint64) []durableObject {
	t.Helper()
	var all []durableObject
	for _, p := range clitest.Partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			name := fmt.Sprintf("%s-%s", clitest.PartName(p), st)
			o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: p, Storage: st})
			if err != nil {
				t.Fatal(err)
			}
			m := clitest.NewModel(t, dims...)
			// Many small appends: one row at a time, each waited.
			for r := range dims[0] {
				b := clitest.Box([]uint64{r, 0}, []uint64{1, dims[1]})
				data := clitest.Cells(int(dims[1]), int32(r*1000))
				if err := o.Write(ctx, b, data); err != nil {
					t.Fatalf("%s: row %d: %v", name, r, err)
				}
				m.Write(b, data)
			}
			// Overwrites: one inside a stored row, one across many rows.
			for _, b := range []region.Box{clitest.Box([]uint64{5, 3}, []uint64{1, 10}), clitest.Box([]uint64{10, 2}, []uint64{30, 7})} {
				data := clitest.Cells(int(b.Volume()), -7777)
				if err := o.Write(ctx, b, data); err != nil {
					t.Fatalf("%s: overwrite %v: %v", name, b, err)
				}
				m.Write(b, data)
			}
			all = append(all, durableObject{name, m})
			// No close, no flush: only the waits stand behind the data.
		}
	}
	return all
}

// checkDurable checks, from a fresh client, every object holds what was
// written and waited.
func checkDurable(ctx context.Context, t *testing.T, tmpdir string, all []durableObject, when string) {
	t.Helper()
	c := e2e.Connect(t, tmpdir)
	for _, w := range all {
		o, err := c.OpenObject(ctx, w.name)
		if err != nil {
			t.Fatalf("%s: open %s: %v", when, w.name, err)
		}
		got, err := o.GetData(ctx)
		if err != nil {
			t.Fatalf("%s: read %s: %v", when, w.name, err)
		}
		if !bytes.Equal(got, w.model.Data()) {
			t.Fatalf("%s: %s differs from what was written and waited", when, w.name)
		}
	}
}

// growDurableObject grows the first dim of w's object by 16 rows and
// writes them, and makes w's model the grown one.
func growDurableObject(ctx context.Context, t *testing.T, tmpdir string, w *durableObject, dims []uint64) {
	t.Helper()
	c2 := e2e.Connect(t, tmpdir)
	o, err := c2.OpenObject(ctx, w.name)
	if err != nil {
		t.Fatal(err)
	}
	grown := []uint64{dims[0] + 16, dims[1]}
	if err := o.SetDims(ctx, grown); err != nil {
		t.Fatal(err)
	}
	gm := clitest.NewModel(t, grown...)
	copy(gm.Data(), w.model.Data())
	tail := clitest.Box([]uint64{dims[0], 0}, []uint64{16, dims[1]})
	data := clitest.Cells(int(tail.Volume()), 424242)
	if err := o.Write(ctx, tail, data); err != nil {
		t.Fatal(err)
	}
	gm.Write(tail, data)
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	w.model = gm
}

// A data server killed with transfers under way: the wait fails within its
// deadline with an error naming that server, and the part of the object
// on the other server is unaffected.
func TestRegionDataServerKilledMidTransfer(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "killed", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{256, 1024}
	o, err := ct.CreateObject(ctx, "spread", client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic})
	if err != nil {
		t.Fatal(err)
	}
	whole := region.Shape(dims...)
	want := clitest.PatternOf(dims, whole)
	if err := o.Write(ctx, whole, want); err != nil {
		t.Fatal(err)
	}
	// Start a whole-object write and read, then kill server 1 before
	// waiting for them.
	w, err := o.StartWrite(ctx, whole, want)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	r, err := o.StartRead(ctx, whole, got)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Servers()[1]
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim.PID); err != nil {
		t.Fatal(err)
	}
	wctx := e2e.Ctx(t, 20*time.Second)
	err = c.WaitAll(wctx, []*client.Transfer{w, r})
	if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("wait with server 1 killed: got %v, want ErrUnavailable naming rank 1", err)
	}
	if wctx.Err() != nil {
		t.Fatal("the wait ran into its deadline instead of failing on the dead server")
	}

	// A transfer started with a part for the dead server: Start queues it
	// and returns; its wait fails naming that server, rather than "not
	// found" or at its deadline.
	w2, err := o.NewTransfer(ctx, want, client.Write, whole, whole)
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Start(e2e.Ctx(t, 20*time.Second)); err != nil {
		t.Fatalf("start with server 1 killed: %v", err)
	}
	w2ctx := e2e.Ctx(t, 20*time.Second)
	if err := w2.Wait(w2ctx); !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "rank 1") || w2ctx.Err() != nil {
		t.Fatalf("wait for a start with server 1 killed: got %v, want ErrUnavailable naming rank 1", err)
	}

	checkSurvivingHalf(t, o, dims)
}

// checkSurvivingHalf reads o's two blocks of rows, one per server: the
// one on the surviving server reads back whole, the other fails naming
// the dead server (rank 1).
func checkSurvivingHalf(t *testing.T, o *client.Object, dims []uint64) {
	t.Helper()
	half := dims[0] / 2
	var ok, failed int
	for _, b := range []region.Box{clitest.Box([]uint64{0, 0}, []uint64{half, dims[1]}), clitest.Box([]uint64{half, 0}, []uint64{dims[0] - half, dims[1]})} {
		buf := make([]byte, 4*b.Volume())
		err := o.Read(e2e.Ctx(t, 20*time.Second), b, buf)
		switch {
		case err == nil:
			if !bytes.Equal(buf, clitest.PatternOf(dims, b)) {
				t.Fatalf("rows %v on the surviving server read back wrong", b)
			}
			ok++
		case errors.Is(err, pdc.ErrUnavailable) && strings.Contains(err.Error(), "rank 1"):
			failed++
		default:
			t.Fatalf("read %v: %v", b, err)
		}
	}
	if ok != 1 || failed != 1 {
		t.Fatalf("%d blocks read back and %d failed; want one of each", ok, failed)
	}
}

// A client may start more reads than a data server has memory for before
// it waits for any: the server must not block the starts (the client
// would never get to its wait), and every read comes back right.
func TestRegionReadsBeyondServerBudget(t *testing.T) {
	tmpdir := e2e.Up(t, 1, "--data-budget", "1MiB")
	ctx := e2e.Ctx(t, time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "budget", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{64, 16384} // 4 MiB of int32, four times the budget
	o, err := ct.CreateObject(ctx, "big", client.ObjectProps{Dims: dims, Type: region.Int32})
	if err != nil {
		t.Fatal(err)
	}
	whole := region.Shape(dims...)
	want := clitest.PatternOf(dims, whole)
	if err := o.Write(ctx, whole, want); err != nil {
		t.Fatal(err)
	}
	// One read per row, all started, and only then waited; some rows are
	// waited first through their own Wait, the rest together.
	var ts []*client.Transfer
	bufs := make([][]byte, dims[0])
	for r := range dims[0] {
		bufs[r] = make([]byte, 4*dims[1])
		tr, err := o.StartRead(ctx, clitest.Box([]uint64{r, 0}, []uint64{1, dims[1]}), bufs[r])
		if err != nil {
			t.Fatalf("start read of row %d: %v", r, err)
		}
		ts = append(ts, tr)
	}
	for _, tr := range ts[len(ts)-3:] {
		if err := tr.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitAll(ctx, ts); err != nil {
		t.Fatal(err)
	}
	for r := range dims[0] {
		if !bytes.Equal(bufs[r], want[4*r*dims[1]:4*(r+1)*dims[1]]) {
			t.Fatalf("row %d read back wrong", r)
		}
	}
	// A write larger than the whole budget goes alone.
	if err := o.Write(ctx, whole, want); err != nil {
		t.Fatalf("write of 4 MiB through a 1 MiB budget: %v", err)
	}
}

// Deleting an object, or its container, removes its data files from every
// data server.
func TestDeleteRemovesData(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	c := e2e.Connect(t, tmpdir)
	files := func(id uint64) []string {
		m, err := filepath.Glob(filepath.Join(datadir, "data-*", fmt.Sprintf("%016x.*", id)))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ct, _, err := c.CreateContainer(ctx, "doomed", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{64, 8}
	var ids []uint64
	for i, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
		o, err := ct.CreateObject(ctx, fmt.Sprintf("o%d", i), client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic, Storage: st})
		if err != nil {
			t.Fatal(err)
		}
		whole := region.Shape(dims...)
		if err := o.Write(ctx, whole, clitest.PatternOf(dims, whole)); err != nil {
			t.Fatal(err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if len(files(o.ID())) < 2 {
			t.Fatalf("object %d has data files %v; want some on both servers", o.ID(), files(o.ID()))
		}
		ids = append(ids, o.ID())
	}
	o, err := c.OpenObject(ctx, "o0")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if f := files(ids[0]); len(f) != 0 {
		t.Fatalf("deleted object left %v", f)
	}
	if err := ct.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if f := files(ids[1]); len(f) != 0 {
		t.Fatalf("deleted container left its object's data %v", f)
	}
}

// Rows written one by one (Object.Write: one waited request each) while a
// data server is killed: the write that meets the dead server fails
// within its deadline naming it, never hangs; the rows of the other
// server go on being written; and after `pdc up --restart-dead` every
// row a write acknowledged reads back, on both servers.
func TestRegionWritesAcrossAKill(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "across", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	// Region static: the first half of the rows on one server, the rest
	// on the other.
	dims := []uint64{64, 4096}
	o, err := ct.CreateObject(ctx, "rows", client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic})
	if err != nil {
		t.Fatal(err)
	}
	row := func(r uint64) region.Box { return clitest.Box([]uint64{r, 0}, []uint64{1, dims[1]}) }
	acked := clitest.NewModel(t, dims...)
	ackedRows := map[uint64]bool{}
	var victim client.Server
	var failedOnVictim, afterKill int
	for pass := range 2 {
		for r := range dims[0] {
			if pass == 0 && r == dims[0]*3/4 {
				// Kill the server holding the second half of the rows,
				// with a quarter of them written.
				for _, s := range c.Servers() {
					if s.Rank == 1 {
						victim = s
					}
				}
				if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim.PID); err != nil {
					t.Fatal(err)
				}
			}
			data := clitest.Cells(int(dims[1]), int32(pass*100000+int(r)*1000))
			wctx := e2e.Ctx(t, 20*time.Second)
			err := o.Write(wctx, row(r), data)
			switch {
			case err == nil:
				acked.Write(row(r), data)
				ackedRows[r] = true
				if victim.PID != 0 {
					afterKill++
				}
			case victim.PID != 0 && errors.Is(err, pdc.ErrUnavailable) && strings.Contains(err.Error(), "rank 1") && wctx.Err() == nil:
				failedOnVictim++
			default:
				t.Fatalf("pass %d row %d: %v (deadline passed: %v)", pass, r, err, wctx.Err() != nil)
			}
		}
	}
	if failedOnVictim == 0 || afterKill == 0 {
		t.Fatalf("after the kill %d writes failed naming rank 1 and %d succeeded; want some of each", failedOnVictim, afterKill)
	}
	e2e.MustRun(t, "up", "--restart-dead", "--tmpdir", tmpdir)
	c2 := e2e.Connect(t, tmpdir)
	o2, err := c2.OpenObject(ctx, "rows")
	if err != nil {
		t.Fatal(err)
	}
	got, err := o2.GetData(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every acknowledged row holds its last acknowledged value: on the
	// killed server, those written before the kill (no write reached it
	// after).
	want := acked.Data()
	rowBytes := 4 * int(dims[1])
	if len(ackedRows) != int(dims[0])*3/4 {
		t.Fatalf("%d rows acknowledged, want the %d before the kill and on the live server", len(ackedRows), dims[0]*3/4)
	}
	for r := range dims[0] {
		w, g := want[r*uint64(rowBytes):(r+1)*uint64(rowBytes)], got[r*uint64(rowBytes):(r+1)*uint64(rowBytes)]
		if ackedRows[r] && !bytes.Equal(w, g) {
			t.Fatalf("row %d was acknowledged and reads back different after the restart", r)
		}
	}
}

// A client still holding an object's old, smaller dims after a data
// server restart must not cut the rows another client wrote under the
// newer dims: the server refuses the old dims as stale (the newest dims
// version is kept in the object's file), the client refreshes them and
// its write goes through.
func TestOlderDimsAfterRestartKeepNewerRows(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	ctx := e2e.Ctx(t, 2*time.Minute)
	a := e2e.Connect(t, tmpdir)
	ct, _, err := a.CreateContainer(ctx, "stale", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{8, 16}
	for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
		name := fmt.Sprintf("stale-%s", st)
		old, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Storage: st})
		if err != nil {
			t.Fatal(err)
		}
		all := clitest.Box([]uint64{0, 0}, dims)
		if err := old.Write(ctx, all, clitest.Cells(int(all.Volume()), 1)); err != nil {
			t.Fatal(err)
		}

		b := e2e.Connect(t, tmpdir)
		grownObj, err := b.OpenObject(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		grown := []uint64{16, 16}
		if err := grownObj.SetDims(ctx, grown); err != nil {
			t.Fatal(err)
		}
		tail := clitest.Box([]uint64{8, 0}, []uint64{8, 16})
		tailData := clitest.Cells(int(tail.Volume()), 5000)
		if err := grownObj.Write(ctx, tail, tailData); err != nil {
			t.Fatal(err)
		}

		// The same cluster (its secret, its datadir) with its rank
		// restarted, as a client sees a server that crashed and came back.
		e2e.KillAll(t, tmpdir)
		e2e.MustRun(t, "up", "--restart-dead", "--tmpdir", tmpdir)

		// a still holds dims {8, 16}, from before the grow.
		row := clitest.Box([]uint64{0, 0}, []uint64{1, 16})
		rowData := clitest.Cells(16, 9000)
		if err := old.Write(ctx, row, rowData); err != nil {
			t.Fatalf("%s: write with the old dims after the restart: %v (the client should refresh them and write)", name, err)
		}

		fresh := e2e.Connect(t, tmpdir)
		o, err := fresh.OpenObject(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, tail.Volume()*4)
		if err := o.Read(ctx, tail, got); err != nil {
			t.Fatalf("%s: read rows 8-15: %v", name, err)
		}
		if !bytes.Equal(got, tailData) {
			t.Fatalf("%s: rows 8-15, written under the grown dims and waited, differ after a write with the old dims", name)
		}
		got = make([]byte, 16*4)
		if err := o.Read(ctx, row, got); err != nil || !bytes.Equal(got, rowData) {
			t.Fatalf("%s: row 0, written with the refreshed dims: %v", name, err)
		}
	}
}
