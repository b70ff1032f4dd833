package region_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// TestStaleFirstWriteAfterRestart: a's handle holds an object's dims at
// version 0 (12 rows); b shrinks it to 4 rows, which cuts nothing, as no
// data server holds any of it. The server restarts, so it has seen no
// dims of the object, and no file of it says which version is newest.
// Then a writes rows 0-11 through its handle. A data server took version
// 0 as it took every version 0 (never confirmed), so the write was stored
// and acknowledged, rows 4-11 of it outside the object's dims, and when b
// grew the object back to 12 rows, those rows read a's bytes instead of
// the zeros a regrow after a shrink reads. The data server now learns the
// object's dims with the question it asks about an object it sees for the
// first time, and refuses a's write as stale; a's refreshed dims no
// longer fit its rows.
func TestStaleFirstWriteAfterRestart(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	ctx := e2e.Ctx(t, 2*time.Minute)
	a, b := e2e.Connect(t, tmpdir), e2e.Connect(t, tmpdir)
	ct, _, err := a.CreateContainer(ctx, "stalefirst", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	type obj struct {
		name   string
		oa, ob *client.Object
	}
	var objs []obj
	for _, p := range clitest.Partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			name := fmt.Sprintf("%s-%d", clitest.PartName(p), st)
			oa, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{12, 64}, Type: region.Uint64, Partition: p, Storage: st})
			if err != nil {
				t.Fatal(err)
			}
			ob, err := b.OpenObject(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := ob.SetDims(ctx, []uint64{4, 64}); err != nil {
				t.Fatal(err)
			}
			objs = append(objs, obj{name, oa, ob})
		}
	}

	e2e.KillAll(t, tmpdir)
	e2e.MustRun(t, "up", "--restart-dead", "--tmpdir", tmpdir)

	box := region.Shape(12, 64)
	buf := make([]byte, 8*box.Volume())
	for i := range box.Volume() {
		binary.LittleEndian.PutUint64(buf[8*i:], i+1)
	}
	for _, o := range objs {
		// a still holds 12 rows, version 0.
		if err := o.oa.Write(ctx, box, buf); err != nil {
			t.Logf("%s: a's write with dims from before the shrink: %v", o.name, err)
		}
		if err := o.ob.SetDims(ctx, []uint64{12, 64}); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(buf))
		if err := o.ob.Read(ctx, box, got); err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i := uint64(4 * 64); i < box.Volume(); i++ {
			if v := binary.LittleEndian.Uint64(got[8*i:]); v != 0 {
				if bad == 0 {
					t.Errorf("%s: row %d col %d reads %d after the shrink to 4 rows and the regrow, want 0", o.name, i/64, i%64, v)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d cells past the shrink hold bytes written through dims older than it", o.name, bad)
		}
	}
}
