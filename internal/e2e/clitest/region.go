package clitest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// Partitions are the four partition strategies, each of which the region
// tests run through.
var Partitions = []client.Partition{client.ObjectStatic, client.RegionStatic, client.RegionDynamic, client.RegionLocal}

// PartName is p's name on the command line (pdc bench --partitions).
func PartName(p client.Partition) string {
	return [...]string{"object-static", "region-static", "region-dynamic", "region-local"}[p]
}

// Cells returns n int32 values that name their index plus base.
func Cells(n int, base int32) []byte {
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(base+int32(i)))
	}
	return b
}

// Model is the naive object: a row-major array of int32, zero where never
// written. A test checks what it reads from pdc against what the model
// reads.
type Model struct {
	t    testing.TB
	dims []uint64
	data []byte
}

// NewModel is a model of an object of dims, all zero; t fails on a box
// outside it.
func NewModel(t testing.TB, dims ...uint64) *Model {
	return &Model{t: t, dims: dims, data: make([]byte, 4*region.Shape(dims...).Volume())}
}

// Write puts b (box's int32 values, row-major) into box.
func (m *Model) Write(box region.Box, b []byte) {
	m.t.Helper()
	if err := region.Copy(m.data, region.Shape(m.dims...), b, box, box, 4); err != nil {
		m.t.Fatalf("model write %v: %v", box, err)
	}
}

// Read returns box's values, row-major.
func (m *Model) Read(box region.Box) []byte {
	m.t.Helper()
	out := make([]byte, 4*box.Volume())
	if err := region.Copy(out, box, m.data, region.Shape(m.dims...), box, 4); err != nil {
		m.t.Fatalf("model read %v: %v", box, err)
	}
	return out
}

// Data is the whole object's values, row-major: the model's own array,
// not a copy.
func (m *Model) Data() []byte { return m.data }

// Box is the region of offset off and size size.
func Box(off, size []uint64) region.Box { return region.Box{Off: off, Size: size} }

// pattern is the value every test writes at linear index i of an object.
func pattern(i uint64) int32 { return int32(i*7 + 3) }

// PatternOf is the values of box b (row-major) of an object of dims that
// the region-writer role wrote: at linear index i, int32(i*7+3).
func PatternOf(dims []uint64, b region.Box) []byte {
	out := make([]byte, 4*b.Volume())
	coord := make([]uint64, len(dims))
	inner := make([]uint64, len(dims))
	for j := range b.Volume() {
		region.Delinearize(b.Size, j, inner)
		for d := range coord {
			coord[d] = b.Off[d] + inner[d]
		}
		binary.LittleEndian.PutUint32(out[4*j:], uint32(pattern(region.Linearize(dims, coord))))
	}
	return out
}

// regionRole is a client process of the region tests.
//
//	region-writer: opens PDC_E2E_OBJ and writes rows [rank*n/procs,
//	               (rank+1)*n/procs) of its first dim in pieces of 3 rows,
//	               all through one start_all, then waits; prints "ok".
//	region-reader: reads the whole of PDC_E2E_OBJ and checks the pattern;
//	               prints "ok" or "bad WHY".
func regionRole(ctx context.Context, c *client.Client, role string, out io.Writer) error {
	o, err := c.OpenObject(ctx, os.Getenv("PDC_E2E_OBJ"))
	if err != nil {
		return err
	}
	defer o.Close(ctx)
	dims := o.Info().Props.Dims
	switch role {
	case "region-writer":
		rank, _ := strconv.Atoi(os.Getenv("PDC_E2E_RANK"))
		procs, _ := strconv.Atoi(os.Getenv("PDC_E2E_PROCS"))
		lo, hi := uint64(rank)*dims[0]/uint64(procs), uint64(rank+1)*dims[0]/uint64(procs)
		var ts []*client.Transfer
		for r := lo; r < hi; r += 3 {
			b := region.Shape(dims...)
			b.Off[0], b.Size[0] = r, min(3, hi-r)
			buf := PatternOf(dims, b)
			t, err := o.NewTransfer(ctx, buf, client.Write, region.Shape(b.Volume()), b)
			if err != nil {
				return err
			}
			ts = append(ts, t)
		}
		if err := c.StartAll(ctx, ts); err != nil {
			return err
		}
		if err := c.WaitAll(ctx, ts); err != nil {
			return err
		}
		fmt.Fprintln(out, "ok")
	case "region-reader":
		got, err := o.GetData(ctx)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, PatternOf(dims, region.Shape(dims...))) {
			fmt.Fprintln(out, "bad values differ")
		} else {
			fmt.Fprintln(out, "ok")
		}
	}
	return nil
}
