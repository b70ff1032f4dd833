package region_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// propModel is an int32 object of changing dims; known says which cells
// the promise fixes (a cell dropped by a shrink and back after a grow
// may read as zero or as what it held).
type propModel struct {
	dims  []uint64
	ever  []uint64 // the largest extent of every dim so far
	vals  []int32
	known []bool
}

func newPropModel(dims []uint64) *propModel {
	n := region.Shape(dims...).Volume()
	m := &propModel{dims: slices.Clone(dims), ever: slices.Clone(dims), vals: make([]int32, n), known: make([]bool, n)}
	for i := range m.known {
		m.known[i] = true
	}
	return m
}

func (m *propModel) write(box region.Box, v []int32) {
	co := make([]uint64, len(m.dims))
	in := make([]uint64, len(m.dims))
	for j := range box.Volume() {
		region.Delinearize(box.Size, j, in)
		for d := range co {
			co[d] = box.Off[d] + in[d]
		}
		i := region.Linearize(m.dims, co)
		m.vals[i], m.known[i] = v[j], true
	}
}

func (m *propModel) setDims(dims []uint64) {
	n := region.Shape(dims...).Volume()
	vals, known := make([]int32, n), make([]bool, n)
	co := make([]uint64, len(dims))
	for i := range n {
		region.Delinearize(dims, i, co)
		inOld, inEver := true, true
		for d := range co {
			inOld = inOld && co[d] < m.dims[d]
			inEver = inEver && co[d] < m.ever[d]
		}
		switch {
		case inOld:
			j := region.Linearize(m.dims, co)
			vals[i], known[i] = m.vals[j], m.known[j]
		case inEver:
			known[i] = false
		default:
			known[i] = true
		}
	}
	for d := range dims {
		m.ever[d] = max(m.ever[d], dims[d])
	}
	m.dims, m.vals, m.known = slices.Clone(dims), vals, known
}

// check compares got, box's cells, with the model.
func (m *propModel) check(box region.Box, got []byte) string {
	co := make([]uint64, len(m.dims))
	in := make([]uint64, len(m.dims))
	bad := 0
	first := ""
	for j := range box.Volume() {
		region.Delinearize(box.Size, j, in)
		for d := range co {
			co[d] = box.Off[d] + in[d]
		}
		i := region.Linearize(m.dims, co)
		g := int32(binary.LittleEndian.Uint32(got[4*j:]))
		if m.known[i] && g != m.vals[i] {
			if bad == 0 {
				first = fmt.Sprintf("cell %v: got %d, want %d", co, g, m.vals[i])
			}
			bad++
		}
	}
	if bad > 0 {
		return fmt.Sprintf("%d cells differ, first %s", bad, first)
	}
	return ""
}

func (m *propModel) allKnown() bool { return !slices.Contains(m.known, false) }

func randPropBox(r *rand.Rand, dims []uint64) region.Box {
	b := region.Shape(slices.Clone(dims)...)
	for d := range dims {
		lo := r.Uint64N(dims[d])
		hi := lo + 1 + r.Uint64N(dims[d]-lo)
		b.Off[d], b.Size[d] = lo, hi-lo
	}
	return b
}

func propSeed(t *testing.T) uint64 {
	if s := os.Getenv("PDC_PROP_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Seed 33 found a client's earlier write, refused as stale, stored
	// over its later one (region-dynamic, by offset, 1-D, step 29).
	return 33
}

// TestRegionPropertyEveryPartition writes random boxes, overwrites them
// with boxes of other shapes from two clients (started and waited later,
// or written at once), grows, shrinks and relays out the dims, and checks
// reads and value queries against a model, in every strategy and mode,
// 1-D to 3-D. PDC_PROP_SEED and PDC_PROP_STEPS choose another run.
func TestRegionPropertyEveryPartition(t *testing.T) {
	tmpdir := e2e.Up(t, 3)
	ctx := e2e.Ctx(t, 8*time.Minute)
	a, b := e2e.Connect(t, tmpdir), e2e.Connect(t, tmpdir)
	ct, _, err := a.CreateContainer(ctx, "prop", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	seed := propSeed(t)
	steps := 60
	if s := os.Getenv("PDC_PROP_STEPS"); s != "" {
		steps, _ = strconv.Atoi(s)
	}
	for _, p := range clitest.Partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			for nd := 1; nd <= 3; nd++ {
				name := fmt.Sprintf("%s-%s-%dd", clitest.PartName(p), st, nd)
				t.Run(name, func(t *testing.T) {
					r := rand.New(rand.NewPCG(seed, uint64(p)*100+uint64(st)*10+uint64(nd)))
					runProp(ctx, t, r, ct, b, name, p, st, nd, steps)
				})
			}
		}
	}
}

func randDims(r *rand.Rand, nd int) []uint64 {
	dims := make([]uint64, nd)
	for d := range dims {
		dims[d] = 2 + r.Uint64N([]uint64{0, 200, 24, 9}[nd])
	}
	return dims
}

func runProp(ctx context.Context, t *testing.T, r *rand.Rand, ct *client.Container, other *client.Client, name string, p client.Partition, st client.Storage, nd, steps int) {
	dims := randDims(r, nd)
	oa, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: p, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := other.OpenObject(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	m := newPropModel(dims)
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		for _, l := range log {
			t.Log(l)
		}
		t.Fatalf(format, args...)
	}
	pending := map[*client.Object][]*client.Transfer{}
	waitFor := func(o *client.Object) {
		t.Helper()
		for _, tr := range pending[o] {
			if err := tr.Wait(ctx); err != nil {
				fail("wait: %v", err)
			}
		}
		pending[o] = nil
	}
	// pick chooses the client of the next step, after the writes the
	// other started are waited for (only waited writes are visible to
	// another client).
	pick := func() *client.Object {
		o, x := oa, ob
		if r.IntN(2) == 0 {
			o, x = ob, oa
		}
		waitFor(x)
		if r.IntN(8) == 0 {
			waitFor(o)
		}
		return o
	}
	for step := range steps {
		switch k := r.IntN(20); {
		case k < 9: // write
			o := pick()
			async := r.IntN(2) == 0
			box := randPropBox(r, m.dims)
			v := make([]int32, box.Volume())
			buf := make([]byte, 4*len(v))
			for i := range v {
				v[i] = int32(r.IntN(11) - 5)
				binary.LittleEndian.PutUint32(buf[4*i:], uint32(v[i]))
			}
			if async {
				log = append(log, fmt.Sprintf("%d: start write %v by %p", step, box, o))
				tr, err := o.StartWrite(ctx, box, buf)
				if err != nil {
					fail("step %d: start write %v: %v", step, box, err)
				}
				pending[o] = append(pending[o], tr)
			} else {
				log = append(log, fmt.Sprintf("%d: write %v by %p", step, box, o))
				if err := o.Write(ctx, box, buf); err != nil {
					fail("step %d: write %v: %v", step, box, err)
				}
			}
			m.write(box, v)
		case k < 15: // read
			o := pick()
			box := randPropBox(r, m.dims)
			if r.IntN(4) == 0 {
				box = region.Shape(slices.Clone(m.dims)...)
			}
			got := make([]byte, 4*box.Volume())
			log = append(log, fmt.Sprintf("%d: read %v by %p", step, box, o))
			if err := o.Read(ctx, box, got); err != nil {
				fail("step %d: read %v: %v", step, box, err)
			}
			if why := m.check(box, got); why != "" {
				fail("step %d: read %v (dims %v): %s", step, box, m.dims, why)
			}
		case k < 18: // query
			if !m.allKnown() {
				continue
			}
			o := pick()
			// A query covers the dims of the client's last look: look
			// again, so that it covers the model's.
			if _, err := o.Refresh(ctx); err != nil {
				fail("refresh: %v", err)
			}
			v := int32(r.IntN(11) - 5)
			var opts []client.DataQueryOption
			area := region.Shape(slices.Clone(m.dims)...)
			if r.IntN(2) == 0 {
				area = randPropBox(r, m.dims)
				opts = append(opts, client.Within(area))
			}
			var pred client.Pred
			var match func(int32) bool
			switch r.IntN(3) {
			case 0:
				pred, match = client.Eq(v), func(x int32) bool { return x == v }
			case 1:
				pred, match = client.Gt(v), func(x int32) bool { return x > v }
			default:
				pred, match = client.Lt(v), func(x int32) bool { return x < v }
			}
			var want []uint64
			region.Runs(region.Shape(slices.Clone(m.dims)...), area, func(run region.Run) bool {
				for i := run.Off; i < run.Off+run.Len; i++ {
					if match(m.vals[i]) {
						want = append(want, i)
					}
				}
				return true
			})
			log = append(log, fmt.Sprintf("%d: query %v within %v by %p", step, pred, area, o))
			res, err := o.Query(ctx, pred, append(opts, client.WithValues())...)
			if err != nil {
				fail("step %d: query %v: %v", step, pred, err)
			}
			if res.Hits != uint64(len(want)) || !slices.Equal(res.Selection, want) && len(want) > 0 {
				fail("step %d: query %v within %v (dims %v): %d hits %v, want %d %v", step, pred, area, m.dims, res.Hits, res.Selection, len(want), want)
			}
			for i, idx := range want {
				if int32(binary.LittleEndian.Uint32(res.Values[4*i:])) != m.vals[idx] {
					fail("step %d: query value %d differs", step, i)
				}
			}
		default: // dims change
			o := pick()
			nd := slices.Clone(m.dims)
			d := r.IntN(len(nd))
			switch r.IntN(3) {
			case 0:
				nd[d] += 1 + r.Uint64N(nd[d])
			case 1:
				nd[d] = 1 + r.Uint64N(nd[d])
			default:
				nd[d] = 1 + r.Uint64N(2*nd[d])
			}
			waitFor(o)
			log = append(log, fmt.Sprintf("%d: set dims %v -> %v by %p", step, m.dims, nd, o))
			if err := o.SetDims(ctx, nd); err != nil {
				fail("step %d: set dims %v: %v", step, nd, err)
			}
			m.setDims(nd)
			if !m.allKnown() {
				// Fill what a shrink made uncertain, so that queries
				// keep running.
				whole := region.Shape(slices.Clone(m.dims)...)
				v := make([]int32, whole.Volume())
				buf := make([]byte, 4*len(v))
				for i := range v {
					if m.known[i] {
						v[i] = m.vals[i]
					} else {
						v[i] = int32(r.IntN(11) - 5)
					}
					binary.LittleEndian.PutUint32(buf[4*i:], uint32(v[i]))
				}
				log = append(log, fmt.Sprintf("%d: write whole %v by %p", step, whole, o))
				if err := o.Write(ctx, whole, buf); err != nil {
					fail("step %d: write whole: %v", step, err)
				}
				m.write(whole, v)
			}
		}
	}
	waitFor(oa)
	waitFor(ob)
	all := region.Shape(slices.Clone(m.dims)...)
	got := make([]byte, 4*all.Volume())
	if err := ob.Read(ctx, all, got); err != nil {
		fail("final read: %v", err)
	}
	if why := m.check(all, got); why != "" {
		fail("final read: %s", why)
	}
}
