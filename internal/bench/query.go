package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// QueryConfig says what the data query benchmark runs against.
type QueryConfig struct {
	// TmpDir is the cluster's tmpdir.
	TmpDir string
	// Label tells clusters apart (e.g. "2 servers").
	Label string
	// ObjectSize is the bytes of the float32 object queried. Default 256 MiB.
	ObjectSize int64
	// Partitions to measure. Default region static and region dynamic.
	Partitions []client.Partition
	// Rounds per case: the median is reported. Default 3.
	Rounds int
	// Progress, if set, sees each result as soon as it is measured.
	Progress func(Result)
}

func (cfg *QueryConfig) defaults() {
	if cfg.ObjectSize == 0 {
		cfg.ObjectSize = 256 << 20
	}
	if len(cfg.Partitions) == 0 {
		cfg.Partitions = []client.Partition{client.RegionStatic, client.RegionDynamic}
	}
	if cfg.Rounds == 0 {
		cfg.Rounds = 3
	}
}

// queryRow is the elements of one row of the benchmark's 2-D object.
const queryRow = 1024

// Query measures value queries over a 2-D float32 object of uniform
// values in [0, 1), written in 16 MiB regions, per partition strategy: a
// count at 50% and 0.1% selectivity, a selection at 1%, a selection with
// values at 0.1%, and a count over a quarter of the object (Within). Each
// figure is the object's bytes scanned per second, next to the ceiling
// measured in the same round: a plain read of the same bytes through
// Object.Read (which moves them all to the client). Every query's count
// is checked against the client's own evaluation of the data.
func Query(ctx context.Context, cfg QueryConfig) ([]Result, error) {
	cfg.defaults()
	c, err := client.Connect(ctx, client.WithTmpDir(cfg.TmpDir))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ct, _, err := c.CreateContainer(ctx, fmt.Sprintf("bench-query-%d", time.Now().UnixNano()), client.Persistent)
	if err != nil {
		return nil, err
	}
	d := newQueryData(cfg.ObjectSize)
	cases := d.cases()
	label := cfg.Label
	if label != "" {
		label = ", " + label
	}
	var out []Result
	buf := make([]byte, len(d.data))
	for _, p := range cfg.Partitions {
		o, err := d.writeObject(ctx, ct, p, buf)
		if err != nil {
			return nil, err
		}
		for _, qc := range cases {
			res, err := qc.measure(ctx, o, p, cfg.Rounds, buf)
			if err != nil {
				return nil, err
			}
			res.Case += label
			if cfg.Progress != nil {
				cfg.Progress(res)
			}
			out = append(out, res)
		}
		if err := o.Delete(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// queryData is the benchmark's object: rows of queryRow uniform values,
// as bytes to write and as values to count.
type queryData struct {
	rows uint64
	dims []uint64
	data []byte
	vals []float32
}

func newQueryData(size int64) *queryData {
	rows := max(uint64(size)/(4*queryRow), 1)
	d := &queryData{rows: rows, dims: []uint64{rows, queryRow}, data: make([]byte, rows*queryRow*4), vals: make([]float32, rows*queryRow)}
	r := rand.New(rand.NewPCG(7, 11))
	for i := range d.vals {
		d.vals[i] = r.Float32()
		binary.LittleEndian.PutUint32(d.data[4*i:], math.Float32bits(d.vals[i]))
	}
	return d
}

// count is how many values of area pred holds for.
func (d *queryData) count(pred func(float32) bool, area region.Box) uint64 {
	var n uint64
	region.Runs(region.Shape(d.dims...), area, func(run region.Run) bool {
		for _, v := range d.vals[run.Off : run.Off+run.Len] {
			if pred(v) {
				n++
			}
		}
		return true
	})
	return n
}

// queryCase is one query of the benchmark, with the hits it must find.
type queryCase struct {
	name string
	pred client.Pred
	opts []client.DataQueryOption
	area region.Box
	want uint64
}

func (d *queryData) cases() []queryCase {
	whole := region.Shape(d.dims...)
	quarter := region.Box{Off: []uint64{d.rows / 4, 0}, Size: []uint64{max(d.rows/2, 1), queryRow / 2}}
	return []queryCase{
		{"count x>0.5", client.Gt(0.5), nil, whole, d.count(func(v float32) bool { return v > 0.5 }, whole)},
		{"count x>0.999", client.Gt(0.999), nil, whole, d.count(func(v float32) bool { return v > 0.999 }, whole)},
		{"selection x<0.01", client.Lt(0.01), []client.DataQueryOption{client.WithSelection()}, whole, d.count(func(v float32) bool { return v < 0.01 }, whole)},
		{"values 0.2<x<0.201", client.Gt(0.2).And(client.Lt(0.201)), []client.DataQueryOption{client.WithValues()}, whole,
			d.count(func(v float32) bool { return v > 0.2 && v < 0.201 }, whole)},
		{"count within quarter x>0.5", client.Gt(0.5), []client.DataQueryOption{client.Within(quarter)}, quarter,
			d.count(func(v float32) bool { return v > 0.5 }, quarter)},
	}
}

// writeObject creates the object with partition p, writes it in 16 MiB
// regions and warms it up: the read buffer's pages faulted in, the files
// in the page cache, the connections open, for ours and the ceiling
// alike.
func (d *queryData) writeObject(ctx context.Context, ct *client.Container, p client.Partition, buf []byte) (*client.Object, error) {
	name := fmt.Sprintf("q-%s-%d", p, time.Now().UnixNano())
	o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: d.dims, Type: region.Float, Partition: p})
	if err != nil {
		return nil, err
	}
	step := max(uint64(16<<20)/(4*queryRow), 1)
	for row := uint64(0); row < d.rows; row += step {
		n := min(step, d.rows-row)
		b := region.Box{Off: []uint64{row, 0}, Size: []uint64{n, queryRow}}
		if err := o.Write(ctx, b, d.data[row*queryRow*4:(row+n)*queryRow*4]); err != nil {
			return nil, err
		}
	}
	if err := o.Read(ctx, region.Shape(d.dims...), buf); err != nil {
		return nil, err
	}
	if _, err := o.Query(ctx, client.Gt(0.5)); err != nil {
		return nil, err
	}
	return o, nil
}

// measure runs the query rounds times, each next to a plain read of its
// area, checks its hits, and reports the medians (without the label).
func (qc *queryCase) measure(ctx context.Context, o *client.Object, p client.Partition, rounds int, buf []byte) (Result, error) {
	var ours, ceil []time.Duration
	for range rounds {
		t0 := time.Now()
		res, err := o.Query(ctx, qc.pred, qc.opts...)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", qc.name, err)
		}
		ours = append(ours, time.Since(t0))
		if res.Hits != qc.want {
			return Result{}, fmt.Errorf("%s %s: %d hits, the data has %d", p, qc.name, res.Hits, qc.want)
		}
		rb := buf[:qc.area.Volume()*4]
		t0 = time.Now()
		if err := o.Read(ctx, qc.area, rb); err != nil {
			return Result{}, err
		}
		ceil = append(ceil, time.Since(t0))
	}
	bytes := float64(qc.area.Volume() * 4)
	return rate("query", fmt.Sprintf("%s, %s, %d MiB", qc.name, p, int64(bytes)>>20),
		bytes/median(ours).Seconds()/1e6, "MB/s scanned", "plain read", bytes/median(ceil).Seconds()/1e6), nil
}
