package slots_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
)

// A server restarted alone on another node (a launcher placing it where
// there is room) finds there, under that node's data dir, a copy of a data
// slot it holds that is out of date: one a start killed between a slot's
// commit and the sender's removal left behind, on a node the later starts
// did not include. It must not serve that copy: the cluster has written to
// the slot since, and the old bytes would read back with no error, and be
// stamped as current, so that the next start could hold them and set the
// good copy aside. The slot is refused as out of reach instead, and every
// object that reads back reads back as acknowledged.
func TestRejoinOnAnotherNodeRefusesAnOutOfDateCopy(t *testing.T) {
	tc := newCluster(t)
	ctx := e2e.Ctx(t, 2*time.Minute)
	rng := rand.New(rand.NewPCG(11, 12))
	tc.up(2, "a,c") // slot 1 on node c
	d := fill(t, ctx, tc.connect(), []uint64{64, 40}, 1, rng)
	tc.down()
	// The next start sends slot 1 from node c to its holder on node b. A
	// kill -9 of the sender after the holder committed leaves the copy on
	// c as well: kept here, put back once the start is over.
	left := filepath.Join(t.TempDir(), "left-data-1")
	onC := filepath.Join(tc.datadir, "c", "data-1")
	if err := exec.Command("cp", "-a", onC, left).Run(); err != nil {
		t.Fatal(err)
	}
	tc.up(3, "a,b,c")
	tc.down()
	if _, err := os.Stat(onC); err == nil {
		t.Fatalf("%s still there after the move", onC)
	}
	if err := os.Rename(left, onC); err != nil {
		t.Fatal(err)
	}
	// Node c is left out: slot 1 is held on b, and written to. The
	// metadata store the start with three servers put on node c is
	// abandoned (a start without it is refused otherwise): its objects
	// are out of reach, and the others are the test's.
	e2e.MustRun(t, append(tc.upArgs(2, "a,b"), "--abandon-store", "2")...)
	c := tc.connect()
	reach := d.objs[:0:0]
	for _, do := range d.objs {
		if o, err := c.OpenObject(ctx, do.name); err == nil {
			_ = o.Close(ctx)
			reach = append(reach, do)
		} else if !errors.Is(err, pdc.ErrNotFound) {
			t.Fatal(err)
		}
	}
	if len(reach) < len(d.objs)/4 {
		t.Fatalf("only %d of %d objects reachable without node c", len(reach), len(d.objs))
	}
	d.objs = reach
	d.overwrite(t, ctx, c, rng, 8*len(d.objs))
	d.verify(t, ctx, c, "on nodes a and b")

	list, err := cluster.ReadList(tc.tmpdir)
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
	// Its metadata store goes with it (as on a file system both nodes
	// see): without it, rank 1 refuses to start on node c at all
	// (TestMetadataRankRestartedWithoutItsStoreRefuses), and this test is
	// about its data slots.
	storeOnC := filepath.Join(tc.datadir, "c", "meta-1")
	if _, err := os.Stat(storeOnC); err == nil {
		t.Fatalf("%s is there before the move", storeOnC)
	}
	if err := exec.Command("cp", "-a", filepath.Join(tc.datadir, victim.Host, "meta-1"), storeOnC).Run(); err != nil {
		t.Fatal(err)
	}
	clitest.RestartServer(t, ctx, tc.tmpdir, filepath.Join(tc.datadir, "c"), 1, 2, "--host", "c")

	good, failed, wrong := d.check(ctx, tc.connect())
	if len(wrong) > 0 {
		t.Fatalf("rank 1 restarted on node c: %d objects read back wrong with no error, e.g. %s", len(wrong), wrong[0])
	}
	refused := 0
	for _, err := range failed {
		if errors.Is(err, pdc.ErrUnavailable) && strings.Contains(err.Error(), "data slot 1") {
			refused++
		}
	}
	if refused == 0 {
		t.Fatalf("rank 1 restarted on node c: no read refused for data slot 1 (%d bytes read back, failures: %v)", good, failed)
	}
	t.Logf("rank 1 restarted on node c: %d bytes read back, %d objects failed (%d for data slot 1)", good, len(failed), refused)
}
