package slots_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

// A cluster started without a metadata server on the node whose data dir
// holds a metadata store (node-local data dirs, the roles changed) found
// the store, adopted it nowhere and started with a warning: every object,
// container and tag in it answered "not found", a client could create one
// again under the same name, and `pdc fsck --remove` would have deleted
// their data. The start must be refused instead, by every server and by
// pdc up, naming each store, its data dir and rank, and what to do; no
// server may be left running, and once started with metadata servers
// there, everything acknowledged is found. Both by pdc up (every server a
// data server) and by hand (node b's server a data server only).
func TestStartWithAStoreNoMetadataServerSeesRefuses(t *testing.T) {
	tc := newCluster(t)
	ctx := e2e.Ctx(t, 2*time.Minute)
	tc.up(2, "a,b")
	c := tc.connect()
	ct, _, err := c.CreateContainer(ctx, "orphans", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	for i := range n {
		o, err := ct.CreateObject(ctx, fmt.Sprintf("obj-%02d", i), client.ObjectProps{Dims: []uint64{4}, Type: region.Int32})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tc.down()
	storeB := filepath.Join(tc.datadir, "b", "meta-1")
	if _, err := os.Stat(storeB); err != nil {
		t.Fatalf("node b has no store of rank 1: %v", err)
	}

	// pdc up with data servers only: both nodes' stores are orphaned.
	res := e2e.Run(t, nil, append(tc.upArgs(2, "a,b"), "--roles", "data", "--timeout", "30s")...)
	if res.Err == nil {
		t.Fatalf("pdc up --roles data over two nodes' metadata stores started:\n%s%s", res.Stdout, res.Stderr)
	}
	for _, want := range []string{"meta-0", "meta-1", storeB, "rank 1, host b", "adopted by no metadata server", "the start is refused",
		"metadata server on the node", "move the store", "remove it"} {
		if !strings.Contains(res.Stderr, want) {
			t.Fatalf("pdc up's error does not say %q:\n%s", want, res.Stderr)
		}
	}
	t.Logf("pdc up --roles data refused:\n%s", res.Stderr)
	tc.noServerRuns()

	// By hand: rank 0 on node a holds both roles, rank 1 on node b only
	// data. Store 1 on node b is orphaned; both servers exit non-zero.
	outs := make(chan string, 2)
	errs := make(chan error, 2)
	for rank, role := range []string{"both", "data"} {
		host := []string{"a", "b"}[rank]
		cmd := exec.CommandContext(ctx, e2e.Bin(), "server", "--rank", fmt.Sprint(rank), "--size", "2", "--tmpdir", tc.tmpdir,
			"--datadir", filepath.Join(tc.datadir, host), "--host", host, "--roles", role)
		go func() {
			out, err := cmd.CombinedOutput()
			outs <- string(out)
			errs <- err
		}()
	}
	for range 2 {
		out, err := <-outs, <-errs
		if err == nil {
			t.Fatalf("a server exited 0 over an orphaned store:\n%s", out)
		}
		if !strings.Contains(out, "meta-1 in data dir "+filepath.Join(tc.datadir, "b")) || !strings.Contains(out, storeB) {
			t.Fatalf("a server's error does not name store meta-1 and node b's data dir:\n%s", out)
		}
		if strings.Contains(out, "meta-0") {
			t.Fatalf("a server's error names store 0, which rank 0 opens:\n%s", out)
		}
	}
	tc.noServerRuns()

	// Started with metadata servers on both nodes, everything is there.
	tc.up(2, "a,b")
	c = tc.connect()
	for i := range n {
		name := fmt.Sprintf("obj-%02d", i)
		o, err := c.OpenObject(ctx, name)
		if err != nil {
			t.Fatalf("after the refused starts, open %s: %v", name, err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.OpenObject(ctx, "obj-none"); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("open of an object never made: %v", err)
	}
}

// noServerRuns fails the test if a server of the cluster's last list
// still runs.
func (tc *testCluster) noServerRuns() {
	tc.t.Helper()
	list, err := cluster.ReadList(tc.tmpdir)
	if err != nil {
		return // none was written
	}
	for _, s := range list.Servers {
		if err := cluster.WaitExit(e2e.Ctx(tc.t, 10*time.Second), s.PID); err != nil {
			tc.t.Fatalf("server rank %d (pid %d) still runs after a refused start: %v", s.Rank, s.PID, err)
		}
	}
}
