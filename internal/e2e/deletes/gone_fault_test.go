package deletes_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
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

// goneData is the data of the faulted delete test's object of index i:
// different for each object, so that a read of another's data shows.
func goneData(i int, n uint64) []byte {
	b := make([]byte, 4*n)
	for j := range n {
		binary.LittleEndian.PutUint32(b[4*j:], uint32(i)<<20^uint32(j*7+3))
	}
	return b
}

// Deletes cut by kill -9 of the deleting client process, or of a server
// (metadata and data) while a client deletes: every object whose delete
// was acknowledged stays deleted (a handle opened before it fails with
// pdc.ErrNotFound, and no file of it is left or comes back, after the
// server's restart and pdc fsck), every object not deleted reads back
// whole, an object whose delete was under way is either whole or gone
// for good, and pdc fsck finds no orphan and no corrupt block (issue 25,
// case 6).
func TestDeleteKilledMidway(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 4*time.Minute)
	c := e2e.Connect(t, tmpdir)
	live, _, err := c.CreateContainer(ctx, "live", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{16, 1024}
	dk := &deleteKill{t: t, ctx: ctx, c: c, tmpdir: tmpdir, datadir: datadir, dims: dims, whole: region.Shape(dims...)}

	for i := range 4 {
		dk.keep = append(dk.keep, dk.create(live, fmt.Sprint("keep-", i)))
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 25))
	// Six cycles make each pairing of the faults once: the client alone
	// or a server too (odd cycles), cut after a random delete or right as
	// the container delete started (every third); twelve made each twice.
	const cycles = 6
	for cycle := range cycles {
		// Odd cycles kill server 1 (metadata and data) too.
		killServer, rank := cycle%2 == 1, 1
		batch, _, err := c.CreateContainer(ctx, fmt.Sprint("batch-", cycle), client.Transient)
		if err != nil {
			t.Fatal(err)
		}
		var singles, members []goneObj
		var names []string
		for i := range 8 {
			o := dk.create(live, fmt.Sprintf("c%d-o%d", cycle, i))
			singles = append(singles, o)
			names = append(names, o.name)
		}
		for i := range 8 {
			members = append(members, dk.create(batch, fmt.Sprintf("c%d-b%d", cycle, i)))
		}
		// Kill after k lines: k deletes acknowledged, the next under way.
		// Every third cycle right after the container delete started.
		k := rng.IntN(len(singles) + 2)
		if cycle%3 == 2 {
			k = len(singles)
		}
		cut := dk.killDeleter(cycle, names, k, killServer, rank)
		gone := dk.checkCycle(cycle, singles, members, cut)
		dk.finishCycle(cycle, singles, members, cut, gone)
	}
	// Every server of the cluster is alive: none died but those killed.
	l, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Servers {
		if !e2e.Alive(s.PID) {
			t.Fatalf("server of rank %d (pid %d) died", s.Rank, s.PID)
		}
	}
	t.Logf("%d cycles (%d server restarts): %d acknowledged deletes checked deleted, %d acknowledged writes checked whole, %d deletes cut under way; lost 0",
		cycles, dk.restarts, dk.ackDeletes, dk.ackWrites, dk.underWay)
}

// goneObj is an object of TestDeleteKilledMidway.
type goneObj struct {
	i    int
	name string
	h    *client.Object // opened before any delete
}

// deleteKill is the state of TestDeleteKilledMidway: its cluster, the
// objects never deleted, and the counts for the fault table.
type deleteKill struct {
	t               *testing.T
	ctx             context.Context
	c               *client.Client
	tmpdir, datadir string
	dims            []uint64
	whole           region.Box
	seq             int
	keep            []goneObj

	ackDeletes, ackWrites, underWay, restarts int
}

// deleterCut is where a deleter process was killed: the deletes it had
// acknowledged, and whether its container delete had started or ended.
type deleterCut struct {
	acked                 map[string]bool
	contStarted, contDone bool
}

// create creates an object in ct, alternating the storage modes, and
// writes and flushes its data.
func (dk *deleteKill) create(ct *client.Container, name string) goneObj {
	t, ctx := dk.t, dk.ctx
	t.Helper()
	dk.seq++
	storage := []client.Storage{client.StorageByOffset, client.StorageByRegion}[dk.seq%2]
	o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dk.dims, Type: region.Int32, Partition: client.RegionStatic, Storage: storage})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Write(ctx, dk.whole, goneData(dk.seq, dk.whole.Volume())); err != nil {
		t.Fatal(err)
	}
	if err := o.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return goneObj{dk.seq, name, o}
}

// exists reports whether the object reads back as written, through a
// handle opened now; an error other than ErrNotFound fails the test.
func (dk *deleteKill) exists(o goneObj) bool {
	t, ctx, whole := dk.t, dk.ctx, dk.whole
	t.Helper()
	h, err := dk.c.OpenObject(ctx, o.name)
	if errors.Is(err, pdc.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatalf("open %s: %v", o.name, err)
	}
	got := make([]byte, 4*whole.Volume())
	if err := h.Read(ctx, whole, got); err != nil {
		t.Fatalf("read %s: %v", o.name, err)
	}
	if !bytes.Equal(got, goneData(o.i, whole.Volume())) {
		t.Fatalf("object %s reads back other bytes than were written", o.name)
	}
	return true
}

// deleted checks that a deleted object stays so: the handle opened
// before the delete can neither write nor read it.
func (dk *deleteKill) deleted(o goneObj) {
	t, ctx, whole := dk.t, dk.ctx, dk.whole
	t.Helper()
	if _, err := dk.c.OpenObject(ctx, o.name); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("open of deleted object %s: %v, want ErrNotFound", o.name, err)
	}
	err := o.h.Write(ctx, whole, goneData(o.i, whole.Volume()))
	if !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("write through a handle to deleted object %s: %v, want ErrNotFound", o.name, err)
	}
	if err := o.h.Read(ctx, whole, make([]byte, 4*whole.Volume())); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("read through a handle to deleted object %s: %v, want ErrNotFound", o.name, err)
	}
}

// noFiles waits for the files of deleted objects to go: tombstones
// not confirmed at the delete are pushed again within 15 s.
func (dk *deleteKill) noFiles(gone []goneObj) {
	t := dk.t
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	wctx := e2e.Ctx(t, time.Minute)
	for _, o := range gone {
		for len(clitest.ObjectFiles(t, dk.datadir, o.h.ID())) > 0 {
			select {
			case <-tick.C:
			case <-wctx.Done():
				t.Fatalf("deleted object %s still has files %v", o.name, clitest.ObjectFiles(t, dk.datadir, o.h.ID()))
			}
		}
	}
}

// killDeleter runs a deleter process of the named objects and its batch
// container, and kills it after k lines of its output, killing server
// rank too if killServer (then restarting it in place).
func (dk *deleteKill) killDeleter(cycle int, names []string, k int, killServer bool, rank int) deleterCut {
	t, tmpdir := dk.t, dk.tmpdir
	t.Helper()
	b, out, in := e2e.ClientProc(t, tmpdir, "deleter", "PDC_E2E_OBJS="+strings.Join(names, " "))
	in.Close()
	cut := deleterCut{acked: map[string]bool{}}
	serverKilled := false
	note := func(line string) {
		switch {
		case strings.HasPrefix(line, "deleted "):
			cut.acked[strings.TrimPrefix(line, "deleted ")] = true
		case line == "deleting-cont":
			cut.contStarted = true
		case line == "deleted-cont":
			cut.contDone = true
		case serverKilled && strings.HasPrefix(line, "error ") && strings.Contains(line, "server unavailable"):
			// The server went first: the deleter may see it go before
			// its own kill lands.
		default:
			t.Fatalf("cycle %d: the deleter said %q", cycle, line)
		}
	}
	for n := 0; n <= k; n++ {
		if !out.Scan() {
			t.Fatalf("cycle %d: the deleter ended (%v) after %d lines", cycle, out.Err(), n)
		}
		note(out.Text())
	}
	var victim int
	if killServer {
		l, err := cluster.ReadList(tmpdir)
		if err != nil {
			t.Fatal(err)
		}
		victim = l.Servers[rank].PID
		if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		serverKilled = true
	}
	if err := b.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// What the deleter said before it died is still in the pipe: it may
	// have gone on past the k-th line, acknowledging more deletes or
	// starting the container's, before the kill landed. Read it all
	// before Wait closes the pipe.
	for out.Scan() {
		note(out.Text())
	}
	_ = b.Wait()
	t.Logf("cycle %d: killed %s after %d deletes acknowledged (container delete started %v)",
		cycle, map[bool]string{true: fmt.Sprintf("server %d and the client", rank), false: "the client"}[killServer], len(cut.acked), cut.contStarted)
	if killServer {
		if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim); err != nil {
			t.Fatal(err)
		}
		clitest.RestartServer(t, dk.ctx, tmpdir, dk.datadir, rank, 2)
		dk.restarts++
	}
	return cut
}

// checkCycle checks, after the kill, the objects never deleted are whole,
// those whose delete was acknowledged stay deleted, and one under way is
// either; it returns the objects gone.
func (dk *deleteKill) checkCycle(cycle int, singles, members []goneObj, cut deleterCut) (gone []goneObj) {
	t := dk.t
	t.Helper()
	for _, o := range dk.keep {
		if !dk.exists(o) {
			t.Fatalf("cycle %d: object %s, never deleted, is gone", cycle, o.name)
		}
		dk.ackWrites++
	}
	// The deleter deletes singles in order: the first len(acked) are
	// acknowledged, the next one was under way (unless the container
	// delete had started), the rest were never touched.
	for j, o := range singles {
		switch {
		case cut.acked[o.name]:
			dk.deleted(o)
			dk.ackDeletes++
			gone = append(gone, o)
		case j == len(cut.acked) && !cut.contStarted:
			dk.underWay++
			if dk.exists(o) {
				dk.ackWrites++
			} else {
				// Committed, not answered: gone for good.
				dk.deleted(o)
				gone = append(gone, o)
			}
		default:
			if !dk.exists(o) {
				t.Fatalf("cycle %d: object %s, never deleted, is gone", cycle, o.name)
			}
			dk.ackWrites++
		}
	}
	if cut.contDone {
		for _, o := range members {
			dk.deleted(o)
			dk.ackDeletes++
		}
	} else if cut.contStarted {
		// Under way: nothing of them is acknowledged, written or
		// deleted; finished below.
		dk.underWay += len(members)
	} else {
		for _, o := range members {
			if !dk.exists(o) {
				t.Fatalf("cycle %d: object %s, never deleted, is gone", cycle, o.name)
			}
			dk.ackWrites++
		}
	}
	return gone
}

// finishCycle deletes what is left of the cycle's objects (the container
// delete, cut, finishes when run again; the test holds its objects open),
// and checks their files go, pdc fsck finds the cluster clean, and no
// file of a deleted object comes back.
func (dk *deleteKill) finishCycle(cycle int, singles, members []goneObj, cut deleterCut, gone []goneObj) {
	t, ctx, c := dk.t, dk.ctx, dk.c
	t.Helper()
	for _, o := range singles {
		if h, err := c.OpenObject(ctx, o.name); err == nil {
			if err := h.Delete(ctx); err != nil {
				t.Fatal(err)
			}
			gone = append(gone, o)
		}
	}
	// A container delete the deleter was killed in may have finished on
	// the servers before its answer came: under way, it leaves the
	// container whole or gone (its members are checked gone below).
	n, err := c.DeleteTransient(ctx)
	switch {
	case err != nil:
		t.Fatalf("cycle %d: finish the container delete: %v", cycle, err)
	case cut.contDone && n != 0, !cut.contStarted && n != 1, n > 1:
		t.Fatalf("cycle %d: finish the container delete: %d deleted (the deleter's had started %v, finished %v)", cycle, n, cut.contStarted, cut.contDone)
	}
	for _, o := range members {
		dk.deleted(o)
		gone = append(gone, o)
	}
	dk.noFiles(gone)
	if out := e2e.MustRun(t, "fsck", "--tmpdir", dk.tmpdir); !strings.Contains(out, "clean: 0 orphaned objects removed, no corrupt blocks") {
		t.Fatalf("cycle %d: fsck:\n%s", cycle, out)
	}
	for _, o := range gone {
		if f := clitest.ObjectFiles(t, dk.datadir, o.h.ID()); len(f) > 0 {
			t.Fatalf("cycle %d: files of deleted object %s came back: %v", cycle, o.name, f)
		}
	}
}
