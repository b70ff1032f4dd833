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
func TestTagPutSentAgainAfterAFailedSyncIsFound(t *testing.T) {
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
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "syncfail", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	// An object on rank 0, and a key whose index entry is on rank 1.
	var o *client.Object
	for i := 0; o == nil; i++ {
		obj, err := ct.CreateObject(ctx, fmt.Sprint("o", i), client.ObjectProps{Dims: []uint64{1}, Type: region.Int})
		if err != nil {
			t.Fatal(err)
		}
		if obj.Info().Server == 0 {
			o = obj
		}
	}
	var key string
	for i := 0; key == ""; i++ {
		k := fmt.Sprint("key", i)
		pq, err := tagindex.Parse(k)
		if err != nil {
			t.Fatal(err)
		}
		if p := tagindex.For(2).Plan(pq, true); slices.Equal(p.Servers, []int{1}) {
			key = k
		}
	}

	remove := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Path: "pdc.wal", Err: syscall.EIO})
	if err := o.PutTag(ctx, key, client.String("v")); err == nil {
		t.Fatal("a tag put whose fsync failed succeeded")
	}
	remove()
	if err := o.PutTag(ctx, key, client.String("v")); err != nil {
		t.Fatalf("the tag put sent again: %v", err)
	}
	other := e2e.Connect(t, tmpdir)
	for _, q := range []struct {
		how string
		opt client.QueryOption
	}{{"scan", client.ScanOnly()}, {"index", client.IndexOnly()}} {
		got, err := other.Query(ctx, key, q.opt)
		if err != nil || !slices.Equal(ids(got), []uint64{o.ID()}) {
			t.Fatalf("query %q by %s from another client, the put acknowledged: %v, %v; want [%d]", key, q.how, ids(got), err, o.ID())
		}
	}
}
