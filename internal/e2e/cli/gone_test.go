package cli_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// staleHandleRole is the client role "stale-handle": it opens the object
// $PDC_E2E_OBJ, says "open", then does what each line on stdin says:
//
//	write  write the whole object: "write ok" or "write err NOTFOUND MSG"
//	read   read it: "read ok" or "read err NOTFOUND MSG"
//	race   write it again and again, saying "racing" after the first
//	       write, until a write fails: "race err NOTFOUND MSG N" (N
//	       writes succeeded), or for at most 20 s: "race ok"
//
// NOTFOUND is whether the error is pdc.ErrNotFound.
func staleHandleRole(ctx context.Context, c *client.Client, out *bufio.Writer) error {
	o, err := c.OpenObject(ctx, os.Getenv("PDC_E2E_OBJ"))
	if err != nil {
		return err
	}
	whole := region.Shape(o.Info().Props.Dims...)
	buf := make([]byte, whole.Volume()*uint64(o.Info().Props.Type.Size()))
	say := func(what string, err error, extra ...any) {
		if err == nil {
			fmt.Fprintln(out, what, "ok")
		} else {
			fmt.Fprintln(out, append([]any{what, "err", errors.Is(err, pdc.ErrNotFound), strings.ReplaceAll(err.Error(), "\n", " ")}, extra...)...)
		}
		out.Flush()
	}
	fmt.Fprintln(out, "open")
	out.Flush()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "write":
			say("write", o.Write(ctx, whole, buf))
		case "read":
			say("read", o.Read(ctx, whole, buf))
		case "race":
			// Bounded, so that writes that never fail (a delete that does
			// not stop them) end the race with "race ok N".
			n := 0
			var err error
			end := time.Now().Add(20 * time.Second)
			for ; n < 10_000 && time.Now().Before(end); n++ {
				if err = o.Write(ctx, whole, buf); err != nil {
					break
				}
				if n == 0 {
					fmt.Fprintln(out, "racing")
					out.Flush()
				}
			}
			say("race", err, n)
		}
	}
	return sc.Err()
}

// objectFiles lists the files of object id in the cluster's data dirs.
func objectFiles(t *testing.T, datadir string, id uint64) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(datadir, "data-*", fmt.Sprintf("%016x.*", id)))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

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
// server (issue 25, case 6).
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
		if err := o.Write(ctx, whole, patternOf(dims, whole)); err != nil {
			t.Fatal(err)
		}
		if err := o.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if files := objectFiles(t, datadir, o.ID()); len(files) < 2 {
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
		if files := objectFiles(t, datadir, o.ID()); len(files) > 0 {
			t.Fatalf("object %q was deleted, its files are left: %v", name, files)
		}
		in.Close()
		if err := b.Wait(); err != nil {
			t.Fatalf("client process: %v", err)
		}
		// Nothing came back after the process ended either.
		if files := objectFiles(t, datadir, o.ID()); len(files) > 0 {
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
	if err := o.Write(ctx, whole, patternOf(dims, whole)); err != nil {
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
	left := objectFiles(t, datadir, o.ID())
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
	restartServer(t, ctx, tmpdir, datadir, 1, 2)
	fmt.Fprintln(in, "write")
	expectLine(t, out, "write err true", name, "deleted")
	fmt.Fprintln(in, "read")
	expectLine(t, out, "read err true", name)

	// Its files go once the metadata server's tombstone reaches it.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for len(objectFiles(t, datadir, o.ID())) > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("files of the deleted object are still on the restarted server: %v", objectFiles(t, datadir, o.ID()))
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
	offFiles := objectFiles(t, datadir, ids["kept-offset"])
	regFiles := objectFiles(t, datadir, ids["kept-region"])
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
		if err := o.Write(ctx, whole, patternOf(dims, whole)); err != nil {
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
		"1 orphaned objects left, 2 corrupt blocks",
	} {
		if !strings.Contains(r.Stdout+r.Stderr, want) {
			t.Errorf("fsck's report does not say %q:\n%s%s", want, r.Stdout, r.Stderr)
		}
	}
}

// restartServer starts rank of a cluster of size again, in place (it
// rejoins the running cluster), with extra flags, and returns once it
// serves. It is killed when the test ends, if pdc down has not stopped it.
func restartServer(t *testing.T, ctx context.Context, tmpdir, datadir string, rank, size int, extra ...string) {
	t.Helper()
	logPath := filepath.Join(tmpdir, "logs", fmt.Sprintf("server-%d-restarted.log", rank))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e2e.Bin(), append([]string{"server", "--rank", fmt.Sprint(rank), "--size", fmt.Sprint(size), "--tmpdir", tmpdir, "--datadir", datadir}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "serving") {
			return
		}
		select {
		case <-tick.C:
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("the restarted server of rank %d exited:\n%s", rank, b)
		case <-ctx.Done():
			t.Fatalf("the restarted server of rank %d never said it was serving", rank)
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
