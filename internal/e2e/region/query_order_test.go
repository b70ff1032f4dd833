package region_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// TestQueryAfterStartedWrite: a query sees the writes its client started
// before it, waited or not, in every partition strategy. It used to go
// out at once: past writes still queued in the placer (not yet placed on
// a metadata server or sent) and past starts not yet answered (not yet
// registered on the data server), so it counted none or half of them.
func TestQueryAfterStartedWrite(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "qorder", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{64, 1 << 12}
	whole := region.Shape(dims...)
	for _, p := range clitest.Partitions {
		o, err := ct.CreateObject(ctx, clitest.PartName(p), client.ObjectProps{Dims: dims, Type: region.Int32, Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		for round := range 5 {
			v := int32(round + 1)
			buf := make([]byte, 4*whole.Volume())
			for i := range whole.Volume() {
				binary.LittleEndian.PutUint32(buf[4*i:], uint32(v))
			}
			tr, err := o.StartWrite(ctx, whole, buf)
			if err != nil {
				t.Fatal(err)
			}
			res, err := o.Query(ctx, client.Eq(v))
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if res.Hits != whole.Volume() {
				t.Errorf("%s round %d: query started after a write found %d of its %d elements", clitest.PartName(p), round, res.Hits, whole.Volume())
			}
		}
	}
}

// TestQueryAfterAnotherClientShrank: a whole-object query from a client
// holding the object's older, larger dims, after another client shrank
// it, succeeds in every partition strategy, and its hits cover the dims
// it says it answered for: the handle's last look (data servers apply a
// shrink only once a call carries it), or the new dims once it looked
// again. The dynamic strategies asked the metadata server where regions
// past the new end went and failed with pdc.ErrOutOfRange.
func TestQueryAfterAnotherClientShrank(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 2*time.Minute)
	a, b := e2e.Connect(t, tmpdir), e2e.Connect(t, tmpdir)
	ct, _, err := a.CreateContainer(ctx, "qshrink", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{64, 256}
	whole := region.Shape(dims...)
	buf := make([]byte, 4*whole.Volume())
	for i := range whole.Volume() {
		binary.LittleEndian.PutUint32(buf[4*i:], 7)
	}
	for _, p := range clitest.Partitions {
		name := "shrunk-" + clitest.PartName(p)
		o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Write(ctx, whole, buf); err != nil {
			t.Fatal(err)
		}
		ob, err := b.OpenObject(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.SetDims(ctx, []uint64{16, 256}); err != nil {
			t.Fatal(err)
		}
		res, err := o.Query(ctx, client.Eq(7))
		if err != nil {
			t.Errorf("%s: query with the dims from before another client's shrink: %v", clitest.PartName(p), err)
			continue
		}
		if want := region.Shape(res.Dims...).Volume(); res.Hits != want || res.Dims[0] != 16 && res.Dims[0] != 64 {
			t.Errorf("%s: query after a shrink to 16 rows found %d hits for dims %v, want %d", clitest.PartName(p), res.Hits, res.Dims, want)
		}
		if clitest.PartName(p) == "region-dynamic" || clitest.PartName(p) == "region-local" {
			if res.Dims[0] != 16 {
				t.Errorf("%s: query answered for dims %v; the metadata server holds %v", clitest.PartName(p), res.Dims, []uint64{16, 256})
			}
		}
	}
}
