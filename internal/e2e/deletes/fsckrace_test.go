package deletes_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// pdc fsck --remove never deletes acknowledged data: not that of objects
// created and written while it runs, nor, with a metadata server down or
// starting again, that of the objects it holds the metadata of (their
// data lives on every data server).
func TestFsckRemoveKeepsAcknowledgedData(t *testing.T) {
	const size = 3
	tmpdir := e2e.Up(t, size)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 3*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "kept", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{16, 256}
	whole := region.Shape(dims...)
	write := func(name string) error {
		o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic})
		if err != nil {
			return err
		}
		if err := o.Write(ctx, whole, clitest.PatternOf(dims, whole)); err != nil {
			return err
		}
		return o.Close(ctx)
	}
	var mu sync.Mutex
	var acked []string
	for i := range 24 {
		name := fmt.Sprint("before-", i)
		if err := write(name); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, name)
	}

	// Objects created and written while fsck --remove runs.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprint("during-", i)
			if err := write(name); err != nil {
				t.Errorf("write %s while fsck runs: %v", name, err)
				return
			}
			mu.Lock()
			acked = append(acked, name)
			mu.Unlock()
		}
	})
	for range 4 {
		r := e2e.Run(t, nil, "fsck", "--remove", "--tmpdir", tmpdir)
		if r.Err != nil || strings.Contains(r.Stdout, "orphan:") {
			t.Errorf("fsck --remove while objects are written: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
		}
	}
	close(stop)
	wg.Wait()
	c.Close()

	// Server 1 (metadata and data) down: nothing is removed, and fsck
	// says what it could not check.
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	victim := list.Servers[1]
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim.PID); err != nil {
		t.Fatal(err)
	}
	before := countFiles(t, datadir)
	r := e2e.Run(t, nil, "fsck", "--remove", "--no-verify", "--tmpdir", tmpdir, "--timeout", "30s")
	if r.Err == nil || strings.Contains(r.Stdout, "orphan:") {
		t.Fatalf("fsck --remove with %s down: %v\n%s%s", victim.Label(), r.Err, r.Stdout, r.Stderr)
	}
	t.Logf("fsck --remove with %s down: %v\n%s%s", victim.Label(), r.Err, r.Stdout, r.Stderr)
	if after := countFiles(t, datadir); after != before {
		t.Fatalf("fsck --remove with %s down: %d data files before, %d after", victim.Label(), before, after)
	}

	// Started again, and asked while it starts.
	logPath := filepath.Join(tmpdir, "logs", "server-1-again.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e2e.Bin(), "server", "--rank", "1", "--size", fmt.Sprint(size), "--tmpdir", tmpdir, "--datadir", datadir)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() })
	for try := 0; ; try++ {
		r := e2e.Run(t, nil, "fsck", "--remove", "--no-verify", "--tmpdir", tmpdir, "--timeout", "30s")
		if strings.Contains(r.Stdout, "orphan:") {
			t.Fatalf("fsck --remove while %s starts again removed data:\n%s%s", victim.Label(), r.Stdout, r.Stderr)
		}
		if try == 0 {
			t.Logf("fsck --remove as %s starts: %v\n%s%s", victim.Label(), r.Err, r.Stdout, r.Stderr)
		}
		if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "serving") && r.Err == nil {
			t.Logf("%d fsck runs while the server started", try+1)
			break
		}
		if try > 200 {
			t.Fatalf("the restarted server does not serve:\n%s%s", r.Stdout, r.Stderr)
		}
	}

	// Everything acknowledged reads back whole.
	c2 := e2e.Connect(t, tmpdir)
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	want := clitest.PatternOf(dims, whole)
	for _, name := range acked {
		o, err := c2.OpenObject(rctx, name)
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		got := make([]byte, len(want))
		if err := o.Read(rctx, whole, got); err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s reads back wrong after fsck --remove runs", name)
		}
	}
	t.Logf("%d acknowledged objects read back", len(acked))
}

func countFiles(t *testing.T, datadir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(datadir, "data-*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}

// pdc fsck with a metadata server that does not answer (stopped, not
// dead) reports what the other data servers found, names that server and
// removes nothing, within its --timeout. The data servers waited on it
// until the deadline: fsck printed nothing but "deadline exceeded" for
// every server, after --timeout (30 minutes by default).
func TestFsckWithAStoppedMetadataServer(t *testing.T) {
	const size = 3
	tmpdir := e2e.Up(t, size)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "kept", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{16, 256}
	whole := region.Shape(dims...)
	for i := range 6 {
		o, err := ct.CreateObject(ctx, fmt.Sprint("obj-", i), client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Write(ctx, whole, clitest.PatternOf(dims, whole)); err != nil {
			t.Fatal(err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	// The data servers have asked every metadata server about these
	// objects already: their connections to server 1 are up, and a
	// question on one gets no answer rather than a refused dial.
	e2e.MustRun(t, "fsck", "--no-verify", "--tmpdir", tmpdir)

	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	stopped := list.Servers[1]
	e2e.Stop(t, stopped.PID)
	files := countFiles(t, datadir)
	start := time.Now()
	r := e2e.Run(t, nil, "fsck", "--remove", "--tmpdir", tmpdir, "--timeout", "20s")
	took := time.Since(start)
	t.Logf("pdc fsck --remove with %s stopped, after %v: %v\n%s%s", stopped.Label(), took.Round(time.Millisecond), r.Err, r.Stdout, r.Stderr)
	if r.Err == nil || strings.Contains(r.Stdout, "orphan:") {
		t.Fatalf("fsck --remove with %s stopped succeeded or found orphans", stopped.Label())
	}
	for _, rank := range []int{0, 2} {
		s := list.Servers[rank]
		if !strings.Contains(r.Stdout, s.Label()+": 6 objects") ||
			!strings.Contains(r.Stdout, "not checked: "+s.Label()+": objects 1 to 6 of 6 not checked for orphans: no answer within") ||
			!strings.Contains(r.Stdout, "metadata server 1 of 3: server "+stopped.Label()) {
			t.Errorf("fsck's report does not give what %s found and that metadata server 1 did not answer", s.Label())
		}
	}
	if took > 18*time.Second {
		t.Errorf("fsck took %v of its 20 s", took.Round(time.Millisecond))
	}
	if n := countFiles(t, datadir); n != files {
		t.Fatalf("%d data files before fsck --remove, %d after", files, n)
	}
}
