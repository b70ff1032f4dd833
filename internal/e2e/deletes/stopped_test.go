package deletes_test

import (
	"context"
	"fmt"
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

// filesOn lists the files of object id on the data server of rank.
func filesOn(t *testing.T, datadir string, id uint64, rank int) []string {
	t.Helper()
	var out []string
	for _, f := range clitest.ObjectFiles(t, datadir, id) {
		if strings.Contains(f, fmt.Sprintf("data-%d/", rank)) {
			out = append(out, f)
		}
	}
	return out
}

// waitNoFilesOn waits, until ctx ends, for the data server of rank to
// have removed every file of object id.
func waitNoFilesOn(ctx context.Context, t *testing.T, datadir string, id uint64, rank int, while string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for len(filesOn(t, datadir, id, rank)) > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%s: the data server of rank %d still holds the files of deleted object %d: %v",
				while, rank, id, filesOn(t, datadir, id, rank))
		}
	}
}

// A data server that takes connections and answers nothing (SIGSTOP) must
// not hold up the tombstone retrier's pushes to the others: a data server
// that was down at a delete, back while another is stopped, gets the
// tombstone from the retrier's next round and removes the object's
// files; the stopped one does once it runs again. The retrier's round
// called the stopped server without a deadline of its own, and held every
// later round, the restarted server's tombstone with them, until the
// stopped server answered.
func TestStoppedDataServerHoldsNoOtherTombstone(t *testing.T) {
	tmpdir := e2e.Up(t, 3, "--index=false")
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 3*time.Minute)
	c := e2e.Connect(t, tmpdir)
	const stopped, down = 1, 2
	ct, _, err := c.CreateContainer(ctx, "stopped", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	// An object whose metadata is on rank 0, which stays up, with data
	// on every data server.
	dims := []uint64{96, 1024}
	var o *client.Object
	for i := 0; o == nil; i++ {
		obj, err := ct.CreateObject(ctx, fmt.Sprint("obj-", i), client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic})
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
	// A delete with every server up: the metadata server's connections
	// to the data servers are open before one is stopped.
	for i := 0; ; i++ {
		warm, err := ct.CreateObject(ctx, fmt.Sprint("warm-", i), client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic})
		if err != nil {
			t.Fatal(err)
		}
		if err := warm.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		if warm.Info().Server == 0 {
			break
		}
	}
	for rank := range 3 {
		if len(filesOn(t, datadir, o.ID(), rank)) == 0 {
			t.Fatalf("the data server of rank %d holds no file of the object: the test proves nothing", rank)
		}
	}
	servers := c.Servers()
	if err := syscall.Kill(servers[down].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), servers[down].PID); err != nil {
		t.Fatal(err)
	}
	e2e.Stop(t, servers[stopped].PID)
	// The delete waits for the data servers for its own bound, then
	// answers; the retrier goes on with the two that did not confirm.
	start := time.Now()
	if err := o.Delete(ctx); err != nil {
		t.Fatalf("delete with a data server down and one stopped: %v", err)
	}
	t.Logf("the delete answered in %v", time.Since(start).Round(time.Millisecond))
	waitNoFilesOn(ctx, t, datadir, o.ID(), 0, "after the delete")

	clitest.RestartServer(t, ctx, tmpdir, datadir, down, 3)
	start = time.Now()
	// Well past the retrier's rounds with each call bounded (10 s) and
	// its back-off (15 s at most); held by the stopped server, it never
	// came.
	waitNoFilesOn(e2e.Ctx(t, 90*time.Second), t, datadir, o.ID(), down, "restarted while another data server is stopped")
	t.Logf("the restarted data server removed the files %v after it was back", time.Since(start).Round(time.Millisecond))
	if len(filesOn(t, datadir, o.ID(), stopped)) == 0 {
		t.Fatal("the stopped data server removed the object's files: it was not stopped")
	}

	e2e.Continue(servers[stopped].PID)
	start = time.Now()
	waitNoFilesOn(ctx, t, datadir, o.ID(), stopped, "resumed")
	t.Logf("the resumed data server removed the files %v after SIGCONT", time.Since(start).Round(time.Millisecond))
}
