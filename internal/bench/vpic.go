package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// VPICVars are the particle variables VPIC-IO writes: positions and
// momenta as float32, two ids as int32.
var VPICVars = []struct {
	Name string
	Type region.Type
}{
	{"x", region.Float}, {"y", region.Float}, {"z", region.Float},
	{"px", region.Float}, {"py", region.Float}, {"pz", region.Float},
	{"id1", region.Int32}, {"id2", region.Int32},
}

// VPICObject names variable v of a run's particle set.
func VPICObject(run string, v int) string { return fmt.Sprintf("vpic-%s-%s", run, VPICVars[v].Name) }

// VPICCreate makes the run's 8 objects for total particles, spread over
// the data servers in blocks.
func VPICCreate(ctx context.Context, ct *client.Container, run string, total uint64, p client.Partition) error {
	specs := make([]client.ObjectSpec, len(VPICVars))
	for v, vr := range VPICVars {
		specs[v] = client.ObjectSpec{Name: VPICObject(run, v), Props: client.ObjectProps{Dims: []uint64{total}, Type: vr.Type, Partition: p}}
	}
	objs, err := ct.CreateObjects(ctx, specs)
	for _, o := range objs {
		if o != nil {
			_ = o.Close(ctx)
		}
	}
	return err
}

// vpicValue is variable v of particle i, as its 4 stored bytes.
func vpicValue(v int, i uint64) uint32 {
	if VPICVars[v].Type == region.Float {
		return math.Float32bits(float32(i%(1<<20))*0.25 + float32(v))
	}
	return uint32(i)*2 + uint32(v-6)
}

// VPICRank is one client process of VPIC-IO (the writer) or BD-CATS (the
// reader): it owns particles [Rank*N, (Rank+1)*N) of every variable.
type VPICRank struct {
	objs []*client.Object
	bufs [][]byte
	box  region.Box
}

// OpenVPICRank opens the run's objects and prepares rank's buffers.
func OpenVPICRank(ctx context.Context, c *client.Client, run string, rank, n uint64) (*VPICRank, error) {
	r := &VPICRank{box: region.Box{Off: []uint64{rank * n}, Size: []uint64{n}}}
	for v := range VPICVars {
		o, err := c.OpenObject(ctx, VPICObject(run, v))
		if err != nil {
			r.Close(ctx)
			return nil, err
		}
		r.objs = append(r.objs, o)
		// Touched now, as an application's arrays are, so that neither
		// phase pays for fresh pages; 0xFF is no value a read may leave.
		buf := make([]byte, 4*n)
		for i := range buf {
			buf[i] = 0xFF
		}
		r.bufs = append(r.bufs, buf)
	}
	return r, nil
}

// Bytes is what one Write or Read moves.
func (r *VPICRank) Bytes() int64 { return int64(len(r.bufs)) * int64(len(r.bufs[0])) }

// Fill makes the rank's particles, as the simulation would, before Write.
func (r *VPICRank) Fill() {
	for v, b := range r.bufs {
		for j := range r.box.Size[0] {
			binary.LittleEndian.PutUint32(b[4*j:], vpicValue(v, r.box.Off[0]+j))
		}
	}
}

// Write writes all 8 variables of the filled buffers through one
// start_all and one wait_all.
func (r *VPICRank) Write(ctx context.Context, c *client.Client) error {
	return r.move(ctx, c, client.Write)
}

// Read reads all 8 variables through one start_all and one wait_all and
// checks every value.
func (r *VPICRank) Read(ctx context.Context, c *client.Client) error {
	if err := r.Fetch(ctx, c); err != nil {
		return err
	}
	return r.Check()
}

// Fetch is Read without the check: what BD-CATS times.
func (r *VPICRank) Fetch(ctx context.Context, c *client.Client) error {
	return r.move(ctx, c, client.Read)
}

// Check checks every value Fetch read.
func (r *VPICRank) Check() error {
	for v, b := range r.bufs {
		for j := range r.box.Size[0] {
			i := r.box.Off[0] + j
			if got, want := binary.LittleEndian.Uint32(b[4*j:]), vpicValue(v, i); got != want {
				return fmt.Errorf("object %q particle %d: read %#x, wrote %#x", r.objs[v].Name(), i, got, want)
			}
		}
	}
	return nil
}

func (r *VPICRank) move(ctx context.Context, c *client.Client, a client.Access) error {
	ts := make([]*client.Transfer, len(r.objs))
	for v, o := range r.objs {
		t, err := o.NewTransfer(ctx, r.bufs[v], a, region.Box{Off: []uint64{0}, Size: r.box.Size}, r.box)
		if err != nil {
			return err
		}
		ts[v] = t
	}
	if err := c.StartAll(ctx, ts); err != nil {
		return err
	}
	return c.WaitAll(ctx, ts)
}

// VPICCeiling names vpic's ceiling: the same bytes over raw TCP, moved
// by as many client processes, started and timed the same way.
const VPICCeiling = "raw tcp, same bytes, same processes"

// VPICRate reports a phase that moved bytes in d next to the raw ceiling
// (GB/s).
func VPICRate(bench, what string, bytes int64, d time.Duration, raw float64) Result {
	return rate(bench, what, float64(bytes)/d.Seconds()/1e9, "GB/s", VPICCeiling, raw)
}

// RawFetcher is one connection to a SourceServer: the raw ceiling of one
// client process of VPIC-IO or BD-CATS.
type RawFetcher struct{ nc net.Conn }

// DialRawFetcher connects to the SourceServer at addr (host:port).
func DialRawFetcher(ctx context.Context, addr string) (*RawFetcher, error) {
	nc, err := dialRaw(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &RawFetcher{nc: nc}, nil
}

// Fetch fills buf from the source.
func (f *RawFetcher) Fetch(ctx context.Context, buf []byte) error { return rawFetch(ctx, f.nc, buf) }

// Close closes the connection.
func (f *RawFetcher) Close() error { return f.nc.Close() }

// VPICDelete deletes the run's 8 objects: a step's are deleted once it is
// measured, so that rounds of steps do not fill the servers.
func VPICDelete(ctx context.Context, c *client.Client, run string) error {
	var first error
	for v := range VPICVars {
		o, err := c.OpenObject(ctx, VPICObject(run, v))
		if err == nil {
			err = o.Delete(ctx)
		}
		if err != nil && first == nil {
			first = fmt.Errorf("delete %s: %w", VPICObject(run, v), err)
		}
	}
	return first
}

// Close closes the objects, which flushes what was written.
func (r *VPICRank) Close(ctx context.Context) error {
	var first error
	for _, o := range r.objs {
		if err := o.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}
