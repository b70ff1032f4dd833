package regionstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/pdcgo/pdc/region"
)

// model is the naive store: every cell of every object, by coordinates.
type model struct {
	elem  map[uint64]int
	mode  map[uint64]Mode
	cells map[uint64]map[string][]byte
}

func newModel() *model {
	return &model{elem: map[uint64]int{}, mode: map[uint64]Mode{}, cells: map[uint64]map[string][]byte{}}
}

func cellKey(c []uint64) string { return fmt.Sprint(c) }

func (m *model) write(obj uint64, box region.Box, elem int, data []byte) {
	if m.cells[obj] == nil {
		m.cells[obj] = map[string][]byte{}
	}
	i := 0
	forCells(box, func(c []uint64) {
		m.cells[obj][cellKey(c)] = slices.Clone(data[i : i+elem])
		i += elem
	})
}

func (m *model) read(obj uint64, box region.Box, elem int) []byte {
	out := make([]byte, 0, int(box.Volume())*elem)
	forCells(box, func(c []uint64) {
		if v, ok := m.cells[obj][cellKey(c)]; ok {
			out = append(out, v...)
		} else {
			out = append(out, make([]byte, elem)...)
		}
	})
	return out
}

// setDims drops the cells outside dims, as a store does.
func (m *model) setDims(obj uint64, dims []uint64) {
	for k := range m.cells[obj] {
		if !holds(region.Shape(dims...), parseKey(k)) {
			delete(m.cells[obj], k)
		}
	}
}

func parseKey(k string) []uint64 {
	var c []uint64
	var v uint64
	in := false
	for _, r := range k {
		if r >= '0' && r <= '9' {
			v = v*10 + uint64(r-'0')
			in = true
		} else if in {
			c = append(c, v)
			v, in = 0, false
		}
	}
	return c
}

func randData(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(255) + 1) // never zero, so a lost write shows
	}
	return b
}

func openStore(t testing.TB, dir string, sync bool) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, Sync: sync})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// crash drops a store as kill -9 would: nothing flushed, no checkpoint,
// descriptors closed. What the store wrote is in the kernel already.
func crash(s *Store) {
	s.closed.Store(true)
	_ = s.files.closeAll()
}

// TestStoreAgainstModel runs random writes, reads, dims changes, flushes,
// reopens and crashes against the naive model, in both modes, with the
// real block size and with a tiny one that makes every object span many
// blocks.
func TestStoreAgainstModel(t *testing.T) {
	for _, bs := range []int64{maxBlockSize, 64} {
		for _, mode := range []Mode{ByOffset, ByRegion} {
			for ndim := 1; ndim <= 3; ndim++ {
				t.Run(fmt.Sprintf("block%d/%s/%dd", bs, mode, ndim), func(t *testing.T) {
					defer func(old int64) { blockSize = old }(blockSize)
					blockSize = bs
					for seed := range uint64(3) {
						runModel(t, mode, ndim, seed, 300)
					}
				})
			}
		}
	}
}

// modelRun is one random sequence of runModel: the store under test, the
// model it must agree with, and the last few operations for failures.
type modelRun struct {
	t    *testing.T
	r    *rand.Rand
	seed uint64
	mode Mode
	ndim int
	dir  string
	s    *Store
	m    *model
	dims map[uint64][]uint64
	log  []string
}

const modelObjects = 3

func runModel(t *testing.T, mode Mode, ndim int, seed uint64, ops int) {
	r := rand.New(rand.NewPCG(seed, uint64(ndim)*10+uint64(mode)))
	dir := t.TempDir()
	mr := &modelRun{t: t, r: r, seed: seed, mode: mode, ndim: ndim, dir: dir, m: newModel(), dims: map[uint64][]uint64{}}
	mr.s = openStore(t, dir, r.IntN(4) == 0)
	defer func() { _ = mr.s.Close() }()
	for obj := uint64(1); obj <= modelObjects; obj++ {
		d := make([]uint64, ndim)
		for i := range d {
			d[i] = 1 + r.Uint64N(7)
		}
		if ndim == 1 {
			d[0] *= 40
		}
		mr.dims[obj] = d
		mr.m.elem[obj] = 1 + r.IntN(5)
	}
	for range ops {
		mr.step()
		if len(mr.log) > 12 {
			mr.log = mr.log[1:]
		}
	}
	mr.checkAfterCrash()
}

// randIn draws a box inside dims d.
func (mr *modelRun) randIn(d []uint64) region.Box {
	b := region.Box{Off: make([]uint64, len(d)), Size: make([]uint64, len(d))}
	for i := range d {
		b.Off[i] = mr.r.Uint64N(d[i])
		b.Size[i] = 1 + mr.r.Uint64N(d[i]-b.Off[i])
	}
	return b
}

func (mr *modelRun) fail(format string, args ...any) {
	mr.t.Helper()
	mr.t.Fatalf("seed %d after %v: "+format, append([]any{mr.seed, mr.log}, args...)...)
}

// step draws one operation on a random object and checks it against the
// model.
func (mr *modelRun) step() {
	r := mr.r
	obj := 1 + r.Uint64N(modelObjects)
	l := Layout{Dims: mr.dims[obj], Elem: mr.m.elem[obj], Mode: mr.mode}
	switch op := r.IntN(20); {
	case op < 8:
		mr.checkWrite(obj, l)
	case op < 15:
		mr.checkRead(obj, l)
	case op < 17:
		mr.checkSetDims(obj, l)
	case op == 17:
		mr.log = append(mr.log, fmt.Sprintf("flush %d", obj))
		if err := mr.s.Flush(obj); err != nil {
			mr.fail("flush: %v", err)
		}
	case op == 18:
		mr.log = append(mr.log, "reopen")
		if err := mr.s.Close(); err != nil {
			mr.fail("close: %v", err)
		}
		mr.s = openStore(mr.t, mr.dir, r.IntN(4) == 0)
	default:
		mr.log = append(mr.log, "crash")
		crash(mr.s)
		mr.s = openStore(mr.t, mr.dir, false)
	}
}

// checkWrite writes a random box, from a buffer, a stream in odd pieces
// or a stream that breaks part way, and records it in the model.
func (mr *modelRun) checkWrite(obj uint64, l Layout) {
	r, s := mr.r, mr.s
	box := mr.randIn(l.Dims)
	data := randData(r, int(box.Volume())*l.Elem)
	mr.log = append(mr.log, fmt.Sprintf("write %d %v %v", obj, l.Dims, box))
	switch r.IntN(4) {
	case 0:
		// From a stream in odd pieces, through a buffer of a few
		// blocks, which cuts blocks and runs between bufferfuls.
		src := io.Reader(bytes.NewReader(data))
		if r.IntN(2) == 0 {
			src = iotest.HalfReader(src)
		} else {
			src = iotest.OneByteReader(src)
		}
		left := &countReader{r: src}
		if err := s.WriteFrom(obj, l, box, left, make([]byte, int(blockSize)*(1+r.IntN(4))+r.IntN(int(blockSize)))); err != nil {
			mr.fail("write from a stream: %v", err)
		}
		if left.n != len(data) {
			mr.fail("write from a stream read %d bytes of %d", left.n, len(data))
		}
	case 1:
		// A stream that breaks part way: the write fails, and
		// what it stored reads back without a checksum error;
		// then the whole write again.
		cut := r.IntN(len(data))
		broken := io.MultiReader(bytes.NewReader(data[:cut]), iotest.ErrReader(errBroken))
		if err := s.WriteFrom(obj, l, box, broken, make([]byte, blockSize)); !errors.Is(err, errBroken) {
			mr.fail("write from a stream broken after %d of %d bytes: %v, want errBroken", cut, len(data), err)
		}
		if err := s.Read(obj, l, box, make([]byte, len(data))); err != nil {
			mr.fail("read after a broken write: %v", err)
		}
		if err := s.Write(obj, l, box, data); err != nil {
			mr.fail("write: %v", err)
		}
	default:
		if err := s.Write(obj, l, box, data); err != nil {
			mr.fail("write: %v", err)
		}
	}
	mr.m.write(obj, box, l.Elem, data)
}

// checkRead reads a random box, or the whole object, and compares it with
// the model.
func (mr *modelRun) checkRead(obj uint64, l Layout) {
	box := mr.randIn(l.Dims)
	if mr.r.IntN(3) == 0 {
		box = region.Shape(l.Dims...)
	}
	mr.log = append(mr.log, fmt.Sprintf("read %d %v %v", obj, l.Dims, box))
	got := make([]byte, int(box.Volume())*l.Elem)
	if err := mr.s.Read(obj, l, box, got); err != nil {
		mr.fail("read: %v", err)
	}
	if want := mr.m.read(obj, box, l.Elem); !bytes.Equal(got, want) {
		mr.fail("read object %d %v:\n got %v\nwant %v", obj, box, got, want)
	}
}

// checkSetDims changes one dimension of the object, as set_dims would, and
// checks the store takes reads under the new dims.
func (mr *modelRun) checkSetDims(obj uint64, l Layout) {
	r := mr.r
	d := slices.Clone(l.Dims)
	i := 0
	if mr.ndim > 1 && r.IntN(2) == 0 {
		i = 1 + r.IntN(mr.ndim-1)
	}
	d[i] = 1 + r.Uint64N(2*d[i]+2)
	mr.dims[obj] = d
	mr.m.setDims(obj, d)
	mr.log = append(mr.log, fmt.Sprintf("dims %d %v", obj, d))
	// The store learns dims from calls: a shrink it never sees
	// cannot drop data. Show it this one, as the next transfer
	// after a set_dims would.
	l.Dims = d
	if err := mr.s.Read(obj, l, mr.randIn(d), nil); err == nil {
		mr.fail("read into a nil buffer succeeded")
	}
	one := region.Shape(slices.Repeat([]uint64{1}, mr.ndim)...)
	if err := mr.s.Read(obj, l, one, make([]byte, l.Elem)); err != nil {
		mr.fail("read after dims: %v", err)
	}
}

// checkAfterCrash reads everything, once more, after a crash.
func (mr *modelRun) checkAfterCrash() {
	crash(mr.s)
	mr.s = openStore(mr.t, mr.dir, false)
	for obj := uint64(1); obj <= modelObjects; obj++ {
		l := Layout{Dims: mr.dims[obj], Elem: mr.m.elem[obj], Mode: mr.mode}
		box := region.Shape(l.Dims...)
		got := make([]byte, int(box.Volume())*l.Elem)
		if err := mr.s.Read(obj, l, box, got); err != nil {
			mr.fail("final read: %v", err)
		}
		if want := mr.m.read(obj, box, l.Elem); !bytes.Equal(got, want) {
			mr.fail("final read object %d %v:\n got %v\nwant %v", obj, box, got, want)
		}
	}
}

var errBroken = errors.New("stream broken")

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
