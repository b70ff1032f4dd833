package stage_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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
)

// A produce whose metadata fsync fails, under sync durability, through the
// client: the producer is told it failed; a consumer waiting for the file
// is woken and told why (not left waiting for its deadline), as is one
// that looks it up then; once the store syncs again, a consume gets the
// file, and the producer's retry gets the next version. The server runs in
// this process: a failing fsync is injected through the file system seam
// (vfs.Faulty), which a pdc server process has no switch for.
func TestStageProduceWhoseMetadataFsyncFails(t *testing.T) {
	dir := t.TempDir()
	tmpdir, prod, cons := filepath.Join(dir, "tmp"), filepath.Join(dir, "prod"), filepath.Join(dir, "cons")
	for _, d := range []string{prod, cons} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	fsys := vfs.NewFaulty(vfs.Default)
	ready := make(chan struct{})
	cfg := server.Config{Rank: 0, Size: 1, TmpDir: tmpdir, DataDir: filepath.Join(dir, "data"), Durability: metastore.DurabilitySync,
		FS: fsys, Host: "node-a", StageProducerDir: prod, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
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
	producer := e2e.Connect(t, tmpdir, client.WithHost("node-a"), client.WithStageDirs(prod, ""))
	consumer := e2e.Connect(t, tmpdir, client.WithHost("node-b"), client.WithStageDirs("", cons), client.WithSharedStorage(false))
	if err := os.WriteFile(filepath.Join(prod, "f"), []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}

	type result struct {
		got client.Consumed
		err error
	}
	waiting := make(chan struct{})
	woken := make(chan result, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		got, err := consumer.Consume(wctx, "f", client.WithWaiting(func(string) { close(waiting) }))
		woken <- result{got, err}
	}()
	<-waiting
	time.Sleep(100 * time.Millisecond) // the wait reaches the server

	remove := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Path: "pdc.wal", Err: syscall.EIO})
	if _, err := producer.Produce(ctx, "f"); err == nil {
		t.Fatal("a produce whose metadata fsync failed succeeded")
	}
	select {
	case r := <-woken:
		if r.err == nil || errors.Is(r.err, pdc.ErrTimeout) {
			t.Fatalf("the waiting consume while the store cannot sync: %+v %v, want the store's error", r.got, r.err)
		}
		if !errors.Is(r.err, pdc.ErrIO) {
			t.Errorf("the waiting consume: %v, want an error wrapping %v", r.err, pdc.ErrIO)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a consumer waiting for a file whose produce's fsync failed was not woken")
	}
	if got, err := consumer.Consume(ctx, "f"); err == nil {
		t.Fatalf("a consume while the produce is not durable: %+v, want an error", got)
	}
	remove()

	got, err := consumer.Consume(ctx, "f")
	if err != nil {
		t.Fatalf("consume once the store syncs again: %v", err)
	}
	if got.Version != 1 {
		t.Fatalf("consume once the store syncs again: version %d, want 1", got.Version)
	}
	if b, err := os.ReadFile(got.Local); err != nil || string(b) != "first" {
		t.Fatalf("the consumed copy: %q %v", b, err)
	}
	again, err := producer.Produce(ctx, "f")
	if err != nil || again[0].Version != 2 {
		t.Fatalf("the retried produce: %+v %v, want version 2", again, err)
	}
}
