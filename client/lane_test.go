package client_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// TestLaneWindowedWaits reads an object larger than the client's lane in
// one start_all and wait_all: the waits take turns with the lane's space
// (the oldest answer frees it for the next), so every read goes through
// the lane; writes started faster than they are answered spill over onto
// the connection. Every byte reads back.
func TestLaneWindowedWaits(t *testing.T) {
	dir := t.TempDir()
	startServers(t, dir, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.WithTmpDir(filepath.Join(dir, "tmp")),
		client.WithRegionTransport("shm"), client.WithLaneSize(12<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ct, _, err := c.CreateContainer(ctx, "lanes", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const size, rs = 40 << 20, 1 << 20
	o, err := ct.CreateObject(ctx, "big", client.ObjectProps{Dims: []uint64{size}, Type: region.Uint8})
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i*31 + i>>20)
	}
	dst := make([]byte, size)
	for _, a := range []client.Access{client.Write, client.Read} {
		buf := src
		if a == client.Read {
			buf = dst
		}
		var ts []*client.Transfer
		for off := uint64(0); off < size; off += rs {
			box := region.Box{Off: []uint64{off}, Size: []uint64{rs}}
			tr, err := o.NewTransfer(ctx, buf[off:off+rs], a, region.Shape(rs), box)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, tr)
		}
		if err := c.StartAll(ctx, ts); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitAll(ctx, ts); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(src, dst) {
		t.Fatal("the object read back through the lane differs")
	}
	w, r := c.LaneBytes()
	if w == 0 || w > size {
		t.Errorf("%d bytes written through the lane, want some of %d", w, size)
	}
	if r != size {
		t.Errorf("%d bytes read through the lane, want all %d: the waits did not take turns with its space", r, size)
	}
}

// TestStaleDimsRetried: a client whose view of an object's dims is older
// than one its data server has seen gets its pipelined start refused as
// stale, looks the dims up again and starts again, through the lane or
// the connection; the write lands.
func TestStaleDimsRetried(t *testing.T) {
	dir := t.TempDir()
	startServers(t, dir, 1)
	for _, tr := range []string{"stream", "shm"} {
		t.Run(tr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			connect := func() *client.Client {
				c, err := client.Connect(ctx, client.WithTmpDir(filepath.Join(dir, "tmp")), client.WithRegionTransport(tr))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			a, b := connect(), connect()
			ct, _, err := a.CreateContainer(ctx, "stale-"+tr, client.Persistent)
			if err != nil {
				t.Fatal(err)
			}
			const n = 64 << 10
			oa, err := ct.CreateObject(ctx, "grows-"+tr, client.ObjectProps{Dims: []uint64{n}, Type: region.Uint8})
			if err != nil {
				t.Fatal(err)
			}
			half := region.Box{Off: []uint64{0}, Size: []uint64{n / 2}}
			if err := oa.Write(ctx, half, bytes.Repeat([]byte{1}, n/2)); err != nil {
				t.Fatal(err)
			}
			ob, err := b.OpenObject(ctx, "grows-"+tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := ob.SetDims(ctx, []uint64{2 * n}); err != nil {
				t.Fatal(err)
			}
			// The data server sees the new dims.
			if err := ob.Write(ctx, region.Box{Off: []uint64{n}, Size: []uint64{n / 2}}, bytes.Repeat([]byte{2}, n/2)); err != nil {
				t.Fatal(err)
			}
			// a still has the old ones.
			want := bytes.Repeat([]byte{3}, n/2)
			w, err := oa.StartWrite(ctx, half, want)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Wait(ctx); err != nil {
				t.Fatalf("a write with out-of-date dims: %v, want it retried with fresh ones", err)
			}
			got := make([]byte, n/2)
			if err := ob.Read(ctx, half, got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("read after the retried write: %v, equal %v", err, bytes.Equal(got, want))
			}
		})
	}
}

// TestAutoLaneAfterWarmUp: in auto mode a client starts on the connection,
// and takes a lane once it has moved enough to a server on its host to
// pay for the lane's fresh memory.
func TestAutoLaneAfterWarmUp(t *testing.T) {
	dir := t.TempDir()
	startServers(t, dir, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.WithTmpDir(filepath.Join(dir, "tmp")), client.WithRegionTransport("auto"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ct, _, err := c.CreateContainer(ctx, "auto", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const size = 32 << 20
	o, err := ct.CreateObject(ctx, "o", client.ObjectProps{Dims: []uint64{size}, Type: region.Uint8})
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.Repeat([]byte{7}, size)
	whole := region.Shape(size)
	for pass := range 10 {
		if err := o.Write(ctx, whole, buf); err != nil {
			t.Fatal(err)
		}
		if w, _ := c.LaneBytes(); pass < 2 && w != 0 {
			t.Fatalf("pass %d: %d bytes through a lane before the client moved much", pass, w)
		}
	}
	if w, _ := c.LaneBytes(); w == 0 {
		t.Fatalf("no lane after %d MiB written to a server on this host", 10*size>>20)
	}
	got := make([]byte, size)
	if err := o.Read(ctx, whole, got); err != nil || !bytes.Equal(got, buf) {
		t.Fatalf("read back: %v, equal %v", err, bytes.Equal(got, buf))
	}
}

// TestCloseWhileMakingALane: Close racing the first write through a lane
// neither hangs nor crashes. (Found by review: Close held the client's
// lock while waiting for the lane being made, which needed that lock.)
func TestCloseWhileMakingALane(t *testing.T) {
	dir := t.TempDir()
	startServers(t, dir, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c0, err := client.Connect(ctx, client.WithTmpDir(filepath.Join(dir, "tmp")))
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	ct, _, err := c0.CreateContainer(ctx, "close", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const n = 64 << 10
	if _, err := ct.CreateObject(ctx, "o", client.ObjectProps{Dims: []uint64{n}, Type: region.Uint8}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, n)
	for i := range 40 {
		c, err := client.Connect(ctx, client.WithTmpDir(filepath.Join(dir, "tmp")), client.WithRegionTransport("shm"), client.WithLaneSize(1<<20))
		if err != nil {
			t.Fatal(err)
		}
		o, err := c.OpenObject(ctx, "o")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { _ = o.Write(ctx, region.Shape(n), buf) })
		wg.Go(func() {
			time.Sleep(time.Duration(i%40) * 10 * time.Microsecond) // vary the race
			_ = c.Close()
		})
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("iteration %d: Close and a write through a lane hang", i)
		}
	}
}
