package region_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// TestRegionLanes moves regions through shared-memory lanes, for every
// partition and storage mode on two server processes: asynchronous writes
// from a client whose lane is too small for all of them (the rest go on
// the connection, and the lane's space is reused as starts are answered),
// an overlapping synchronous write, then reads through a client on the
// connection and through another client's lane, in start_all with waits
// split into overlapping groups. Every value matches the model.
func TestRegionLanes(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 2*time.Minute)
	small := e2e.Connect(t, tmpdir, client.WithRegionTransport("shm"), client.WithLaneSize(512<<10))
	shm := e2e.Connect(t, tmpdir, client.WithRegionTransport("shm"))
	stream := e2e.Connect(t, tmpdir, client.WithRegionTransport("stream"))
	ct, _, err := small.CreateContainer(ctx, "lanes", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{128, 4096} // 2 MiB of int32
	for _, p := range clitest.Partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			name := fmt.Sprintf("%s-%s", clitest.PartName(p), st)
			t.Run(name, func(t *testing.T) {
				o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: p, Storage: st})
				if err != nil {
					t.Fatal(err)
				}
				m := clitest.NewModel(t, dims...)
				tiny := writeThroughLane(ctx, t, small, o, dims, int32(p)*1000, m)
				inner := clitest.Box([]uint64{20, 100}, []uint64{80, 2900})
				id := clitest.Cells(int(inner.Volume()), 1<<20)
				if err := o.Write(ctx, inner, id); err != nil {
					t.Fatal(err)
				}
				m.Write(inner, id)

				viaStream, err := stream.OpenObject(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				all, err := viaStream.GetData(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(all, m.Data()) {
					t.Fatal("read on the connection differs from the model")
				}

				viaShm := checkLaneReads(ctx, t, shm, name, dims, tiny, m)
				for _, x := range []*client.Object{o, viaStream, viaShm} {
					if err := x.Close(ctx); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
	if w, _ := small.LaneBytes(); w == 0 {
		t.Error("the writing client moved nothing through its lane")
	}
	if _, r := shm.LaneBytes(); r == 0 {
		t.Error("the reading client moved nothing through its lane")
	}
	if w, r := stream.LaneBytes(); w != 0 || r != 0 {
		t.Errorf("the stream client moved %d and %d bytes through a lane", w, r)
	}
}

// writeThroughLane starts writes of o in 8-row bands, values from base,
// and of a small region, which goes on the connection, waits for all of
// them through c, and records them in m. It returns the small region.
func writeThroughLane(ctx context.Context, t *testing.T, c *client.Client, o *client.Object, dims []uint64, base int32, m *clitest.Model) region.Box {
	t.Helper()
	rows := func(r0, n uint64) region.Box { return clitest.Box([]uint64{r0, 0}, []uint64{n, dims[1]}) }
	var ws []*client.Transfer
	for r := uint64(0); r < dims[0]; r += 8 {
		b := rows(r, 8) // 128 KiB
		data := clitest.Cells(int(b.Volume()), int32(r)*7+base)
		w, err := o.StartWrite(ctx, b, data)
		if err != nil {
			t.Fatal(err)
		}
		m.Write(b, data)
		ws = append(ws, w)
	}
	// A small region, which goes on the connection.
	tiny := clitest.Box([]uint64{3, 10}, []uint64{1, 100})
	td := clitest.Cells(100, -5)
	w, err := o.StartWrite(ctx, tiny, td)
	if err != nil {
		t.Fatal(err)
	}
	m.Write(tiny, td)
	if err := c.WaitAll(ctx, append(ws, w)); err != nil {
		t.Fatal(err)
	}
	return tiny
}

// checkLaneReads opens the object through c, starts reads of 16-row
// bands, the small region and an inner box with start_all, waits for them
// in two overlapping groups, and checks each against m. It returns the
// object for the caller to close.
func checkLaneReads(ctx context.Context, t *testing.T, c *client.Client, name string, dims []uint64, tiny region.Box, m *clitest.Model) *client.Object {
	t.Helper()
	rows := func(r0, n uint64) region.Box { return clitest.Box([]uint64{r0, 0}, []uint64{n, dims[1]}) }
	viaShm, err := c.OpenObject(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var rs []*client.Transfer
	var bufs [][]byte
	var boxes []region.Box
	for r := uint64(0); r < dims[0]; r += 16 {
		boxes = append(boxes, rows(r, 16))
	}
	boxes = append(boxes, tiny, clitest.Box([]uint64{10, 50}, []uint64{100, 3000}))
	for _, b := range boxes {
		buf := make([]byte, 4*b.Volume())
		rd, err := viaShm.NewTransfer(ctx, buf, client.Read, region.Shape(b.Size...), b)
		if err != nil {
			t.Fatal(err)
		}
		rs, bufs = append(rs, rd), append(bufs, buf)
	}
	if err := c.StartAll(ctx, rs); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAll(ctx, rs[:5]); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAll(ctx, rs); err != nil {
		t.Fatal(err)
	}
	for i, b := range boxes {
		if !bytes.Equal(bufs[i], m.Read(b)) {
			t.Fatalf("read of %v through a lane differs from the model", b)
		}
	}
	return viaShm
}

// TestRegionTransportUnknown: an unknown transport name fails Connect,
// naming the valid ones.
func TestRegionTransportUnknown(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	_, err := client.Connect(context.Background(), client.WithTmpDir(tmpdir), client.WithRegionTransport("carrier-pigeon"))
	if err == nil || !strings.Contains(err.Error(), "carrier-pigeon") || !strings.Contains(err.Error(), "shm") {
		t.Fatalf("got %v, want an error naming the bad mode and the valid ones", err)
	}
}
