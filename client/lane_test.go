package client_test

import (
	"bytes"
	"context"
	"path/filepath"
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
