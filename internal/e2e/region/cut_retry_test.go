package region_test

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

// TestMissedCutDeliveredOnceBack: a data server is killed (kill -9)
// before a shrink, so the shrink's cut cannot reach it, and restarted.
// With no further set dims of the object and no restart of its metadata
// server, the cut must reach it: until then it serves the rows the
// acknowledged shrink dropped to a handle that never learned the shrink.
// Before the metadata server retried pending cuts while running, it did
// so until the object's next set dims or a restart of its metadata
// server.
func TestMissedCutDeliveredOnceBack(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 3*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "cutretry", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const victimRank = 1
	// Region static over two data servers in blocks of 14 rows: rows
	// 14-26 are on the victim. The object's metadata is on the other
	// server, so that its shrink is answered while the victim is down.
	o := objectAwayFrom(ctx, t, ct, "o", client.ObjectProps{Dims: []uint64{27, 64}, Type: region.Uint64,
		Partition: client.RegionStatic, Storage: client.StorageByOffset}, victimRank)
	whole := region.Shape(27, 64)
	buf := counted(whole)
	if err := o.Write(ctx, whole, buf); err != nil {
		t.Fatal(err)
	}
	// A handle of another client, which never learns the shrink.
	stale, err := e2e.Connect(t, tmpdir).OpenObject(ctx, o.Info().Name)
	if err != nil {
		t.Fatal(err)
	}
	var victim client.Server
	for _, s := range c.Servers() {
		if s.Rank == victimRank {
			victim = s
		}
	}
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim.PID); err != nil {
		t.Fatal(err)
	}
	if err := o.SetDims(ctx, []uint64{8, 64}); err != nil {
		t.Fatalf("shrink with a data server down: %v", err)
	}
	e2e.MustRun(t, "up", "--restart-dead", "--tmpdir", tmpdir)
	// The victim's rows, read through the stale handle, until they are
	// no longer the ones the shrink dropped.
	rows := region.Box{Off: []uint64{14, 0}, Size: []uint64{13, 64}}
	got := make([]byte, 8*rows.Volume())
	start := time.Now()
	for {
		err := stale.Read(ctx, rows, got)
		if errors.Is(err, pdc.ErrOutOfRange) {
			// Refused as stale by the data server, which applied the
			// cut, and past the dims the handle refreshed.
			t.Logf("after %v the stale read is refused: %v", time.Since(start).Round(time.Millisecond), err)
			break
		}
		old := 0
		if err != nil {
			old = -1
		}
		for i := range rows.Volume() {
			if binary.LittleEndian.Uint64(got[8*i:]) == 14*64+i+1 {
				old++
			}
		}
		if old == 0 {
			t.Logf("after %v the stale read reads no dropped row", time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Since(start) > 45*time.Second {
			if err != nil {
				t.Fatalf("45 s after the data server came back, the stale read: %v", err)
			}
			t.Fatalf("45 s after the data server came back, %d of %d cells the shrink dropped still read their old values through a handle that never learned the shrink: the cut was not delivered", old, rows.Volume())
		}
		time.Sleep(250 * time.Millisecond)
	}
}
