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

// TestShrinkThenGrowReadsZeros: a shrink of the first dim cuts the rows
// past it, so that growing the object again reads zeros there, even when
// no transfer came between the shrink and the regrow. Found by the crash
// loop (its set dims): a region-static object stored by offset, with its
// rows on two data servers, read the rows written before the shrink.
func TestShrinkThenGrowReadsZeros(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "regrow", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range clitest.Partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			name := fmt.Sprintf("%s-%d", clitest.PartName(p), st)
			o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{16, 64}, Type: region.Uint64, Partition: p, Storage: st})
			if err != nil {
				t.Fatal(err)
			}
			if err := o.SetDims(ctx, []uint64{27, 64}); err != nil {
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
			if err := o.SetDims(ctx, []uint64{8, 64}); err != nil {
				t.Fatal(err)
			}
			if err := o.SetDims(ctx, []uint64{26, 64}); err != nil {
				t.Fatal(err)
			}
			all := region.Shape(26, 64)
			got := make([]byte, 8*all.Volume())
			if err := o.Read(ctx, all, got); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range all.Volume() {
				v := binary.LittleEndian.Uint64(got[8*i:])
				want := uint64(0)
				if i < 8*64 {
					want = i + 1
				}
				if v != want {
					if bad == 0 {
						t.Errorf("%s: row %d col %d reads %d, want %d", name, i/64, i%64, v, want)
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%s: %d of %d cells wrong after shrinking to 8 rows and growing to 26", name, bad, all.Volume())
			}
		}
	}
}
