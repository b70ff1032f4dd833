package regionstore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

const faultDir = "/data/data-0"

// fmodel is what a store must hold: the bytes of one 2-D object of 4-byte
// elements, with those a failed (or, at a crash, unfinished) write may
// have left old or new marked unknown.
type fmodel struct {
	dims  []uint64
	data  []byte
	known []bool
}

func newFModel(dims []uint64) *fmodel {
	n := dims[0] * dims[1] * 4
	m := &fmodel{dims: slices.Clone(dims), data: make([]byte, n), known: make([]bool, n)}
	for i := range m.known {
		m.known[i] = true
	}
	return m
}

func (m *fmodel) clone() *fmodel {
	return &fmodel{dims: slices.Clone(m.dims), data: slices.Clone(m.data), known: slices.Clone(m.known)}
}

// apply writes data to box; with ok false (the write failed) its bytes
// become unknown instead.
func (m *fmodel) apply(box region.Box, data []byte, ok bool) {
	row := m.dims[1] * 4
	i := 0
	for r := box.Off[0]; r < box.Off[0]+box.Size[0]; r++ {
		start := r*row + box.Off[1]*4
		n := box.Size[1] * 4
		if ok {
			copy(m.data[start:start+n], data[i:i+int(n)])
		}
		for k := start; k < start+n; k++ {
			m.known[k] = m.known[k] && ok
		}
		i += int(n)
	}
}

// grow makes the dims at least dims (each dim only grows): the new
// elements are zeros.
func (m *fmodel) grow(dims []uint64) {
	if dims[0] <= m.dims[0] && dims[1] <= m.dims[1] {
		return
	}
	nd := []uint64{max(dims[0], m.dims[0]), max(dims[1], m.dims[1])}
	data := make([]byte, nd[0]*nd[1]*4)
	known := make([]bool, len(data))
	for i := range known {
		known[i] = true
	}
	for r := range m.dims[0] {
		old, now := r*m.dims[1]*4, r*nd[1]*4
		copy(data[now:now+m.dims[1]*4], m.data[old:old+m.dims[1]*4])
		copy(known[now:now+m.dims[1]*4], m.known[old:old+m.dims[1]*4])
	}
	m.dims, m.data, m.known = nd, data, known
}

// check fails unless got matches every known byte, or, for bytes of the
// pending write's box, its data.
func (m *fmodel) check(t *testing.T, got []byte, pending *fwrite, when string) {
	t.Helper()
	if bytes.Equal(got, m.data) {
		return
	}
	var alt *fmodel
	if pending != nil {
		alt = m.clone()
		alt.apply(pending.box, pending.data, true)
	}
	for i := range m.data {
		if !m.known[i] || got[i] == m.data[i] || (alt != nil && alt.known[i] && got[i] == alt.data[i]) {
			continue
		}
		t.Fatalf("%s: byte %d (row %d) is %#x, want %#x (acknowledged)", when, i, uint64(i)/(m.dims[1]*4), got[i], m.data[i])
	}
}

type fwrite struct {
	box  region.Box
	data []byte
	dims []uint64
}

// faultWorkload is the writes of a fault or crash run: random boxes over
// an object of 48x64 elements (three blocks) whose rows grow to 80
// elements halfway (a relayout by offset).
func faultWorkload(seed uint64, wholeRows bool) []fwrite {
	r := rand.New(rand.NewPCG(seed, 25))
	dims := []uint64{48, 64}
	var ws []fwrite
	for i := range 40 {
		if i == 20 {
			dims = []uint64{48, 80}
		}
		box := randBoxIn(r, dims)
		if wholeRows {
			box.Off[1], box.Size[1] = 0, dims[1]
		}
		ws = append(ws, fwrite{box: box, data: randData(r, int(box.Volume())*4), dims: slices.Clone(dims)})
	}
	return ws
}

func readAll(s *Store, mode Mode, dims []uint64) ([]byte, error) {
	l := Layout{Dims: dims, Elem: 4, Mode: mode}
	got := make([]byte, dims[0]*dims[1]*4)
	return got, s.Read(7, l, region.Shape(dims...), got)
}

// Every write path of the region store failing (ENOSPC, EIO, short
// writes) at the operations its files see: a write or flush fails with
// the error; what was acknowledged reads back, and reads never fail;
// writes work again once the fault is gone; a reopen and a crash keep
// everything acknowledged.
func TestStoreFaults(t *testing.T) {
	type fcase struct {
		op   vfs.Op
		path string
	}
	cases := map[Mode][]fcase{
		ByOffset: {{vfs.OpWrite, ".off"}, {vfs.OpSync, ".off"}, {vfs.OpCreate, ".off.tmp"}, {vfs.OpWrite, ".off.tmp"},
			{vfs.OpRename, ".off"}, {vfs.OpSyncDir, faultDir}, {vfs.OpRead, ".off"}, {vfs.OpOpen, ".off"}, {vfs.OpWrites, ""}},
		ByRegion: {{vfs.OpWrite, ".reg"}, {vfs.OpSync, ".reg"}, {vfs.OpCreate, ".idx.tmp"}, {vfs.OpWrite, ".idx.tmp"},
			{vfs.OpRename, ".idx"}, {vfs.OpSyncDir, faultDir}, {vfs.OpRead, ".reg"}, {vfs.OpWrites, ""}},
	}
	injected, checked := 0, 0
	for _, mode := range []Mode{ByOffset, ByRegion} {
		for i, c := range cases[mode] {
			// Each case once with ENOSPC and once with EIO, one with Sync
			// and one without.
			for j, errno := range []error{syscall.ENOSPC, syscall.EIO} {
				for _, sync := range []bool{(i+j)%2 == 0} {
					name := fmt.Sprintf("%s/%v/%q/%v/sync=%v", mode, c.op, c.path, errno, sync)
					after := 2
					if c.op&(vfs.OpCreate|vfs.OpRename|vfs.OpSyncDir|vfs.OpOpen|vfs.OpRead) != 0 {
						after = 0 // rare: at a create, a relayout, a checkpoint, a merge
					}
					n, k := storeFaultCase(t, name, mode, sync, vfs.Rule{Ops: c.op, Path: c.path, After: after, Count: 2, Err: errno, Short: true})
					if n == 0 {
						t.Errorf("%s: no fault injected", name)
					}
					injected += n
					checked += k
				}
			}
		}
	}
	t.Logf("%d faults injected, %d acknowledged bytes checked, 0 lost", injected, checked)
}

func storeFaultCase(t *testing.T, name string, mode Mode, sync bool, rule vfs.Rule) (injected, checked int) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s, err := Open(Options{Dir: faultDir, Sync: sync, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	fsys.Inject(rule)
	ws := faultWorkload(uint64(len(name)), false)
	m := newFModel(ws[0].dims)
	for i, w := range ws {
		m.grow(w.dims)
		err := s.Write(7, Layout{Dims: w.dims, Elem: 4, Mode: mode}, w.box, w.data)
		if err != nil && !errors.Is(err, rule.Err) {
			t.Fatalf("%s: write %d: %v; want the injected %v", name, i, err, rule.Err)
		}
		m.apply(w.box, w.data, err == nil)
		if i%8 == 7 {
			if err := s.Flush(7); err != nil && !errors.Is(err, rule.Err) {
				t.Fatalf("%s: flush after write %d: %v", name, i, err)
			}
			// A read under faults fails with the fault or reads right.
			got, err := readAll(s, mode, w.dims)
			if err != nil && !errors.Is(err, rule.Err) {
				t.Fatalf("%s: read after write %d: %v", name, i, err)
			}
			if err == nil {
				m.check(t, got, nil, fmt.Sprintf("%s: read after write %d", name, i))
			}
		}
	}
	for _, n := range fsys.Injected() {
		injected += n
	}
	dims := ws[len(ws)-1].dims
	verify := func(s *Store, when string) {
		t.Helper()
		got, err := readAll(s, mode, dims)
		if err != nil {
			t.Fatalf("%s: %s: read: %v", name, when, err)
		}
		m.check(t, got, nil, name+": "+when)
		for _, k := range m.known {
			if k {
				checked++
			}
		}
	}
	fsys.Clear()
	verify(s, "with faults")
	// The fault is gone: a write works again.
	w := fwrite{box: region.Box{Off: []uint64{0, 0}, Size: []uint64{2, dims[1]}}, data: bytes.Repeat([]byte{0x5A}, int(2*dims[1]*4)), dims: dims}
	if err := s.Write(7, Layout{Dims: dims, Elem: 4, Mode: mode}, w.box, w.data); err != nil {
		t.Fatalf("%s: write once the fault is gone: %v", name, err)
	}
	m.apply(w.box, w.data, true)
	crashed := mem.Clone()
	if sync {
		crashed = mem.CrashClone()
	}
	if err := s.Close(); err != nil {
		t.Fatalf("%s: close: %v", name, err)
	}
	for when, fs := range map[string]vfs.FS{"reopened": mem, "after a crash": crashed} {
		s, err := Open(Options{Dir: faultDir, Sync: sync, FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		verify(s, when)
		s.Close()
	}
	return injected, checked
}

// A crash at any point of a run of writes (the death of the process; a
// power loss with Sync) loses nothing acknowledged before it: reopened
// over what survives, the store reads every acknowledged byte, and the
// write under way at the crash as old or new bytes.
func TestStoreCrashes(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		for _, sync := range []bool{false, true} {
			// Any boxes: a strided box covers a block in part with
			// several rows, which must change it in one write, for a
			// crash between two to leave it old or new.
			wholeRows := false
			mem := vfs.NewMem()
			fsys := vfs.NewFaulty(mem)
			s, err := Open(Options{Dir: faultDir, Sync: sync, FS: fsys})
			if err != nil {
				t.Fatal(err)
			}
			ws := faultWorkload(3, wholeRows)
			m := newFModel(ws[0].dims)
			type point struct {
				fs      *vfs.MemFS
				m       *fmodel
				pending *fwrite
				op      string
			}
			var points []point
			var pending *fwrite
			seen := 0
			fsys.OnOp(func(op vfs.Op, path string) {
				seen++
				if seen%5 != 0 {
					return
				}
				c := mem.Clone()
				if sync {
					c = mem.CrashClone()
				}
				points = append(points, point{c, m.clone(), pending, op.String() + " " + path})
			})
			for i, w := range ws {
				m.grow(w.dims)
				pending = &ws[i]
				if err := s.Write(7, Layout{Dims: w.dims, Elem: 4, Mode: mode}, w.box, w.data); err != nil {
					t.Fatal(err)
				}
				pending = nil
				m.apply(w.box, w.data, true)
			}
			fsys.OnOp(nil)
			s.Close()
			for i, p := range points {
				s, err := Open(Options{Dir: faultDir, Sync: sync, FS: p.fs})
				if err != nil {
					t.Fatal(err)
				}
				dims := p.m.dims
				if p.pending != nil {
					dims = p.pending.dims
					p.m.grow(dims)
				}
				got, err := readAll(s, mode, dims)
				when := fmt.Sprintf("%s sync=%v: crash %d before %s", mode, sync, i, p.op)
				if err != nil {
					t.Fatalf("%s: read: %v", when, err)
				}
				p.m.check(t, got, p.pending, when)
				s.Close()
			}
			t.Logf("%s sync=%v: %d crash points, each reopened and checked", mode, sync, len(points))
		}
	}
}
