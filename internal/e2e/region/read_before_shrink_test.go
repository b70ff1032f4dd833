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

// TestReadStartedBeforeOwnShrink: a client starts a read of rows past a
// shrink, then shrinks the object itself, then waits for the read. The
// read was started under the old dims, as a write started before the
// shrink is stored before the cut: it reads the rows as they were, not
// zeros for rows that were written. It failed as stale, served at its
// wait after the cut with a region the dims no longer held; the shrink
// now waits for it first.
func TestReadStartedBeforeOwnShrink(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "readshrink", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range clitest.Partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			name := fmt.Sprintf("%s-%d", clitest.PartName(p), st)
			o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{27, 64}, Type: region.Uint64, Partition: p, Storage: st})
			if err != nil {
				t.Fatal(err)
			}
			whole := region.Shape(27, 64)
			buf := make([]byte, 8*whole.Volume())
			for i := range whole.Volume() {
				binary.LittleEndian.PutUint64(buf[8*i:], i+1)
			}
			if err := o.Write(ctx, whole, buf); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(buf))
			tr, err := o.StartRead(ctx, whole, got)
			if err != nil {
				t.Fatal(err)
			}
			if err := o.SetDims(ctx, []uint64{8, 64}); err != nil {
				t.Fatal(err)
			}
			if err := tr.Wait(ctx); err != nil {
				t.Errorf("%s: the read started before the shrink failed: %v", name, err)
				continue
			}
			for i := range whole.Volume() {
				if v := binary.LittleEndian.Uint64(got[8*i:]); v != i+1 {
					t.Errorf("%s: a read started before the object's shrink to 8 rows: row %d col %d reads %d, want %d", name, i/64, i%64, v, i+1)
					break
				}
			}
		}
	}
}
