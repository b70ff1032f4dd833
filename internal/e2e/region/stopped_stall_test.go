package region_test

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/region"
)

// TestStoppedDataServerStallsNoOtherObject: a data server that takes
// connections and answers nothing (SIGSTOP) holds up shrinks' pushes of
// their cuts, and deletes' pushes of their tombstones, each for its own
// bound (10 s); it must not hold up anything else on the metadata
// server: a tag put of another object answers at once, and each delete
// within its own bound, however many pushes already wait for that data
// server. The second delete took 30 s when a delete's push queued,
// without a deadline, behind the tombstone retrier's push to the stopped
// server.
func TestStoppedDataServerStallsNoOtherObject(t *testing.T) {
	tmpdir := e2e.Up(t, 2, "--index=false")
	ctx := e2e.Ctx(t, 3*time.Minute)
	c := e2e.Connect(t, tmpdir)
	const victimRank = 1
	// Everything on the metadata server that stays up.
	var ct *client.Container
	for k := 0; ct == nil; k++ {
		cont, _, err := c.CreateContainer(ctx, fmt.Sprintf("stall-%d", k), client.Persistent)
		if err != nil {
			t.Fatal(err)
		}
		if placement.OwnerOfID(cont.ID(), 2) != victimRank {
			ct = cont
		}
	}
	var objs []*client.Object
	for k := 0; len(objs) < 4; k++ {
		o, err := ct.CreateObject(ctx, fmt.Sprintf("o%d", k), client.ObjectProps{Dims: []uint64{27, 64}, Type: region.Uint64,
			Partition: client.RegionStatic, Storage: client.StorageByOffset})
		if err != nil {
			t.Fatal(err)
		}
		if placement.OwnerOfID(o.ID(), 2) != victimRank {
			objs = append(objs, o)
		}
	}
	shrunk := objs[0]
	whole := region.Shape(27, 64)
	buf := make([]byte, 8*whole.Volume())
	for i := range whole.Volume() {
		binary.LittleEndian.PutUint64(buf[8*i:], i+1)
	}
	if err := shrunk.Write(ctx, whole, buf); err != nil {
		t.Fatal(err)
	}
	// Another client, which started no transfer, for the other objects.
	other := e2e.Connect(t, tmpdir)
	var handles []*client.Object
	for _, o := range objs[1:] {
		h, err := other.OpenObject(ctx, o.Info().Name)
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	var victim client.Server
	for _, s := range c.Servers() {
		if s.Rank == victimRank {
			victim = s
		}
	}
	e2e.Stop(t, victim.PID)
	defer e2e.Continue(victim.PID)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		start := time.Now()
		err := shrunk.SetDims(ctx, []uint64{8, 64})
		t.Logf("the shrink answered in %v: %v", time.Since(start).Round(time.Millisecond), err)
	})
	// A second shrink of the object, which finds the first's pending
	// cut: it delivers it out of the object lock, which every create,
	// delete and tag write of the server takes, and is refused once
	// that push gives up on the stopped server.
	time.Sleep(100 * time.Millisecond)
	wg.Go(func() {
		start := time.Now()
		err := shrunk.SetDims(ctx, []uint64{4, 64})
		t.Logf("the second shrink answered in %v: %v", time.Since(start).Round(time.Millisecond), err)
	})
	time.Sleep(500 * time.Millisecond)
	timed := func(what string, bound time.Duration, f func() error) {
		t.Helper()
		start := time.Now()
		err := f()
		d := time.Since(start)
		t.Logf("%s answered in %v: %v", what, d.Round(time.Millisecond), err)
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		if d > bound {
			t.Errorf("%s took %v with a data server stopped, over its bound of %v", what, d.Round(time.Millisecond), bound)
		}
	}
	timed("a tag put of another object", 2*time.Second, func() error {
		return handles[0].PutTag(ctx, "kind", client.String("other"))
	})
	// A delete waits up to 10 s (goneWait) for the data servers to drop
	// the object's data, then answers; the tombstone is retried.
	for i, h := range handles[1:] {
		timed(fmt.Sprintf("delete %d of another object", i+1), 13*time.Second, func() error { return h.Delete(ctx) })
	}
}
