package deletes_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/server"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A whole server (metadata and data) with sync durability whose metadata
// log's fsync fails, driven through the client: a create whose fsync
// failed and that is sent again gets its object, and the data of an
// object whose delete's fsync failed stays while the delete may not
// survive a crash and goes once it is durable, without a restart. The
// server runs in this process: a failing fsync is injected through the
// file system seam (vfs.Faulty), which a pdc server process has no
// switch for.
func TestMetadataFsyncFailsUnderAClient(t *testing.T) {
	dir := t.TempDir()
	tmpdir, datadir := filepath.Join(dir, "tmp"), filepath.Join(dir, "data")
	fsys := vfs.NewFaulty(vfs.Default)
	ready := make(chan struct{})
	cfg := server.Config{Rank: 0, Size: 1, TmpDir: tmpdir, DataDir: datadir, Durability: metastore.DurabilitySync,
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
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("server did not start: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("server did not start within a minute")
	}
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "syncfail", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	props := client.ObjectProps{Dims: []uint64{1024}, Type: region.Uint8}
	failSyncs := func() (remove func()) {
		return fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Path: "pdc.wal", Err: syscall.EIO})
	}

	// A create told it failed, sent again.
	remove := failSyncs()
	if _, err := ct.CreateObject(ctx, "retried", props); err == nil {
		t.Fatal("a create whose fsync failed succeeded")
	}
	remove()
	o, err := ct.CreateObject(ctx, "retried", props)
	if err != nil {
		t.Fatalf("the create sent again after one whose fsync failed: %v", err)
	}
	if again, err := c.OpenObject(ctx, "retried"); err != nil || again.ID() != o.ID() {
		t.Fatalf("open after the retried create: %v (id %v, want %d)", err, again, o.ID())
	}

	// A delete told it failed: its data stays while the delete is not
	// durable, and goes once it is.
	buf := []byte(strings.Repeat("x", 1024))
	if err := o.Write(ctx, region.Box{Off: []uint64{0}, Size: []uint64{1024}}, buf); err != nil {
		t.Fatal(err)
	}
	files := func() []string {
		var found []string
		prefix := fmt.Sprintf("%016x", o.ID())
		_ = filepath.WalkDir(datadir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), prefix) {
				found = append(found, p)
			}
			return nil
		})
		return found
	}
	if len(files()) == 0 {
		t.Fatal("the object's data file is not where the test looks")
	}
	remove = failSyncs()
	if err := o.Delete(ctx); err == nil {
		t.Fatal("a delete whose fsync failed succeeded")
	}
	time.Sleep(time.Second)
	if len(files()) == 0 {
		t.Fatal("the data went while its delete was not durable")
	}
	remove()
	deadline := time.Now().Add(30 * time.Second)
	for len(files()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the data of an object whose delete is durable now is still there: %v", files())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.OpenObject(ctx, "retried"); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("open after the delete: %v, want not found", err)
	}
}
