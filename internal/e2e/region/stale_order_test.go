package region_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// TestStaleWritesKeepTheirOrder: a client whose dims are out of date (another
// client changed them, and the data servers know) starts a write without
// waiting, then writes the same place again; the second write must win.
// The second is a Write (one waited request) or started too and waited
// first. A data server refuses the first as stale, and the client starts
// it again with fresh dims when it collects its answer; that used to come
// after the second was stored (refused too and started again at once, or
// sent with dims refreshed meanwhile and stored as it came), since a wait
// collects only its own start, so the first overwrote the second.
func TestStaleWritesKeepTheirOrder(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 2*time.Minute)
	a, b := e2e.Connect(t, tmpdir), e2e.Connect(t, tmpdir)
	ct, _, err := a.CreateContainer(ctx, "stale", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	scratch, err := ct.CreateObject(ctx, "scratch", client.ObjectProps{Dims: []uint64{1}, Type: region.Int32})
	if err != nil {
		t.Fatal(err)
	}
	fill := func(n uint64, v int32) []byte {
		buf := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(v))
		}
		return buf
	}
	for _, p := range clitest.Partitions {
		for _, tc := range []struct{ refresh, started bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			refresh := tc.refresh
			name := fmt.Sprintf("%s-refresh-%v-started-%v", clitest.PartName(p), refresh, tc.started)
			dims := []uint64{40, 256}
			oa, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: p})
			if err != nil {
				t.Fatal(err)
			}
			whole := region.Shape(dims[0], dims[1])
			if err := oa.Write(ctx, whole, fill(whole.Volume(), 1)); err != nil {
				t.Fatal(err)
			}
			// Another client grows the object and reads all of it, so
			// that every data server knows the new dims.
			ob, err := b.OpenObject(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := ob.SetDims(ctx, []uint64{dims[0] + 8, dims[1]}); err != nil {
				t.Fatal(err)
			}
			if err := ob.Read(ctx, whole, make([]byte, 4*whole.Volume())); err != nil {
				t.Fatal(err)
			}
			// Sent before StartAll returns (a StartAll of two does not
			// go through the placer), with the old dims.
			first, err := oa.NewTransfer(ctx, fill(whole.Volume(), 2), client.Write, region.Shape(whole.Volume()), whole)
			if err != nil {
				t.Fatal(err)
			}
			tiny, err := scratch.NewTransfer(ctx, fill(1, 4), client.Write, region.Shape(1), region.Shape(1))
			if err != nil {
				t.Fatal(err)
			}
			if err := a.StartAll(ctx, []*client.Transfer{first, tiny}); err != nil {
				t.Fatal(err)
			}
			if refresh {
				if _, err := oa.Refresh(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.started {
				if err := oa.Write(ctx, whole, fill(whole.Volume(), 3)); err != nil {
					t.Fatal(err)
				}
			} else {
				// Started too, in a start of its own, and waited first.
				second, err := oa.NewTransfer(ctx, fill(whole.Volume(), 3), client.Write, region.Shape(whole.Volume()), whole)
				if err != nil {
					t.Fatal(err)
				}
				other, err := scratch.NewTransfer(ctx, fill(1, 4), client.Write, region.Shape(1), region.Shape(1))
				if err != nil {
					t.Fatal(err)
				}
				if err := a.StartAll(ctx, []*client.Transfer{second, other}); err != nil {
					t.Fatal(err)
				}
				if err := second.Wait(ctx); err != nil {
					t.Fatal(err)
				}
				if err := other.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.WaitAll(ctx, []*client.Transfer{first, tiny}); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 4*whole.Volume())
			if err := ob.Read(ctx, whole, got); err != nil {
				t.Fatal(err)
			}
			if want := fill(whole.Volume(), 3); !bytes.Equal(got, want) {
				n := 0
				for i := 0; i < len(got); i += 4 {
					if !bytes.Equal(got[i:i+4], want[i:i+4]) {
						n++
					}
				}
				t.Errorf("%s: %d of %d elements do not hold the second write", name, n, whole.Volume())
			}
		}
	}
}
