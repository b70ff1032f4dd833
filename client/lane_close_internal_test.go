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
	"github.com/pdcgo/pdc/region"
)

// TestCloseLetsGoOfLanes: a client closed with starts it never waited
// for unmaps its lanes: the starts end, and their spans with them.
func TestCloseLetsGoOfLanes(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- server.Run(sctx, server.Config{TmpDir: filepath.Join(dir, "tmp"), DataDir: filepath.Join(dir, "data"),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Ready: func(cluster.Server, *cluster.List) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	c, err := Connect(ctx, WithTmpDir(filepath.Join(dir, "tmp")), WithRegionTransport("shm"))
	if err != nil {
		t.Fatal(err)
	}
	ct, _, err := c.CreateContainer(ctx, "close", Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	o, err := ct.CreateObject(ctx, "o", ObjectProps{Dims: []uint64{n}, Type: region.Uint8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.StartWrite(ctx, region.Shape(n), make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if err := c.settle(ctx); err != nil { // started on the data server
		t.Fatal(err)
	}
	c.lanes.mu.Lock()
	var l *clientLane
	for _, slot := range c.lanes.by {
		l = slot.l
	}
	c.lanes.mu.Unlock()
	if l == nil || l.refs.Load() < 2 {
		t.Fatalf("no lane in use after a start through it")
	}
	c.Close()
	if got := l.refs.Load(); got != 0 {
		t.Fatalf("%d references to the lane after Close: it stays mapped", got)
	}
}
