package regionstore

import (
	"cmp"
	"container/list"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/overlay"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A read served to the network does not need the bytes copied into a
// buffer of the server's: a View hands out slices of a read-only mapping
// of the object's file, checked against their CRCs, and the socket write
// copies them from the page cache. A 1 GiB read then passes through
// memory twice (the checksum and the send) instead of three times (the
// pread, the checksum and the send), and the server holds no buffer for
// it. A by-offset object's view is cut out of its data file; a by-region
// object's out of its log, run by run from the newest pieces holding the
// box, zeros for the rest, so a region read as it was written is one
// slice.
//
// A view is made under its object's read lock: the CRCs are checked
// while the file can neither change size nor be replaced, so the check
// never reads a mapping past its file's end (which would fault the
// process). The lock is let go before the view is returned: a client
// slow to take its answer must not hold up writers of the object. The
// mapping stays until the view is released; if the file shrinks
// meanwhile, the socket write of a slice past its new end fails in the
// kernel (EFAULT) and that client's answer is lost, nothing else. Bytes
// overwritten meanwhile go out as they are at the send, as with any read
// racing a write.

// zeros backs the parts of views that were never written.
var zeros = make([]byte, 1<<20)

// fileMap is a read-only mapping of an object's file from offset 0. It is
// replaced, not grown, when the file has grown past it; a replaced
// mapping is unmapped when its last view is released.
type fileMap struct {
	data []byte
	free func() error // unmaps data
	refs int
	dead bool
	// copied: the file could not be mapped (MemFS; ENODEV from mmap on
	// some FUSE and network file systems) and data is a copy read from
	// it, which later writes do not change: the next write drops it.
	copied bool
}

// mapState is an object's current mapping.
type mapState struct {
	mu  sync.Mutex
	cur *fileMap
	el  *list.Element // in idleMaps while cur is unused; guarded by idleMaps.mu
	// declined is set once a lazy view of the object was refused for
	// want of a mapping (ErrUnmapped): the next view maps it.
	declined bool
}

// idleMaps keeps the most recently used mappings that no view uses, and
// unmaps the others: a mapping per object ever read would run into the
// kernel's limit on mappings (vm.max_map_count, 65530 by default), past
// which the Go runtime itself cannot map memory.
var idleMaps = struct {
	mu  sync.Mutex
	lru *list.List // of *mapState, most recent first
}{lru: list.New()}

const maxIdleMaps = 256

// acquire returns a mapping of f covering at least size bytes. If lazy,
// and the object has no such mapping and was never declined one, it
// returns ErrUnmapped instead of mapping the file, and remembers that.
func (ms *mapState) acquire(f vfs.File, size int64, lazy bool) (*fileMap, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if m := ms.cur; m != nil && int64(len(m.data)) >= size {
		ms.unidle()
		m.refs++
		return m, nil
	}
	if lazy && !ms.declined {
		ms.declined = true
		return nil, ErrUnmapped
	}
	ms.unidle()
	data, free, mapped, err := mapOrRead(f, int(size))
	if err != nil {
		return nil, fmt.Errorf("map %d bytes: %w", size, err)
	}
	ms.retire()
	ms.cur = &fileMap{data: data, free: free, refs: 1, copied: !mapped}
	return ms.cur, nil
}

// mapOrRead is vfs.MapOrRead that says whether it mapped the file or
// read a copy of it.
func mapOrRead(f vfs.File, n int) (data []byte, free func() error, mapped bool, err error) {
	if m, ok := f.(vfs.Mapper); ok {
		data, err := m.Map(n, false)
		if err == nil {
			return data, func() error { return m.Unmap(data) }, true, nil
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return nil, nil, false, err
		}
	}
	data = make([]byte, n)
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, false, err
	}
	return data, func() error { return nil }, false, nil
}

// written drops the current mapping if it is a copy of the file: a write
// changed the file under it. A real mapping shows the write.
func (ms *mapState) written() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.cur != nil && ms.cur.copied {
		ms.unidle()
		ms.retire()
	}
}

// retire takes the current mapping out of use: unmapped now if no view
// uses it, else by the last. ms.mu is held.
func (ms *mapState) retire() {
	if m := ms.cur; m != nil {
		m.dead = true
		if m.refs == 0 {
			_ = m.free()
		}
		ms.cur = nil
	}
}

func (ms *mapState) release(m *fileMap) {
	ms.mu.Lock()
	m.refs--
	if m.refs > 0 {
		ms.mu.Unlock()
		return
	}
	if m.dead {
		_ = m.free()
		ms.mu.Unlock()
		return
	}
	idleMaps.mu.Lock()
	if ms.el == nil {
		ms.el = idleMaps.lru.PushFront(ms)
	} else {
		idleMaps.lru.MoveToFront(ms.el)
	}
	var victims []*mapState
	for idleMaps.lru.Len() > maxIdleMaps {
		v := idleMaps.lru.Remove(idleMaps.lru.Back()).(*mapState)
		v.el = nil
		victims = append(victims, v)
	}
	idleMaps.mu.Unlock()
	ms.mu.Unlock()
	for _, v := range victims {
		// Not under ms.mu: a victim's lock is taken alone. It may have
		// been taken up again meanwhile; then it stays.
		v.mu.Lock()
		if v.cur != nil && v.cur.refs == 0 {
			v.retire()
		}
		v.mu.Unlock()
	}
}

// drop unmaps the current mapping before its file changes size or is
// replaced (or, if a view still uses it, once that view is released).
func (ms *mapState) drop() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.unidle()
	ms.retire()
}

// unidle takes ms off the idle list. ms.mu is held.
func (ms *mapState) unidle() {
	idleMaps.mu.Lock()
	defer idleMaps.mu.Unlock()
	if ms.el != nil {
		idleMaps.lru.Remove(ms.el)
		ms.el = nil
	}
}

// View is a read of regions straight from their object's file.
type View struct {
	// Segs are the regions' bytes in row-major order, region after region.
	Segs [][]byte
	// Lens says how many of Segs each region has.
	Lens []int
	done func()
}

// Release ends the view: its slices must not be used afterwards.
func (v *View) Release() {
	if v.done != nil {
		v.done()
		v.done = nil
	}
}

// View returns object obj's box as slices of its file, checked against
// their CRCs.
func (s *Store) View(obj uint64, l Layout, box region.Box) (*View, error) {
	return s.ViewAll(obj, l, []region.Box{box})
}

// ErrUnmapped is returned by ViewMapped for an object whose file has no
// mapping yet.
var ErrUnmapped = errors.New("region store: the object's file is not mapped")

// A mapping pays for itself only when its object is read more than once
// while it is kept: mapping a file's pages costs a page fault per few
// pages, which under this hypervisor took 0.55-0.65 CPU-seconds per GB
// (128 MiB of a file just written: 70-85 ms mapped and checksummed,
// 14-18 ms read with pread into a 1 MiB buffer and checksummed), while
// a mapping already faulted in is no cheaper to checksum than a pread
// (13-18 ms against 13-20). So a reader that can read into buffers asks
// with ViewMapped, reads into buffers the first time, and maps from the
// second read of the object on: a file read once (BD-CATS reads each
// object once) is never mapped, one read again and again is mapped once.

// ViewMapped is ViewAll if the object's file is mapped already, or was
// declined a mapping before (it is read again: mapping it pays); else it
// returns ErrUnmapped, and the caller reads the boxes with Read.
func (s *Store) ViewMapped(obj uint64, l Layout, boxes []region.Box) (*View, error) {
	return s.viewAll(obj, l, boxes, true)
}

// ViewAll is View of several boxes of one object: Segs holds each box's
// bytes in turn, and Lens how many of Segs belong to each box.
func (s *Store) ViewAll(obj uint64, l Layout, boxes []region.Box) (*View, error) {
	return s.viewAll(obj, l, boxes, false)
}

func (s *Store) viewAll(obj uint64, l Layout, boxes []region.Box, lazy bool) (v *View, err error) {
	for _, box := range boxes {
		if err := check(obj, l, box, int(box.Volume())*l.Elem); err != nil {
			return nil, err
		}
	}
	o, err := s.object(obj)
	if err != nil {
		return nil, err
	}
	o.mu.RLock()
	if !o.loaded || needsDims(o, l.Dims) {
		// Rare: bring the files to the dims holding the object, then
		// look again under the read lock.
		o.mu.RUnlock()
		if err := s.applyDims(o, l); err != nil {
			return nil, err
		}
		o.mu.RLock()
		if !o.loaded || needsDims(o, l.Dims) {
			o.mu.RUnlock()
			return nil, fmt.Errorf("region store: object %d changed dims while being read; read again: %w", obj, pdc.ErrStale)
		}
	}
	defer o.mu.RUnlock()
	// A page the kernel cannot read in (a disk error) faults the reader:
	// here that is an error of this view, not the end of the process.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if v != nil {
				v.Release()
			}
			v, err = nil, fmt.Errorf("region store: view object %d: reading its file failed: %v: %w", obj, p, pdc.ErrInternal)
		}
	}()
	return s.view(o, l, boxes, lazy)
}

// applyDims loads o and brings its files to l's dims, holding it.
func (s *Store) applyDims(o *object, l Layout) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return s.applyDimsLocked(o, l)
}

// applyDimsLocked is applyDims with o.mu held exclusively.
func (s *Store) applyDimsLocked(o *object, l Layout) error {
	if err := s.load(o); err != nil {
		return err
	}
	if err := conforms(o, l); err != nil {
		return err
	}
	if err := stale(o, l); err != nil {
		return err
	}
	if err := s.raiseVersion(o, l.Version); err != nil {
		return err
	}
	return s.setDims(o, l.Dims, 0)
}

// view makes the view; o.mu is read-locked. lazy: see ViewMapped.
func (s *Store) view(o *object, l Layout, boxes []region.Box, lazy bool) (*View, error) {
	if err := conforms(o, l); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	v := &View{Lens: make([]int, len(boxes))}
	if o.mode == ByRegion {
		return s.regionView(o, v, boxes, lazy)
	}
	if o.mode == 0 || o.off.dataLen == 0 {
		for i, box := range boxes {
			n := len(v.Segs)
			v.Segs = zeroSegs(v.Segs, box.Volume()*uint64(l.Elem))
			v.Lens[i] = len(v.Segs) - n
		}
		return v, nil
	}
	off := o.off
	var m *fileMap
	err := s.withFile(off.path, func(f vfs.File) error {
		var err error
		m, err = o.maps.acquire(f, off.area.base+off.dataLen, lazy)
		return err
	})
	if errors.Is(err, ErrUnmapped) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("region store: view object %d: %s: %w", o.id, off.path, err)
	}
	v.done = func() { o.maps.release(m) }
	var checked blockRange
	for i, box := range boxes {
		n := len(v.Segs)
		if v.Segs, err = off.view(v.Segs, m.data, l.Dims, box, &checked); err != nil {
			v.Release()
			return nil, fmt.Errorf("region store: view object %d region %v: %s: %w", o.id, box, off.path, err)
		}
		v.Lens[i] = len(v.Segs) - n
	}
	return v, nil
}

// regionView is view for a by-region object: its boxes cut out of a
// mapping of the log. The log only grows (a torn tail is cut at load,
// before any view): a mapping stays valid for every record it covers.
// Anything that shrinks or replaces the log must drop the mapping first,
// as a relayout of a by-offset file does.
func (s *Store) regionView(o *object, v *View, boxes []region.Box, lazy bool) (*View, error) {
	l := o.reg
	var m *fileMap
	err := s.withFile(l.path, func(f vfs.File) error {
		var err error
		m, err = o.maps.acquire(f, l.size, lazy)
		return err
	})
	if errors.Is(err, ErrUnmapped) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("region store: view object %d: %s: %w", o.id, l.path, err)
	}
	v.done = func() { o.maps.release(m) }
	checked := map[*piece]*blockRange{}
	for i, box := range boxes {
		n := len(v.Segs)
		if v.Segs, err = l.view(v.Segs, m.data, box, checked); err != nil {
			v.Release()
			return nil, fmt.Errorf("region store: view object %d region %v: %s: %w", o.id, box, l.path, err)
		}
		v.Lens[i] = len(v.Segs) - n
	}
	return v, nil
}

// view appends box to segs: the runs of the newest pieces holding it, cut
// out of m, a mapping of the log, and zeros for the holes, in the box's
// row-major order. Each block of a piece is checked once per view.
func (l *regionLog) view(segs [][]byte, m []byte, box region.Box, checked map[*piece]*blockRange) ([][]byte, error) {
	cands := l.candidates(box)
	pcs := make([]overlay.Piece, len(cands))
	for i, p := range cands {
		pcs[i] = overlay.Piece{Box: p.live, Seq: p.seq}
	}
	frags, holes := overlay.Resolve(box, pcs)
	// part is a stretch of the box's bytes: from the mapping, or zeros.
	type part struct {
		at  int64 // byte offset in the box
		src []byte
		n   int64 // bytes of zeros when src is nil
	}
	var parts []part
	first := len(segs) // slices before it belong to other boxes
	e := int64(l.elem)
	for _, h := range holes {
		region.Runs(box, h, func(r region.Run) bool {
			parts = append(parts, part{at: int64(r.Off) * e, n: int64(r.Len) * e})
			return true
		})
	}
	for _, fr := range frags {
		p := cands[fr.Piece]
		cr := checked[p]
		if cr == nil {
			cr = &blockRange{}
			checked[p] = cr
		}
		for _, sg := range fragmentRuns(p.box, box, fr.Box, l.elem) {
			if err := p.area.check(m, sg.src, sg.src+sg.n, cr); err != nil {
				return segs, fmt.Errorf("piece %v (seq %d): %w", p.box, p.seq, err)
			}
			lo := p.area.base + sg.src
			parts = append(parts, part{at: sg.dst, src: m[lo : lo+sg.n]})
		}
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp.Compare(a.at, b.at) })
	for _, pt := range parts {
		if pt.src == nil {
			segs = zeroSegs(segs, uint64(pt.n))
			continue
		}
		// Runs that follow each other in the log go out as one slice.
		if k := len(segs) - 1; k >= first && len(segs[k]) > 0 && cap(segs[k]) > len(segs[k]) &&
			&segs[k][:len(segs[k])+1][len(segs[k])] == &pt.src[0] {
			segs[k] = segs[k][:len(segs[k])+len(pt.src)]
			continue
		}
		segs = append(segs, pt.src)
	}
	return segs, nil
}

// check verifies the blocks of the area that [lo, hi) of its payload
// touches, in m (a mapping of the file), skipping those in checked.
func (a *area) check(m []byte, lo, hi int64, checked *blockRange) error {
	for b := a.block(lo); a.blockStart(b) < hi; b++ {
		if checked.has(b) {
			continue
		}
		start := a.base + a.blockStart(b)
		if err := a.verify(b, m[start:start+a.blockLen(b)]); err != nil {
			return err
		}
		checked.add(b)
	}
	return nil
}

// zeroSegs appends n bytes of zeros to segs.
func zeroSegs(segs [][]byte, n uint64) [][]byte {
	for n > 0 {
		k := min(n, uint64(len(zeros)))
		segs = append(segs, zeros[:k])
		n -= k
	}
	return segs
}

// blockRange is the blocks a view has checked: a run of them, so that the
// thousands of small regions a start_all packs into one block are not
// each checked against the whole block's CRC.
type blockRange struct{ lo, hi int64 } // [lo, hi); empty when lo == hi

func (r *blockRange) has(b int64) bool { return r.lo <= b && b < r.hi }

func (r *blockRange) add(b int64) {
	switch {
	case r.lo == r.hi:
		r.lo, r.hi = b, b+1
	case b == r.hi:
		r.hi++
	case b == r.lo-1:
		r.lo--
	default:
		r.lo, r.hi = b, b+1
	}
}

// view appends box to segs, cut out of m, a mapping of the file covering
// its data, and checks every block it touches that is not checked
// already. Bytes past the data the file holds are zeros.
func (o *offsetFile) view(segs [][]byte, m []byte, dims []uint64, box region.Box, checked *blockRange) ([][]byte, error) {
	a := &o.area
	limit := min(o.dataLen, a.size)
	e := int64(o.elem)
	var scratch []byte
	var err error
	region.Runs(region.Shape(dims...), box, func(r region.Run) bool {
		lo, hi := int64(r.Off)*e, int64(r.Off+r.Len)*e
		if in := min(hi, limit); lo < in {
			for b := lo / blockSize; b*blockSize < in; b++ {
				if checked.has(b) {
					continue
				}
				bEnd := b*blockSize + a.blockLen(b)
				if bEnd <= o.dataLen {
					err = a.verify(b, m[a.base+b*blockSize:a.base+bEnd])
				} else {
					// The file ends inside the block: the rest is zeros.
					if scratch == nil {
						scratch = make([]byte, blockSize)
					}
					blk := scratch[:bEnd-b*blockSize]
					clear(blk[copy(blk, m[a.base+b*blockSize:a.base+o.dataLen]):])
					err = a.verify(b, blk)
				}
				if err != nil {
					return false
				}
				checked.add(b)
			}
			segs = append(segs, m[a.base+lo:a.base+in])
			lo = in
		}
		if lo < hi {
			segs = zeroSegs(segs, uint64(hi-lo))
		}
		return true
	})
	return segs, err
}
