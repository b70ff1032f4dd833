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

// TestStaleShrinkCutsNewerWrite: three clients change an object's dims
// with no transfer in between (a: 12 rows, c: 1 row, b: 24 rows), so the
// data servers have seen none of them. Then a writes rows 0-11 through its
// handle (dims 12, the oldest version): nothing newer has reached a data
// server, so the write is stored and acknowledged, although it comes after
// the regrow to 24 rows. Then c reads row 0 through its handle (dims 1,
// older than the 24 rows of b): a data server takes version 1 as newer
// than 12, applies it and cuts rows 1-11, which a's acknowledged write
// had put there after every dims change. Found by the crash loop (seed 5
// of pdc bench soak --cycles 30 --work 1s, cycle 19: a worker read zeros
// back from rows it had written just before).
func TestStaleShrinkCutsNewerWrite(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 2*time.Minute)
	ca, cb, cc := e2e.Connect(t, tmpdir), e2e.Connect(t, tmpdir), e2e.Connect(t, tmpdir)
	ct, _, err := ca.CreateContainer(ctx, "stalecut", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range clitest.Partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			name := fmt.Sprintf("%s-%d", clitest.PartName(p), st)
			if _, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{16, 64}, Type: region.Uint64, Partition: p, Storage: st}); err != nil {
				t.Fatal(err)
			}
			open := func(c *client.Client) *client.Object {
				o, err := c.OpenObject(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
			oa, ob, oc := open(ca), open(cb), open(cc)
			for _, s := range []struct {
				o    *client.Object
				rows uint64
			}{{oa, 12}, {oc, 1}, {ob, 24}} {
				if err := s.o.SetDims(ctx, []uint64{s.rows, 64}); err != nil {
					t.Fatal(err)
				}
			}
			box := region.Shape(12, 64)
			buf := make([]byte, 8*box.Volume())
			for i := range box.Volume() {
				binary.LittleEndian.PutUint64(buf[8*i:], i+1)
			}
			if err := oa.Write(ctx, box, buf); err != nil {
				t.Fatal(err)
			}
			// c, holding dims older than b's, reads row 0.
			if err := oc.Read(ctx, region.Shape(1, 64), make([]byte, 8*64)); err != nil {
				t.Logf("%s: c's read with old dims: %v", name, err)
			}
			got := make([]byte, 8*box.Volume())
			if err := open(cb).Read(ctx, box, got); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range box.Volume() {
				if v := binary.LittleEndian.Uint64(got[8*i:]); v != i+1 {
					if bad == 0 {
						t.Errorf("%s: row %d col %d reads %d, want %d (acknowledged after every dims change)", name, i/64, i%64, v, i+1)
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%s: %d of %d cells written after the dims changes lost", name, bad, box.Volume())
			}
		}
	}
}
