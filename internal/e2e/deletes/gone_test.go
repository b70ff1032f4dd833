package deletes_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// expectLine reads the role's next line and checks its start.
func expectLine(t *testing.T, out *bufio.Scanner, prefix string, mentions ...string) string {
	t.Helper()
	if !out.Scan() {
		t.Fatalf("the client process ended (%v) before saying %q", out.Err(), prefix)
	}
	line := out.Text()
	if !strings.HasPrefix(line, prefix) {
		t.Fatalf("the client process said %q, want %q...", line, prefix)
	}
	for _, m := range mentions {
		if !strings.Contains(line, m) {
			t.Fatalf("the client process said %q, which does not mention %q", line, m)
		}
	}
	return line
}

// A handle opened in another process before the object is deleted can
// neither write nor read it afterwards: data servers refuse the object
// (pdc.ErrNotFound naming it), writes racing the delete either land
// before it or fail so, and no file of the object is left on any data
// server (issue 25, case 6). The handle still closes without an error.
func TestDeletedObjectRefusedAndRemoved(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "gone", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	for _, storage := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
		name := "victim-" + storage.String()
		dims := []uint64{64, 1024}
		o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic, Storage: storage})
		if err != nil {
			t.Fatal(err)
		}
		whole := region.Shape(dims...)
		if err := o.Write(ctx, whole, clitest.PatternOf(dims, whole)); err != nil {
			t.Fatal(err)
		}
		if err := o.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if files := clitest.ObjectFiles(t, datadir, o.ID()); len(files) < 2 {
			t.Fatalf("object %q has files %v, want some on both data servers", name, files)
		}

		b, out, in := e2e.ClientProc(t, tmpdir, "stale-handle", "PDC_E2E_OBJ="+name)
		expectLine(t, out, "open")
		fmt.Fprintln(in, "write")
		expectLine(t, out, "write ok")
		// Delete while the other process writes again and again.
		fmt.Fprintln(in, "race")
		expectLine(t, out, "racing")
		if err := o.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		t.Log(expectLine(t, out, "race err true", name, "deleted"))
		fmt.Fprintln(in, "write")
		t.Log(expectLine(t, out, "write err true", name, "deleted"))
		fmt.Fprintln(in, "read")
		expectLine(t, out, "read err true", name)
		// The handle wrote before the delete, and closing flushes what it
		// wrote: the object is gone, and closing it is not an error, as
		// closing a file's descriptor is not after another process
		// removed the file.
		fmt.Fprintln(in, "close")
		expectLine(t, out, "close ok")
		if files := clitest.ObjectFiles(t, datadir, o.ID()); len(files) > 0 {
			t.Fatalf("object %q was deleted, its files are left: %v", name, files)
		}
		in.Close()
		if err := b.Wait(); err != nil {
			t.Fatalf("client process: %v", err)
		}
		// Nothing came back after the process ended either.
		if files := clitest.ObjectFiles(t, datadir, o.ID()); len(files) > 0 {
			t.Fatalf("object %q was deleted, its files came back: %v", name, files)
		}
	}
}

// A data server that is down when an object is deleted refuses the object
// once it is back, before its metadata server has told it, and then has
// the object's files removed (issue 25, case 6).
func TestDeleteWhileDataServerDown(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 3*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "gone", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	// An object whose metadata is on rank 0, the server that stays up,
	// and whose data is on both.
	dims := []uint64{64, 1024}
	var o *client.Object
	var name string
	for i := 0; o == nil; i++ {
		name = fmt.Sprint("down-", i)
		obj, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic})
		if err != nil {
			t.Fatal(err)
		}
		if obj.Info().Server == 0 {
			o = obj
		}
	}
	whole := region.Shape(dims...)
	if err := o.Write(ctx, whole, clitest.PatternOf(dims, whole)); err != nil {
		t.Fatal(err)
	}
	b, out, in := e2e.ClientProc(t, tmpdir, "stale-handle", "PDC_E2E_OBJ="+name)
	expectLine(t, out, "open")
	fmt.Fprintln(in, "write")
	expectLine(t, out, "write ok")

	victim := c.Servers()[1]
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim.PID); err != nil {
		t.Fatal(err)
	}
	if err := o.Delete(ctx); err != nil {
		t.Fatalf("delete with a data server down: %v", err)
	}
	left := clitest.ObjectFiles(t, datadir, o.ID())
	for _, f := range left {
		if !strings.Contains(f, "data-1") {
			t.Fatalf("the data server that is up kept %s", f)
		}
	}
	if len(left) == 0 {
		t.Fatal("the data server that was down has no files of the object: the test proves nothing")
	}

	// Back at a new address, it refuses the object at once: the stale
	// handle's write fails on both servers.
	clitest.RestartServer(t, ctx, tmpdir, datadir, 1, 2)
	fmt.Fprintln(in, "write")
	expectLine(t, out, "write err true", name, "deleted")
	fmt.Fprintln(in, "read")
	expectLine(t, out, "read err true", name)

	// Its files go once the metadata server's tombstone reaches it.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for len(clitest.ObjectFiles(t, datadir, o.ID())) > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("files of the deleted object are still on the restarted server: %v", clitest.ObjectFiles(t, datadir, o.ID()))
		}
	}
	in.Close()
	if err := b.Wait(); err != nil {
		t.Fatalf("client process: %v", err)
	}
}

// pdc fsck finds a planted orphan file and flipped bytes in both storage
// modes, naming the object, the block and the path; --remove deletes the
// orphan; servers report orphans at start-up (issue 25, case 6).
func TestFsckFindsOrphansAndCorruptBlocks(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 3*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "checked", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{64, 1024}
	ids := writeKeptObjects(ctx, t, ct, dims)
	if out := e2e.MustRun(t, "fsck", "--tmpdir", tmpdir); !strings.Contains(out, "clean: 0 orphaned objects removed") {
		t.Fatalf("fsck of a clean cluster:\n%s", out)
	}
	c.Close()

	// Plant an orphan: a copy of a file under an id no object has.
	offFiles := clitest.ObjectFiles(t, datadir, ids["kept-offset"])
	regFiles := clitest.ObjectFiles(t, datadir, ids["kept-region"])
	if len(offFiles) != 1 {
		t.Fatalf("files of kept-offset: %v", offFiles)
	}
	var regLog string
	for _, f := range regFiles {
		if strings.HasSuffix(f, ".reg") {
			regLog = f
		}
	}
	if regLog == "" {
		t.Fatalf("files of kept-region: %v", regFiles)
	}
	const orphanID = 0xdeadbeef00000001
	planted := filepath.Join(filepath.Dir(offFiles[0]), fmt.Sprintf("%016x.off", uint64(orphanID)))
	data, err := os.ReadFile(offFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planted, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Restarted, the servers report it.
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", datadir)
	waitLog(t, ctx, tmpdir, "start-up scrub: 1 of")

	// Flip a byte of each object's stored data behind the servers' backs.
	flipByteFromEnd(t, offFiles[0], 1)
	flipByteFromEnd(t, regLog, 100)

	r := e2e.Run(t, nil, "fsck", "--tmpdir", tmpdir)
	t.Logf("pdc fsck:\n%s%s", r.Stdout, r.Stderr)
	if r.Err == nil {
		t.Fatalf("fsck of a cluster with an orphan and corrupt blocks succeeded:\n%s", r.Stdout)
	}
	checkFsckReport(t, r, ids, orphanID, planted, offFiles[0], regLog)
	r = e2e.Run(t, nil, "fsck", "--remove", "--tmpdir", tmpdir)
	if r.Err == nil || !strings.Contains(r.Stdout, "removed") || !strings.Contains(r.Stderr, "0 orphaned objects left, 2 corrupt blocks") {
		t.Fatalf("fsck --remove: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
	if _, err := os.Stat(planted); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("fsck --remove left the orphan: %v", err)
	}
	// The flipped bytes put back, the cluster is clean.
	flipByteFromEnd(t, offFiles[0], 1)
	flipByteFromEnd(t, regLog, 100)
	if out := e2e.MustRun(t, "fsck", "--tmpdir", tmpdir); !strings.Contains(out, "clean: 0 orphaned objects removed, no corrupt blocks") {
		t.Fatalf("fsck after repair:\n%s", out)
	}
}

// writeKeptObjects creates and writes an object of dims in each storage
// mode, named kept-<mode>, and returns their ids by name.
func writeKeptObjects(ctx context.Context, t *testing.T, ct *client.Container, dims []uint64) map[string]uint64 {
	t.Helper()
	whole := region.Shape(dims...)
	ids := map[string]uint64{}
	for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
		name := "kept-" + st.String()
		o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.ObjectStatic, Storage: st})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Write(ctx, whole, clitest.PatternOf(dims, whole)); err != nil {
			t.Fatal(err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ids[name] = o.ID()
	}
	return ids
}

// flipByteFromEnd flips the bits of a byte fromEnd bytes before the end of
// the file at path, behind the servers' backs; twice puts it back.
func flipByteFromEnd(t *testing.T, path string, fromEnd int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	var b [1]byte
	if _, err := f.ReadAt(b[:], st.Size()-fromEnd); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b[:], st.Size()-fromEnd); err != nil {
		t.Fatal(err)
	}
}

// checkFsckReport checks pdc fsck's report names the planted orphan and
// the corrupt block of each object, by object, path and block.
func checkFsckReport(t *testing.T, r e2e.Result, ids map[string]uint64, orphanID uint64, planted, offFile, regLog string) {
	t.Helper()
	for _, want := range []string{
		"orphan: rank ", fmt.Sprintf("object %d, whose metadata is gone: %s", orphanID, planted), "left (pdc fsck --remove deletes it)",
		"corrupt: rank ", fmt.Sprintf(`object "kept-offset" (id %d): %s: block 63 at offset`, ids["kept-offset"], offFile),
		fmt.Sprintf(`object "kept-region" (id %d): %s: block`, ids["kept-region"], regLog), "of written region [0+64, 0+1024]",
		"stored data is corrupt",
		"1 orphaned object left, 2 corrupt blocks",
	} {
		if !strings.Contains(r.Stdout+r.Stderr, want) {
			t.Errorf("fsck's report does not say %q:\n%s%s", want, r.Stdout, r.Stderr)
		}
	}
}

// waitLog waits until some server log of the cluster says what.
func waitLog(t *testing.T, ctx context.Context, tmpdir, what string) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		logs, _ := filepath.Glob(filepath.Join(tmpdir, "logs", "*.log"))
		for _, l := range logs {
			if b, _ := os.ReadFile(l); strings.Contains(string(b), what) {
				return
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("no server log says %q", what)
		}
	}
}
