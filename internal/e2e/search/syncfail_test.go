package search_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/server"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A tag put told it failed (its metadata log's fsync failed) and sent
// again is found by an index query from another process. The first put's
// commit is applied, so the one sent again changes nothing for the index;
// the first one's index updates waited, held, for a later change to be
// delivered with, and none came: a query missed the tag whose put was
// acknowledged. Rank 0 runs in this process, with sync durability and a
// failing fsync injected through the file system seam (vfs.Faulty), which
// a pdc server process has no switch for; rank 1, which holds the key's
// index entries, is a pdc server process.
// syncFailCluster starts a cluster of two servers: rank 0 in this
// process, with sync durability and its file system behind vfs.Faulty, and
// rank 1 a pdc server process. It returns the tmpdir and the faulty FS.
func syncFailCluster(t *testing.T) (string, *vfs.Faulty) {
	dir := t.TempDir()
	tmpdir := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmpdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.NewSecret(tmpdir); err != nil {
		t.Fatal(err)
	}
	fsys := vfs.NewFaulty(vfs.Default)
	ready := make(chan struct{})
	cfg := server.Config{Rank: 0, Size: 2, TmpDir: tmpdir, DataDir: filepath.Join(dir, "data0"), Durability: metastore.DurabilitySync,
		FS: fsys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ready: func(cluster.Server, *cluster.List) { close(ready) }}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(sctx, cfg) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	rank1 := exec.Command(e2e.Bin(), "server", "--rank", "1", "--size", "2", "--tmpdir", tmpdir, "--datadir", filepath.Join(dir, "data1"))
	if err := rank1.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rank1.Process.Kill(); _ = rank1.Wait() })
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("server did not start: %v", err)
	case <-timer.C:
		t.Fatal("the cluster did not form within a minute")
	}
	return tmpdir, fsys
}

// onRank0 creates objects in ct until one lives on rank 0, and returns it.
func onRank0(ctx context.Context, t *testing.T, ct *client.Container) *client.Object {
	for i := 0; ; i++ {
		obj, err := ct.CreateObject(ctx, fmt.Sprint("o", i), client.ObjectProps{Dims: []uint64{1}, Type: region.Int})
		if err != nil {
			t.Fatal(err)
		}
		if obj.Info().Server == 0 {
			return obj
		}
	}
}

// keyOnRank1 returns a tag key whose index entry lives on rank 1 of two.
func keyOnRank1(t *testing.T) string {
	for i := 0; ; i++ {
		k := fmt.Sprint("key", i)
		pq, err := tagindex.Parse(k)
		if err != nil {
			t.Fatal(err)
		}
		if p := tagindex.For(2).Plan(pq, true); slices.Equal(p.Servers, []int{1}) {
			return k
		}
	}
}

// failSyncs makes rank 0's metadata log fail its fsyncs until remove.
func failSyncs(fsys *vfs.Faulty) (remove func()) {
	return fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Path: "pdc.wal", Err: syscall.EIO})
}

// queryBy runs q from c by scan and by the index and checks both find
// want.
func queryBy(ctx context.Context, t *testing.T, c *client.Client, q string, want []uint64, when string) {
	t.Helper()
	for _, by := range []struct {
		how string
		opt client.QueryOption
	}{{"scan", client.ScanOnly()}, {"index", client.IndexOnly()}} {
		got, err := c.Query(ctx, q, by.opt)
		if err != nil || !slices.Equal(ids(got), want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("query %q by %s from another client, %s: %v, %v; want %v", q, by.how, when, ids(got), err, want)
		}
	}
}

func TestTagPutSentAgainAfterAFailedSyncIsFound(t *testing.T) {
	tmpdir, fsys := syncFailCluster(t)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "syncfail", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	// An object on rank 0, and a key whose index entry is on rank 1.
	o, key := onRank0(ctx, t, ct), keyOnRank1(t)

	remove := failSyncs(fsys)
	if err := o.PutTag(ctx, key, client.String("v")); err == nil {
		t.Fatal("a tag put whose fsync failed succeeded")
	}
	remove()
	if err := o.PutTag(ctx, key, client.String("v")); err != nil {
		t.Fatalf("the tag put sent again: %v", err)
	}
	queryBy(ctx, t, e2e.Connect(t, tmpdir), key, []uint64{o.ID()}, "the put acknowledged")
}

// A container delete told it failed (rank 0's purge of its objects
// applied, its fsync failed) and sent again is acknowledged, and no
// query from another process finds its objects. The delete sent again
// finds nothing left to purge on rank 0, so it made no change there; the
// purge's index updates stayed held for a later change of rank 0 to be
// delivered with, and an index query found the deleted object by its tag.
func TestContainerDeleteSentAgainAfterAFailedSyncFindsNothing(t *testing.T) {
	tmpdir, fsys := syncFailCluster(t)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	// The container on rank 1, so that marking it deleted does not fail;
	// its object and the object's tag on rank 0, the tag's entry on 1.
	var ct *client.Container
	for i := 0; ct == nil; i++ {
		cont, _, err := c.CreateContainer(ctx, fmt.Sprint("c", i), client.Persistent)
		if err != nil {
			t.Fatal(err)
		}
		if cont.Info().Server == 1 {
			ct = cont
		}
	}
	o, key := onRank0(ctx, t, ct), keyOnRank1(t)
	if err := o.PutTag(ctx, key, client.String("v")); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	other := e2e.Connect(t, tmpdir)
	queryBy(ctx, t, other, key, []uint64{o.ID()}, "tagged")

	remove := failSyncs(fsys)
	if err := ct.Delete(ctx); err == nil {
		t.Fatal("a container delete whose fsync failed on rank 0 succeeded")
	}
	remove()
	if err := ct.Delete(ctx); err != nil {
		t.Fatalf("the container delete sent again: %v", err)
	}
	queryBy(ctx, t, other, key, nil, "the container delete acknowledged")
}
