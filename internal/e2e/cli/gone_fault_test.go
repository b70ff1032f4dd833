package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

// deleterRole is the client role "deleter": it deletes the objects named
// in $PDC_E2E_OBJS (space-separated), one at a time, saying "deleted
// NAME" once each delete returned, then says "deleting-cont" and deletes
// the transient containers with their objects, open or not (as pdc down
// does), saying "deleted-cont" once that returned. It stops at the first
// error ("error NAME MSG").
func deleterRole(ctx context.Context, c *client.Client, out *bufio.Writer) error {
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	for _, name := range strings.Fields(os.Getenv("PDC_E2E_OBJS")) {
		o, err := c.OpenObject(ctx, name)
		if err == nil {
			err = o.Delete(ctx)
		}
		if err != nil {
			say("error %s %v", name, err)
			return nil
		}
		say("deleted %s", name)
	}
	say("deleting-cont")
	if _, err := c.DeleteTransient(ctx); err != nil {
		say("error transient %v", err)
		return nil
	}
	say("deleted-cont")
	return nil
}

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
	whole := region.Shape(dims...)
	type obj struct {
		i    int
		name string
		h    *client.Object // opened before any delete
	}
	seq := 0
	create := func(ct *client.Container, name string) obj {
		t.Helper()
		seq++
		storage := []client.Storage{client.StorageByOffset, client.StorageByRegion}[seq%2]
		o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic, Storage: storage})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Write(ctx, whole, goneData(seq, whole.Volume())); err != nil {
			t.Fatal(err)
		}
		if err := o.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		return obj{seq, name, o}
	}
	// exists reports whether the object reads back as written, through a
	// handle opened now; an error other than ErrNotFound fails the test.
	exists := func(o obj) bool {
		t.Helper()
		h, err := c.OpenObject(ctx, o.name)
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
	deleted := func(o obj) {
		t.Helper()
		if _, err := c.OpenObject(ctx, o.name); !errors.Is(err, pdc.ErrNotFound) {
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
	noFiles := func(gone []obj) {
		t.Helper()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		wctx := e2e.Ctx(t, time.Minute)
		for _, o := range gone {
			for len(objectFiles(t, datadir, o.h.ID())) > 0 {
				select {
				case <-tick.C:
				case <-wctx.Done():
					t.Fatalf("deleted object %s still has files %v", o.name, objectFiles(t, datadir, o.h.ID()))
				}
			}
		}
	}

	var keep []obj
	for i := range 4 {
		keep = append(keep, create(live, fmt.Sprint("keep-", i)))
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 25))
	// Six cycles make each pairing of the faults once: the client alone
	// or a server too (odd cycles), cut after a random delete or right as
	// the container delete started (every third); twelve made each twice.
	const cycles = 6
	var ackDeletes, ackWrites, underWay, restarts int
	for cycle := range cycles {
		// Odd cycles kill server 1 (metadata and data) too.
		killServer, rank := cycle%2 == 1, 1
		batch, _, err := c.CreateContainer(ctx, fmt.Sprint("batch-", cycle), client.Transient)
		if err != nil {
			t.Fatal(err)
		}
		var singles, members []obj
		var names []string
		for i := range 8 {
			o := create(live, fmt.Sprintf("c%d-o%d", cycle, i))
			singles = append(singles, o)
			names = append(names, o.name)
		}
		for i := range 8 {
			members = append(members, create(batch, fmt.Sprintf("c%d-b%d", cycle, i)))
		}

		b, out, in := e2e.ClientProc(t, tmpdir, "deleter", "PDC_E2E_OBJS="+strings.Join(names, " "))
		in.Close()
		// Kill after k lines: k deletes acknowledged, the next under way.
		// Every third cycle right after the container delete started.
		k := rng.IntN(len(singles) + 2)
		if cycle%3 == 2 {
			k = len(singles)
		}
		acked := map[string]bool{}
		contStarted, contDone := false, false
		for n := 0; n <= k; n++ {
			if !out.Scan() {
				t.Fatalf("cycle %d: the deleter ended (%v) after %d lines", cycle, out.Err(), n)
			}
			line := out.Text()
			switch {
			case strings.HasPrefix(line, "deleted "):
				acked[strings.TrimPrefix(line, "deleted ")] = true
			case line == "deleting-cont":
				contStarted = true
			case line == "deleted-cont":
				contDone = true
			default:
				t.Fatalf("cycle %d: the deleter said %q", cycle, line)
			}
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
		}
		if err := b.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = b.Wait()
		t.Logf("cycle %d: killed %s after %d deletes acknowledged (container delete started %v)",
			cycle, map[bool]string{true: fmt.Sprintf("server %d and the client", rank), false: "the client"}[killServer], len(acked), contStarted)
		if killServer {
			if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim); err != nil {
				t.Fatal(err)
			}
			restartServer(t, ctx, tmpdir, datadir, rank, 2)
			restarts++
		}

		var gone []obj
		for _, o := range keep {
			if !exists(o) {
				t.Fatalf("cycle %d: object %s, never deleted, is gone", cycle, o.name)
			}
			ackWrites++
		}
		// The deleter deletes singles in order: the first len(acked) are
		// acknowledged, the next one was under way (unless the container
		// delete had started), the rest were never touched.
		for j, o := range singles {
			switch {
			case acked[o.name]:
				deleted(o)
				ackDeletes++
				gone = append(gone, o)
			case j == len(acked) && !contStarted:
				underWay++
				if exists(o) {
					ackWrites++
				} else {
					// Committed, not answered: gone for good.
					deleted(o)
					gone = append(gone, o)
				}
			default:
				if !exists(o) {
					t.Fatalf("cycle %d: object %s, never deleted, is gone", cycle, o.name)
				}
				ackWrites++
			}
		}
		if contDone {
			for _, o := range members {
				deleted(o)
				ackDeletes++
			}
		} else if contStarted {
			// Under way: nothing of them is acknowledged, written or
			// deleted; finished below.
			underWay += len(members)
		} else {
			for _, o := range members {
				if !exists(o) {
					t.Fatalf("cycle %d: object %s, never deleted, is gone", cycle, o.name)
				}
				ackWrites++
			}
		}
		// Finish: delete what is left of the cycle's objects (the
		// container delete, cut, finishes when run again; the test holds
		// its objects open).
		for _, o := range singles {
			if h, err := c.OpenObject(ctx, o.name); err == nil {
				if err := h.Delete(ctx); err != nil {
					t.Fatal(err)
				}
				gone = append(gone, o)
			}
		}
		if n, err := c.DeleteTransient(ctx); err != nil || n != 1 && !contDone {
			t.Fatalf("cycle %d: finish the container delete: %d deleted, %v", cycle, n, err)
		}
		for _, o := range members {
			deleted(o)
			gone = append(gone, o)
		}
		noFiles(gone)
		if out := e2e.MustRun(t, "fsck", "--tmpdir", tmpdir); !strings.Contains(out, "clean: 0 orphaned objects removed, no corrupt blocks") {
			t.Fatalf("cycle %d: fsck:\n%s", cycle, out)
		}
		for _, o := range gone {
			if f := objectFiles(t, datadir, o.h.ID()); len(f) > 0 {
				t.Fatalf("cycle %d: files of deleted object %s came back: %v", cycle, o.name, f)
			}
		}
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
		cycles, restarts, ackDeletes, ackWrites, underWay)
}
