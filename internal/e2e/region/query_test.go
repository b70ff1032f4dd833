package region_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// queryCase is a predicate and the same predicate evaluated in the test.
type queryCase struct {
	name   string
	pred   client.Pred
	match  func(v float64) bool
	within *region.Box
}

// TestDataQueryEveryPartition writes a 2-D float32 and an int32 object
// under three partition strategies on three servers, leaving a band of
// rows never written (zeros), and checks counts, selections and values of
// GT, LT, EQ, AND, OR and region-restricted queries against a naive
// evaluation of the same data.
func TestDataQueryEveryPartition(t *testing.T) {
	tmpdir := e2e.Up(t, 3)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "dq", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{30, 20}
	inner := region.Box{Off: []uint64{4, 3}, Size: []uint64{21, 9}}
	cases := []queryCase{
		{"gt", client.Gt(2), func(v float64) bool { return v > 2 }, nil},
		{"lt", client.Lt(-1), func(v float64) bool { return v < -1 }, nil},
		{"eq zero", client.Eq(0), func(v float64) bool { return v == 0 }, nil},
		{"eq", client.Eq(3), func(v float64) bool { return v == 3 }, nil},
		{"and", client.Ge(-1).And(client.Le(2)), func(v float64) bool { return v >= -1 && v <= 2 }, nil},
		{"or", client.Or(client.Lt(-2), client.Gt(4), client.Eq(1)), func(v float64) bool { return v < -2 || v > 4 || v == 1 }, nil},
		{"within gt", client.Gt(0), func(v float64) bool { return v > 0 }, &inner},
		{"within and", client.And(client.Gt(-3), client.Lt(3)), func(v float64) bool { return v > -3 && v < 3 }, &inner},
	}
	for _, p := range []client.Partition{client.RegionStatic, client.RegionDynamic, client.ObjectStatic} {
		for _, typ := range []region.Type{region.Float, region.Int32} {
			name := fmt.Sprintf("%s-%s", clitest.PartName(p), typ)
			t.Run(name, func(t *testing.T) {
				o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: typ, Partition: p})
				if err != nil {
					t.Fatal(err)
				}
				n := int(dims[0] * dims[1])
				model := make([]float64, n)
				enc := func(v float64) []byte { return encodeCell(typ, v) }
				// Three bands of rows written separately (on different
				// servers under region dynamic); rows 24-29 never written.
				for _, band := range [][2]uint64{{0, 9}, {9, 17}, {17, 24}} {
					b := region.Box{Off: []uint64{band[0], 0}, Size: []uint64{band[1] - band[0], dims[1]}}
					var buf []byte
					for i := band[0] * dims[1]; i < band[1]*dims[1]; i++ {
						v := float64(int(i*7%23) - 11)
						if typ == region.Float {
							v /= 2
						}
						model[i] = v
						buf = append(buf, enc(v)...)
					}
					if err := o.Write(ctx, b, buf); err != nil {
						t.Fatal(err)
					}
				}
				for _, qc := range cases {
					checkQueryCase(ctx, t, o, dims, model, enc, qc)
				}
			})
		}
	}
}

// encodeCell is v as a cell of an object of type typ (float32 or int32).
func encodeCell(typ region.Type, v float64) []byte {
	if typ == region.Float {
		return binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(v)))
	}
	return binary.LittleEndian.AppendUint32(nil, uint32(int32(v)))
}

// checkQueryCase checks the count, the selection and the values of query
// qc on o against a naive evaluation of model, and the coordinates of the
// first hit.
func checkQueryCase(ctx context.Context, t *testing.T, o *client.Object, dims []uint64, model []float64, enc func(float64) []byte, qc queryCase) {
	t.Helper()
	var opts []client.DataQueryOption
	area := region.Shape(dims...)
	if qc.within != nil {
		opts = append(opts, client.Within(*qc.within))
		area = *qc.within
	}
	var wantIdx []uint64
	var wantVals []byte
	region.Runs(region.Shape(dims...), area, func(r region.Run) bool {
		for i := r.Off; i < r.Off+r.Len; i++ {
			if qc.match(model[i]) {
				wantIdx = append(wantIdx, i)
				wantVals = append(wantVals, enc(model[i])...)
			}
		}
		return true
	})
	cnt, err := o.Query(ctx, qc.pred, opts...)
	if err != nil {
		t.Fatalf("%s: %v", qc.name, err)
	}
	if cnt.Hits != uint64(len(wantIdx)) || cnt.Selection != nil {
		t.Fatalf("%s %s: %d hits, want %d", qc.name, qc.pred, cnt.Hits, len(wantIdx))
	}
	sel, err := o.Query(ctx, qc.pred, append(opts, client.WithSelection())...)
	if err != nil || !slices.Equal(sel.Selection, wantIdx) && len(wantIdx) > 0 {
		t.Fatalf("%s: selection %v, want %v (%v)", qc.name, sel.Selection, wantIdx, err)
	}
	vals, err := o.Query(ctx, qc.pred, append(opts, client.WithValues())...)
	if err != nil || vals.Hits != uint64(len(wantIdx)) || !bytes.Equal(vals.Values, wantVals) {
		t.Fatalf("%s: values differ (%v)", qc.name, err)
	}
	if len(wantIdx) > 0 {
		co := vals.Coord(0)
		if region.Linearize(dims, co) != wantIdx[0] {
			t.Fatalf("%s: coord %v of index %d", qc.name, co, wantIdx[0])
		}
	}
}

// TestDataQueryBadInput: what an object cannot be asked gets a clear
// error, and the cluster keeps serving.
func TestDataQueryBadInput(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "dqbad", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	ints, err := ct.CreateObject(ctx, "ints", client.ObjectProps{Dims: []uint64{8, 8}, Type: region.Int32})
	if err != nil {
		t.Fatal(err)
	}
	strs, err := ct.CreateObject(ctx, "strs", client.ObjectProps{Dims: []uint64{64}, Type: region.String})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name string
		o    *client.Object
		pred client.Pred
		opts []client.DataQueryOption
		want error
	}{
		{"string object", strs, client.Eq(1), nil, pdc.ErrInvalid},
		{"fraction over ints", ints, client.Gt(0.5), nil, pdc.ErrInvalid},
		{"out of range for int32", ints, client.Lt(uint64(1) << 40), nil, pdc.ErrInvalid},
		{"empty predicate", ints, client.Pred{}, nil, pdc.ErrInvalid},
		{"region outside", ints, client.Gt(0), []client.DataQueryOption{client.Within(region.Box{Off: []uint64{4, 4}, Size: []uint64{5, 1}})}, pdc.ErrOutOfRange},
		{"region ndim", ints, client.Gt(0), []client.DataQueryOption{client.Within(region.Shape(4))}, pdc.ErrInvalid},
	} {
		_, err := bad.o.Query(ctx, bad.pred, bad.opts...)
		if !errors.Is(err, bad.want) {
			t.Errorf("%s: %v, want %v", bad.name, err, bad.want)
		} else {
			t.Logf("%s: %v", bad.name, err)
		}
	}
	// Never written: every element is zero, on a data server (region
	// static) or in no server's map (region dynamic).
	dyn, err := ct.CreateObject(ctx, "dyn", client.ObjectProps{Dims: []uint64{8, 8}, Type: region.Int32, Partition: client.RegionDynamic})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []*client.Object{ints, dyn} {
		r, err := o.Query(ctx, client.Eq(0), client.WithValues())
		if err != nil || r.Hits != 64 || len(r.Selection) != 64 || r.Selection[63] != 63 || len(r.Values) != 256 {
			t.Fatalf("%s never written: %+v %v", o.Name(), r, err)
		}
		if r, err := o.Query(ctx, client.Gt(0), client.WithSelection()); err != nil || r.Hits != 0 || len(r.Selection) != 0 {
			t.Fatalf("%s never written, > 0: %+v %v", o.Name(), r, err)
		}
	}
	// Half written under region dynamic: the rest still matches zero.
	if err := dyn.Write(ctx, region.Box{Off: []uint64{0, 0}, Size: []uint64{4, 8}}, bytes.Repeat([]byte{1, 0, 0, 0}, 32)); err != nil {
		t.Fatal(err)
	}
	if r, err := dyn.Query(ctx, client.Eq(0), client.WithSelection()); err != nil || r.Hits != 32 || r.Selection[0] != 32 {
		t.Fatalf("half written: %+v %v", r, err)
	}
	if r, err := dyn.Query(ctx, client.Eq(1).Or(client.Eq(0))); err != nil || r.Hits != 64 {
		t.Fatalf("half written, 0 or 1: %+v %v", r, err)
	}
}
