package regionstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A run of calls on one 2-D object of 4-byte elements whose dims change
// every few calls, as the metadata server orders them: each change has
// a version one newer; one that shrinks the first dim or changes the
// second is pushed as a cut (Store.Cut), which a write carrying its dims
// may come before (a data server the push has not reached yet). The
// tests below stop the run at each of the file system operations it
// makes (a crash, a fault, a full disk), finish what the metadata server
// would (it pushes a cut again until one push is acknowledged), regrow
// the object at the next version and check every element against the
// model: its value if written, zeros if never written or dropped by a
// change of dims since.

// runOp is one call of a run.
type runOp struct {
	cut  bool // a cut; else a write, or a read if data is nil
	ver  uint64
	dims []uint64
	box  region.Box
	data []byte
}

func cutRun(seed uint64) []runOp {
	r := rand.New(rand.NewPCG(seed, 77))
	var ops []runOp
	dims := []uint64{20, 30}
	ver := uint64(1)
	call := func(dims []uint64, read bool) {
		box := randBoxIn(r, dims)
		o := runOp{ver: ver, dims: dims, box: box}
		if !read {
			o.data = randData(r, int(box.Volume())*4)
		}
		ops = append(ops, o)
	}
	for i := range 30 {
		if i%4 != 3 {
			call(dims, r.IntN(4) == 0)
			continue
		}
		next := []uint64{1 + r.Uint64N(24), 1 + r.Uint64N(36)}
		ver++
		if next[0] < dims[0] || next[1] != dims[1] {
			if r.IntN(2) == 0 {
				call(next, false)
			}
			ops = append(ops, runOp{cut: true, ver: ver, dims: next})
		}
		dims = next
	}
	return ops
}

// runSeeds is how many runs a test takes: n, or one under the race
// detector.
func runSeeds(n uint64) uint64 {
	if raceEnabled {
		return 1
	}
	return n
}

func (o runOp) apply(s *Store, mode Mode) error {
	l := Layout{Dims: o.dims, Elem: 4, Mode: mode, Version: o.ver}
	switch {
	case o.cut:
		return s.Cut(7, o.dims, o.ver)
	case o.data != nil:
		return s.Write(7, l, o.box, o.data)
	}
	return s.Read(7, l, o.box, make([]byte, int(o.box.Volume())*4))
}

// cutModel is what the object must hold: elements by coordinates, and
// those a write cut short may have left old or new.
type cutModel struct {
	dims    []uint64
	val     map[[2]uint64][4]byte
	unknown map[[2]uint64]bool
}

func newCutModel() *cutModel {
	return &cutModel{dims: []uint64{20, 30}, val: map[[2]uint64][4]byte{}, unknown: map[[2]uint64]bool{}}
}

func (m *cutModel) clone() *cutModel {
	n := &cutModel{dims: slices.Clone(m.dims), val: map[[2]uint64][4]byte{}, unknown: map[[2]uint64]bool{}}
	for k, v := range m.val {
		n.val[k] = v
	}
	for k := range m.unknown {
		n.unknown[k] = true
	}
	return n
}

func (m *cutModel) setDims(dims []uint64) {
	for k := range m.val {
		if k[0] >= dims[0] || k[1] >= dims[1] {
			delete(m.val, k)
		}
	}
	for k := range m.unknown {
		if k[0] >= dims[0] || k[1] >= dims[1] {
			delete(m.unknown, k)
		}
	}
	m.dims = slices.Clone(dims)
}

// apply takes o's dims and, for a write, its bytes: known if it
// returned, else unknown.
func (m *cutModel) apply(o runOp, done bool) {
	m.setDims(o.dims)
	if o.data == nil {
		return
	}
	k := 0
	for i := o.box.Off[0]; i < o.box.End(0); i++ {
		for j := o.box.Off[1]; j < o.box.End(1); j++ {
			at := [2]uint64{i, j}
			if done {
				m.val[at] = [4]byte(o.data[4*k:])
				delete(m.unknown, at)
			} else {
				m.unknown[at] = true
			}
			k++
		}
	}
}

// checkRegrown regrows the object's first dim at version ver and checks
// every element.
func (m *cutModel) checkRegrown(t *testing.T, s *Store, mode Mode, ver uint64, when string) {
	t.Helper()
	dims := []uint64{30, m.dims[1]}
	got := make([]byte, dims[0]*dims[1]*4)
	if err := s.Read(7, Layout{Dims: dims, Elem: 4, Mode: mode, Version: ver}, region.Shape(dims...), got); err != nil {
		t.Fatalf("%s: read after a regrow to %v: %v", when, dims, err)
	}
	m.setDims(dims)
	for i := range dims[0] {
		for j := range dims[1] {
			at := [2]uint64{i, j}
			want := m.val[at]
			if g := got[4*(i*dims[1]+j):][:4]; !m.unknown[at] && string(g) != string(want[:]) {
				t.Fatalf("%s: after a regrow to %v, element %v reads %v, want %v", when, dims, at, g, want)
			}
		}
	}
}

func TestCutRunCrashes(t *testing.T) {
	old := checkpointEvery
	checkpointEvery = 1 << 10 // checkpoints all along the run
	t.Cleanup(func() { checkpointEvery = old })
	for _, mode := range []Mode{ByOffset, ByRegion} {
		for _, sync := range []bool{false, true} {
			for seed := range runSeeds(3) {
				ops := cutRun(seed)
				mem := vfs.NewMem()
				fsys := vfs.NewFaulty(mem)
				s, err := Open(Options{Dir: faultDir, FS: fsys, Sync: sync})
				if err != nil {
					t.Fatal(err)
				}
				type point struct {
					fs *vfs.MemFS
					m  *cutModel
					op int // the call under way
					at string
				}
				var points []point
				m, cur := newCutModel(), 0
				fsys.OnOp(func(op vfs.Op, path string) {
					c := mem.Clone()
					if sync {
						c = mem.CrashClone() // a power loss: what was fsynced
					}
					points = append(points, point{c, m.clone(), cur, op.String() + " " + path})
				})
				for i, o := range ops {
					cur = i
					if err := o.apply(s, mode); err != nil {
						t.Fatal(err)
					}
					m.apply(o, true)
				}
				fsys.OnOp(nil)
				_ = s.Close()
				for _, p := range points {
					when := fmt.Sprintf("%s sync=%v seed %d: a crash before %s in call %d", mode, sync, seed, p.at, p.op)
					s, err := Open(Options{Dir: faultDir, FS: p.fs, Sync: sync})
					if err != nil {
						t.Fatalf("%s: %v", when, err)
					}
					o := ops[p.op]
					p.m.apply(o, o.cut)
					// The cut under way, or one the write under way came
					// before, is pushed again.
					if next := p.op + 1; !o.cut && next < len(ops) && ops[next].cut && ops[next].ver == o.ver {
						o = ops[next]
					}
					if o.cut {
						if err := o.apply(s, mode); err != nil {
							t.Fatalf("%s: the cut pushed again: %v", when, err)
						}
					}
					p.m.checkRegrown(t, s, mode, ops[len(ops)-1].ver+1, when)
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
}

// faultRun runs ops on a store in a Faulty whose fault arm sets up
// (before the first call), a cut that fails pushed again once disarm
// lifted it, and checks the regrown object after a reopen. It reports
// whether a fault was met.
func faultRun(t *testing.T, mode Mode, ops []runOp, when string, arm func(*vfs.Faulty), disarm func(*vfs.Faulty)) bool {
	t.Helper()
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s, err := Open(Options{Dir: faultDir, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	arm(fsys)
	m := newCutModel()
	for i, o := range ops {
		err := o.apply(s, mode)
		if err != nil && o.cut {
			disarm(fsys)
			if err := o.apply(s, mode); err != nil {
				t.Fatalf("%s: call %d, a cut that failed (%v) pushed again: %v", when, i, err, err)
			}
		}
		m.apply(o, err == nil || o.cut)
	}
	met := len(fsys.Injected()) > 0
	fsys.Clear()
	_ = s.Close() // a flush may find what the faults left
	s, err = Open(Options{Dir: faultDir, FS: mem})
	if err != nil {
		t.Fatalf("%s: reopen: %v", when, err)
	}
	m.checkRegrown(t, s, mode, ops[len(ops)-1].ver+1, when)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return met
}

// An I/O error (EIO, a write cut short) at any one operation of a run.
func TestCutRunFaults(t *testing.T) {
	old := checkpointEvery
	checkpointEvery = 1 << 10
	t.Cleanup(func() { checkpointEvery = old })
	for _, mode := range []Mode{ByOffset, ByRegion} {
		for seed := range runSeeds(2) {
			ops := cutRun(seed)
			for k := 0; ; k++ {
				when := fmt.Sprintf("%s seed %d: EIO at operation %d", mode, seed, k)
				met := faultRun(t, mode, ops, when, func(f *vfs.Faulty) {
					f.Inject(vfs.Rule{Ops: vfs.OpAll, After: k, Count: 1, Err: syscall.EIO, Short: true})
				}, func(*vfs.Faulty) {})
				if !met {
					break
				}
			}
		}
	}
}

// A disk that fills up part way through a run, and is given room again
// for a cut that failed (the metadata server pushes it until it is
// applied).
func TestCutRunFullDisk(t *testing.T) {
	old := checkpointEvery
	checkpointEvery = 1 << 10
	t.Cleanup(func() { checkpointEvery = old })
	for _, mode := range []Mode{ByOffset, ByRegion} {
		for seed := range runSeeds(2) {
			ops := cutRun(seed)
			for k := range 60 {
				free := k*53000 + k%7*1000
				when := fmt.Sprintf("%s seed %d: %d bytes free", mode, seed, free)
				faultRun(t, mode, ops, when, func(f *vfs.Faulty) {
					f.SetSpace(int64(free))
				}, func(f *vfs.Faulty) { f.SetSpace(-1) })
			}
		}
	}
}
