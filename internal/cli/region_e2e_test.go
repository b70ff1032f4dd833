package cli_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

var partitions = []client.Partition{client.ObjectStatic, client.RegionStatic, client.RegionDynamic, client.RegionLocal}

func partName(p client.Partition) string {
	return [...]string{"object-static", "region-static", "region-dynamic", "region-local"}[p]
}

// cells returns n int32 values that name their index plus base.
func cells(n int, base int32) []byte {
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(base+int32(i)))
	}
	return b
}

// model is the naive object: a row-major array of int32, zero where never
// written.
type model struct {
	dims []uint64
	data []byte
}

func newModel(dims ...uint64) *model {
	return &model{dims: dims, data: make([]byte, 4*region.Shape(dims...).Volume())}
}

func (m *model) write(box region.Box, b []byte) {
	if err := region.Copy(m.data, region.Shape(m.dims...), b, box, box, 4); err != nil {
		panic(err)
	}
}

func (m *model) read(box region.Box) []byte {
	out := make([]byte, 4*box.Volume())
	if err := region.Copy(out, box, m.data, region.Shape(m.dims...), box, 4); err != nil {
		panic(err)
	}
	return out
}

func box(off, size []uint64) region.Box { return region.Box{Off: off, Size: size} }

func TestRegionRoundTripsEveryPartition(t *testing.T) {
	tmpdir := up(t, 2)
	ctx := ctxT(t, 2*time.Minute)
	a, b := connect(t, tmpdir), connect(t, tmpdir)
	ct, _, err := a.CreateContainer(ctx, "regions", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	shapes := [][]uint64{{1000}, {40, 30}, {10, 12, 14}}
	for _, p := range partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			for _, dims := range shapes {
				name := fmt.Sprintf("%s-%s-%dd", partName(p), st, len(dims))
				t.Run(name, func(t *testing.T) {
					o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: p, Storage: st})
					if err != nil {
						t.Fatal(err)
					}
					m := newModel(dims...)
					// Overlapping writes: whole object, then an inner box.
					whole := region.Shape(dims...)
					w1 := cells(int(whole.Volume()), 1)
					if err := o.Write(ctx, whole, w1); err != nil {
						t.Fatal(err)
					}
					m.write(whole, w1)
					inner := whole.Clone()
					for i := range inner.Size {
						inner.Off[i] = dims[i] / 4
						inner.Size[i] = dims[i] / 2
					}
					w2 := cells(int(inner.Volume()), 100000)
					if err := o.Write(ctx, inner, w2); err != nil {
						t.Fatal(err)
					}
					m.write(inner, w2)
					// Another client, another process's view: a skewed read
					// that straddles both writes.
					ob, err := b.OpenObject(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					skew := whole.Clone()
					for i := range skew.Size {
						skew.Off[i] = dims[i] / 3
						skew.Size[i] = dims[i] - dims[i]/3 - 1
					}
					got := make([]byte, 4*skew.Volume())
					if err := ob.Read(ctx, skew, got); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, m.read(skew)) {
						t.Fatalf("skewed read %v differs from the model", skew)
					}
					all, err := ob.GetData(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(all, m.data) {
						t.Fatal("whole object differs from the model")
					}
					if err := o.Close(ctx); err != nil {
						t.Fatal(err)
					}
					if err := ob.Close(ctx); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
	_ = errors.Is
	_ = pdc.ErrInvalid
}
