package client

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/server"
)

// shmClient runs a one-server cluster in this process for the test and
// connects a client to it whose regions go through lanes. The server
// stops, and its error fails the test, when the test ends.
func shmClient(t *testing.T) (context.Context, *Client) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	sctx, stop := context.WithCancel(ctx)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- server.Run(sctx, server.Config{TmpDir: filepath.Join(dir, "tmp"), DataDir: filepath.Join(dir, "data"),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Ready: func(cluster.Server, *cluster.List) { close(ready) }})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
		cancel()
	})
	select {
	case <-ready:
	case err := <-done:
		done <- err // for the cleanup
		t.Fatal(err)
	}
	c, err := Connect(ctx, WithTmpDir(filepath.Join(dir, "tmp")), WithRegionTransport("shm"))
	if err != nil {
		t.Fatal(err)
	}
	return ctx, c
}
