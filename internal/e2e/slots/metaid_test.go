package slots_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
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

// A metadata rank restarted alone on another node (a launcher placing it
// where there is room) finds no store of its rank under that node's data
// dir. Opening an empty one there, it answered "not found" for every
// object, container and tag its store holds: data servers then refused
// those objects' data, and `pdc fsck --remove` would have deleted it. It
// must refuse to start instead, naming the rank, the data dir and the
// store the cluster serves it from, and make nothing there; started again
// where its store is, it serves everything that was acknowledged. Rank 1
// rejoins through rank 0's registration, rank 0 through the server list
// of the ranks that still serve: both are checked.
func TestMetadataRankRestartedWithoutItsStoreRefuses(t *testing.T) {
	tc := newCluster(t)
	ctx := e2e.Ctx(t, 2*time.Minute)
	tc.up(2, "a,b")
	c := tc.connect()
	ct, _, err := c.CreateContainer(ctx, "ident", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const n = 24
	for i := range n {
		name := fmt.Sprintf("obj-%02d", i)
		o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{8, 8}, Type: region.Int32})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.PutTag(ctx, "step", client.Int64(int64(i))); err != nil {
			t.Fatal(err)
		}
		if err := o.PutTag(ctx, "kind", client.String("kind-"+name)); err != nil {
			t.Fatal(err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	verify := func(when string) {
		t.Helper()
		c := tc.connect()
		for i := range n {
			name := fmt.Sprintf("obj-%02d", i)
			o, err := c.OpenObject(ctx, name)
			if err != nil {
				t.Fatalf("%s: open %s: %v", when, name, err)
			}
			for tag, want := range map[string]client.TagValue{"step": client.Int64(int64(i)), "kind": client.String("kind-" + name)} {
				if got, err := o.GetTag(ctx, tag); err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: %s tag %s: %v, %v; want %v", when, name, tag, got, err, want)
				}
			}
			if err := o.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, rank := range []int{1, 0} {
		list, err := cluster.ReadList(tc.tmpdir)
		if err != nil {
			t.Fatal(err)
		}
		victim := list.Servers[rank]
		if victim.MetaStore == "" {
			t.Fatalf("the server list records no metadata store for rank %d", rank)
		}
		if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim.PID); err != nil {
			t.Fatal(err)
		}
		// Node c has a data dir of its own, with no store of this rank.
		elsewhere := filepath.Join(tc.datadir, "c")
		out := serverMustFail(t, ctx, tc.tmpdir, elsewhere, rank, 2, "--host", "c")
		for _, want := range []string{fmt.Sprintf("rank %d's metadata", rank), elsewhere, victim.MetaStore, "--datadir"} {
			if !strings.Contains(out, want) {
				t.Fatalf("rank %d restarted with data dir %s: its error does not say %q:\n%s", rank, elsewhere, want, out)
			}
		}
		t.Logf("rank %d with data dir %s refused:\n%s", rank, elsewhere, out)
		if _, err := os.Stat(filepath.Join(elsewhere, fmt.Sprintf("meta-%d", rank))); err == nil {
			t.Fatalf("rank %d, refused, made a metadata store under %s", rank, elsewhere)
		}
		home := filepath.Join(tc.datadir, victim.Host)
		clitest.RestartServer(t, ctx, tc.tmpdir, home, rank, 2, "--host", victim.Host)
		verify(fmt.Sprintf("rank %d restarted with data dir %s", rank, home))
	}
}

// serverMustFail starts rank of a cluster of size with datadir and extra
// flags, and returns what it wrote once it exits with an error. A server
// that serves instead fails the test.
func serverMustFail(t *testing.T, ctx context.Context, tmpdir, datadir string, rank, size int, extra ...string) string {
	t.Helper()
	logPath := filepath.Join(tmpdir, "logs", fmt.Sprintf("server-%d-refused.log", rank))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e2e.Bin(), append([]string{"server", "--rank", fmt.Sprint(rank), "--size", fmt.Sprint(size),
		"--tmpdir", tmpdir, "--datadir", datadir}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		exited <- cmd.Wait()
		logf.Close()
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logPath)
			if err == nil {
				t.Fatalf("rank %d with data dir %s exited 0:\n%s", rank, datadir, b)
			}
			return string(b)
		case <-tick.C:
			if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "serving") {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				<-exited
				t.Fatalf("rank %d restarted with data dir %s, which has no store of its rank, serves:\n%s", rank, datadir, b)
			}
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("rank %d with data dir %s neither served nor exited", rank, datadir)
		}
	}
}
