package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/server"
	"github.com/pdcgo/pdc/region"
)

// benchCluster runs one in-process server with both roles and connects
// a client to it.
func benchCluster(b *testing.B) (*client.Client, *client.Container) {
	b.Helper()
	dir := b.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{TmpDir: filepath.Join(dir, "tmp"), DataDir: filepath.Join(dir, "data"),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Ready:  func(cluster.Server, *cluster.List) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	c, err := client.Connect(context.Background(), client.WithTmpDir(filepath.Join(dir, "tmp")), client.WithRegionTransport("stream"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	ct, _, err := c.CreateContainer(cctx, "bench", client.Persistent)
	if err != nil {
		b.Fatal(err)
	}
	return c, ct
}

// BenchmarkSmallRegions writes and reads back 256 regions of 4 KiB with
// one StartAll and one WaitAll each, per partition strategy: its
// allocs/op are the client's (and the in-process server's) per batch.
func BenchmarkSmallRegions(b *testing.B) {
	const n, size = 256, 4096
	for _, p := range []client.Partition{client.ObjectStatic, client.RegionStatic, client.RegionDynamic} {
		b.Run(p.String(), func(b *testing.B) {
			c, ct := benchCluster(b)
			ctx := context.Background()
			o, err := ct.CreateObject(ctx, "o", client.ObjectProps{Dims: []uint64{n * size}, Type: region.Uint8, Partition: p})
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, n*size)
			run := func(a client.Access) {
				ts := make([]*client.Transfer, n)
				for i := range ts {
					local := region.Box{Off: []uint64{uint64(i * size)}, Size: []uint64{size}}
					if ts[i], err = o.NewTransfer(ctx, buf, a, local, local); err != nil {
						b.Fatal(err)
					}
				}
				if err := c.StartAll(ctx, ts); err != nil {
					b.Fatal(err)
				}
				if err := c.WaitAll(ctx, ts); err != nil {
					b.Fatal(err)
				}
			}
			run(client.Write)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				run(client.Write)
				run(client.Read)
			}
			b.StopTimer()
			if err := o.Close(ctx); err != nil {
				b.Fatal(fmt.Errorf("close: %w", err))
			}
		})
	}
}
