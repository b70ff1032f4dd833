package regionstore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// blockSize is the unit of checksumming. 4 KiB, a page: writes and reads
// of whole pages (the common small region) need no read-modify-checksum
// of a larger block around them, and the table stays at 1/1024 of the
// data. It is a variable only so that tests can change it to reach many
// blocks with small objects; files do not record it, so it must not change
// while a store is open.
var blockSize int64 = 4 << 10

const maxBlockSize = 64 << 10

// sumVersion is the file format version new files are written in. Files
// of version 1 checksum with CRC-32C (Castagnoli), from version 2 with
// CRC-32 (IEEE). Both have the same strength; what differs is speed. Go
// computes CRC-32 by carry-less multiplication, at 31 GB/s on this
// machine's AMD cores from memory, against 12-13 GB/s for CRC-32C, which
// uses the CPU's CRC32 instruction. A read checks every block it returns,
// usually as the first touch of the data after the page cache, so the
// check ran at memory speed with CRC-32C and took 28% of a data server's
// CPU serving reads over TCP.
const sumVersion = 2

// newVersion is the version new files get: sumVersion, but a variable so
// that tests can make files of version 1 and check that they still work.
var newVersion uint32 = sumVersion

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sumTable is the CRC table of files of the given format version.
func sumTable(version uint32) *crc32.Table {
	if version < 2 {
		return castagnoli
	}
	return crc32.IEEETable
}

var zeroBlock [maxBlockSize]byte

func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroBlock))
		if !bytes.Equal(b[:n], zeroBlock[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// area is a stretch of a file checksummed per block: the data of a
// by-offset file, or the payload of one by-region record. Each block has a
// CRC in a table elsewhere in the same file, 4 bytes per block, and a
// copy of the table in memory.
//
// A table entry of 0 means "never written": the block must read as zeros.
// A write in place names its blocks' new CRCs in the file's pending slot
// first (pending.go), then writes the data: a process killed in between
// leaves each block matching its old CRC or the one the slot names,
// which opening the file puts in the table. Without a slot (by-region
// logs before version 3 are never written in place), a crash between
// data and CRC leaves a block that reads as pdc.ErrCorrupt rather than
// as bytes that may be half old and half new.
//
// Blocks are blockSize long and, but for an area's first and last, start
// at file offsets that are multiples of blockSize (in areas of version 3
// logs and by-offset files): a page each, which a killed write leaves
// whole. skew says where the area's byte 0 falls in its first block.
type area struct {
	sum   *crc32.Table // the file's checksum
	base  int64        // file offset of the area's byte 0
	size  int64        // bytes in the area; the last block may be shorter
	skew  int64        // bytes of the first block before the area's byte 0
	crcAt int64        // file offset of the CRC table
	crcs  crcTable
	pend  *pending // the file's pending slot; nil if it has none
}

// crcChunk is how many table entries (256 MiB of data) are allocated at
// once past the first chunk.
const crcChunk = 4096

// crcTable is an area's CRC table in memory. Past its first chunk it is
// sparse: a chunk exists once one of its entries is set, so an object
// written only at its far end (say one element at the corner of an 8 TiB
// object) costs memory for what was written, not for its extent. Entries
// that are not 0 on disk are always in memory.
type crcTable struct {
	head []uint32                    // entries [0, crcChunk), as far as set
	rest map[int64]*[crcChunk]uint32 // later entries, by chunk number
	n    int64                       // one past the highest entry set
}

func newCRCTable(crcs []uint32) crcTable {
	var t crcTable
	t.head = crcs[:min(len(crcs), crcChunk)]
	for i := int64(len(t.head)); i < int64(len(crcs)); i++ {
		t.set(i, crcs[i])
	}
	t.n = int64(len(crcs))
	return t
}

func (t *crcTable) get(b int64) uint32 {
	if b < int64(len(t.head)) {
		return t.head[b]
	}
	if c := t.rest[b/crcChunk]; c != nil {
		return c[b%crcChunk]
	}
	return 0
}

func (t *crcTable) set(b int64, c uint32) {
	t.n = max(t.n, b+1)
	if b < crcChunk {
		for int64(len(t.head)) <= b {
			t.head = append(t.head, 0)
		}
		t.head[b] = c
		return
	}
	ch := t.rest[b/crcChunk]
	if ch == nil {
		if c == 0 {
			return
		}
		if t.rest == nil {
			t.rest = map[int64]*[crcChunk]uint32{}
		}
		ch = new([crcChunk]uint32)
		t.rest[b/crcChunk] = ch
	}
	ch[b%crcChunk] = c
}

// truncate makes every entry from n on 0.
func (t *crcTable) truncate(n int64) {
	if n >= t.n {
		return
	}
	if n < int64(len(t.head)) {
		t.head = t.head[:n]
	}
	for k, ch := range t.rest {
		switch {
		case k*crcChunk >= n:
			delete(t.rest, k)
		case (k+1)*crcChunk > n:
			clear(ch[n-k*crcChunk:])
		}
	}
	t.n = n
}

// spans calls fn for the stretches of [lo, hi] whose entries may be
// non-zero, in order: the head, then the chunks that exist.
func (t *crcTable) spans(lo, hi int64, fn func(lo, hi int64) error) error {
	if lo < crcChunk {
		if err := fn(lo, min(hi, crcChunk-1)); err != nil {
			return err
		}
		lo = crcChunk
	}
	if lo > hi || len(t.rest) == 0 {
		return nil
	}
	first, last := lo/crcChunk, hi/crcChunk
	if last-first < int64(len(t.rest)) {
		// A write touches a chunk or two: look them up rather than walk
		// every chunk of a large object.
		for k := first; k <= last; k++ {
			if t.rest[k] == nil {
				continue
			}
			if err := fn(max(lo, k*crcChunk), min(hi, (k+1)*crcChunk-1)); err != nil {
				return err
			}
		}
		return nil
	}
	keys := make([]int64, 0, len(t.rest))
	for k := range t.rest {
		if k >= lo/crcChunk && k <= hi/crcChunk {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := fn(max(lo, k*crcChunk), min(hi, (k+1)*crcChunk-1)); err != nil {
			return err
		}
	}
	return nil
}

// seg is a contiguous piece of an area and the caller's bytes for it.
type seg struct {
	off int64 // within the area
	buf []byte
}

// block is the block holding area byte off.
func (a *area) block(off int64) int64 { return (off + a.skew) / blockSize }

// blockStart is the area offset of block b's first byte.
func (a *area) blockStart(b int64) int64 { return max(0, b*blockSize-a.skew) }

// blockEnd is the area offset just past block b.
func (a *area) blockEnd(b int64) int64 { return min(a.size, (b+1)*blockSize-a.skew) }

func (a *area) blockLen(b int64) int64 { return a.blockEnd(b) - a.blockStart(b) }

func (a *area) crc(b int64) uint32 { return a.crcs.get(b) }

// verify checks block b's bytes against its CRC.
func (a *area) verify(b int64, data []byte) error {
	want := a.crc(b)
	if want == 0 && allZero(data) {
		return nil
	}
	if got := crc32.Checksum(data, a.sum); got != want {
		return fmt.Errorf("block %d at file offset %d: crc %08x, stored %08x: %w",
			b, a.base+a.blockStart(b), got, want, pdc.ErrCorrupt)
	}
	return nil
}

// load reads block b into buf (sized to the block), zeros past the end of
// the file, and verifies it unless told not to.
func (a *area) load(f vfs.File, b int64, buf []byte, check bool) error {
	n, err := f.ReadAt(buf, a.base+a.blockStart(b))
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	clear(buf[n:])
	if check {
		return a.verify(b, buf)
	}
	return nil
}

// read fills segs, which lie in increasing order and do not overlap, from
// the file, verifying every block it touches. Whole blocks go straight
// into the caller's buffers; a block a segment covers only in part is read
// once into a scratch block and copied from there, so strided reads do not
// read a block once per row.
func (a *area) read(f vfs.File, segs []seg) error {
	segs = a.cacheSized(segs)
	cur := int64(-1)
	var scratch []byte
	for _, s := range segs {
		off, end := s.off, s.off+int64(len(s.buf))
		for off < end {
			if off >= a.size {
				// Past what the area can hold: never written.
				clear(s.buf[off-s.off:])
				break
			}
			b := a.block(off)
			bStart, bEnd := a.blockStart(b), a.blockEnd(b)
			if off == bStart && end >= bEnd {
				// As many whole blocks as the segment covers, in one pread.
				wEnd, nb := bEnd, b+1
				for wEnd < end && a.blockEnd(nb) <= end && a.blockEnd(nb) > wEnd {
					wEnd = a.blockEnd(nb)
					nb++
				}
				dst := s.buf[off-s.off : wEnd-s.off]
				n, err := f.ReadAt(dst, a.base+off)
				if err != nil && !errors.Is(err, io.EOF) {
					return err
				}
				clear(dst[n:])
				for i := b; i < nb; i++ {
					lo := a.blockStart(i) - off
					if err := a.verify(i, dst[lo:lo+a.blockLen(i)]); err != nil {
						return err
					}
				}
				off = wEnd
				continue
			}
			if cur != b {
				if scratch == nil {
					scratch = make([]byte, blockSize)
				}
				if err := a.load(f, b, scratch[:bEnd-bStart], true); err != nil {
					return err
				}
				cur = b
			}
			n := min(end, bEnd) - off
			copy(s.buf[off-s.off:off-s.off+n], scratch[off-bStart:])
			off += n
		}
	}
	return nil
}

// write stores segs, which lie in increasing order and do not overlap,
// with the CRCs of the blocks they touch, in groups of at most two
// ioChunks (and as many blocks as the pending slot's record holds): for
// each, the new CRCs into the slot, then the bytes (pending.go). Whole
// blocks are checksummed from the caller's buffer just before their
// copy into the file, while in the CPU cache; a block a segment covers
// in part is read first (once, however many segments touch it) and
// checksummed with the new bytes merged in. Partial blocks are not
// verified on the way: a corrupt block can still be overwritten.
func (a *area) write(f vfs.File, segs []seg) error {
	segs = a.cacheSized(segs)
	p := a.pend
	if p == nil {
		p = &pending{}
	}
	var scratch []byte
	for len(segs) > 0 {
		n, err := a.writeGroup(f, segs, p, &scratch)
		if err != nil {
			return err
		}
		segs = segs[n:]
	}
	return nil
}

// writeGroup stores the first segments of segs that fit one group, and
// says how many it took. scratch is where it merges blocks covered in
// part, kept from group to group.
//
// Each block changes in one pwrite, so that a process killed between two
// leaves it old or new, matching one of its CRCs. A block that two or
// more segments cover in part (the rows of a strided box, where a row is
// shorter than a block) is written once, merged, after the segments'
// writes, which leave it out.
func (a *area) writeGroup(f vfs.File, segs []seg, p *pending, scratch *[]byte) (int, error) {
	p.reset()
	g := groupMerge{a: a, shared: p.parts[:0], scratch: *scratch}
	defer func() {
		clear(g.shared) // drop the scratch buffers
		p.parts = g.shared[:0]
		*scratch = g.scratch
	}()
	n, err := g.collect(f, segs, p)
	if err != nil {
		return n, err
	}
	if err := p.write(f); err != nil {
		return n, err
	}
	if err := a.writeMerged(f, segs[:n], g.shared); err != nil {
		a.settle(f, p)
		return n, err
	}
	return n, p.written(f, a)
}

// groupMerge gathers one write group: the new CRCs into the pending
// slot, and the blocks its segments cover in part merged in scratch. The
// slot is passed to its methods rather than held: a pointer in here
// would move a caller's to the heap.
type groupMerge struct {
	a *area
	// shared are the blocks that segments before the last cover in part,
	// with the group's bytes merged in, in order; the last may be the
	// block the last segment covers in part, still open (cur).
	shared []partPending
	cur    bool
	used   int // bytes of scratch the blocks in shared hold
	// scratch is the caller's, handed back at the group's end; held by
	// value, as a pointer in here would move the caller's to the heap.
	scratch []byte
}

// collect takes the first segments of segs that fit one group and says
// how many it took.
func (g *groupMerge) collect(f vfs.File, segs []seg, p *pending) (int, error) {
	var bytes int64
	n := 0
	for ; n < len(segs); n++ {
		s := segs[n]
		if n > 0 && !g.fits(s, bytes, p) {
			break
		}
		bytes += int64(len(s.buf))
		if err := g.add(f, s, p); err != nil {
			return n, err
		}
	}
	g.finish(p)
	return n, nil
}

// fits says whether s joins a group already holding bytes: within two
// ioChunks, the slot's room and the shared blocks' bound.
func (g *groupMerge) fits(s seg, bytes int64, p *pending) bool {
	off, end := s.off, s.off+int64(len(s.buf))
	// The blocks s touches, and the one merged last, not added yet: each
	// may start a run.
	need := g.a.block(end-1) - g.a.block(off) + 1
	if g.cur {
		need += 1 + pendRunHead/4
	}
	// s may add two blocks in part, its first and its last.
	return bytes+int64(len(s.buf)) <= 2*chunk() && p.room(need) && len(g.shared)+2 <= maxShared
}

// add puts the CRCs of the blocks s covers whole into the slot, and
// merges those it covers in part.
func (g *groupMerge) add(f vfs.File, s seg, p *pending) error {
	a := g.a
	off, end := s.off, s.off+int64(len(s.buf))
	for off < end {
		b := a.block(off)
		bStart, bEnd := a.blockStart(b), a.blockEnd(b)
		if off == bStart && end >= bEnd {
			g.finish(p)
			p.add(a, b, crc32.Checksum(s.buf[off-s.off:bEnd-s.off], a.sum))
			off = bEnd
			continue
		}
		k := min(end, bEnd) - off
		if g.cur && g.shared[len(g.shared)-1].b == b {
			// A segment before this one covered part of b too.
			pt := &g.shared[len(g.shared)-1]
			pt.shared = true
			pt.hi = off + k
		} else if err := g.open(f, b, off, k, p); err != nil {
			return err
		}
		copy(g.shared[len(g.shared)-1].buf[off-bStart:], s.buf[off-s.off:off-s.off+k])
		off += k
	}
	return nil
}

// open starts merging block b, of which a segment covers k bytes from
// off: it loads the block into scratch, growing scratch when full. The
// block is checked first: a corrupt one merged with the write's bytes
// would get a fresh CRC over its damaged ones, which would then read as
// good data; the write fails instead, and the block stays reported
// corrupt until a write covers it whole. A block a short write left
// mixed has the CRC of what it holds (settle), so a retry passes.
func (g *groupMerge) open(f vfs.File, b, off, k int64, p *pending) error {
	g.finish(p)
	a := g.a
	bl := int(a.blockEnd(b) - a.blockStart(b))
	if len(g.scratch)-g.used < bl {
		// The blocks in shared keep the buffer they are in.
		g.scratch = make([]byte, min(maxShared, max(1, 2*len(g.scratch)/int(blockSize)))*int(blockSize))
		g.used = 0
	}
	g.shared = append(g.shared, partPending{b: b, lo: off, hi: off + k, buf: g.scratch[g.used : g.used+bl : g.used+bl]})
	g.cur = true
	if err := a.load(f, b, g.shared[len(g.shared)-1].buf, true); err != nil {
		return fmt.Errorf("the write covers part of it, and its other bytes cannot be kept: %w", err)
	}
	return nil
}

// finish closes the block merged last: its CRC into the slot, and its
// buffer kept only if more than one segment covers part of it.
func (g *groupMerge) finish(p *pending) {
	if !g.cur {
		return
	}
	pt := &g.shared[len(g.shared)-1]
	p.add(g.a, pt.b, crc32.Checksum(pt.buf, g.a.sum))
	if pt.shared {
		g.used += len(pt.buf)
	} else {
		// The segment's own write changes it in one: its merge is not
		// needed any more.
		g.shared = g.shared[:len(g.shared)-1]
	}
	g.cur = false
}

// writeMerged writes segs, leaving out the blocks in shared, then the
// merged blocks of shared, each in one pwrite.
func (a *area) writeMerged(f vfs.File, segs []seg, shared []partPending) error {
	for _, s := range segs {
		lo, hi := s.off, s.off+int64(len(s.buf))
		if len(shared) > 0 {
			// Only a segment's first and last blocks may be shared: it
			// covers those between whole.
			if b := a.block(lo); isShared(shared, b) {
				lo = a.blockEnd(b)
			}
			if b := a.block(hi - 1); isShared(shared, b) {
				hi = min(hi, a.blockStart(b))
			}
			if lo >= hi {
				continue
			}
		}
		if _, err := f.WriteAt(s.buf[lo-s.off:hi-s.off], a.base+lo); err != nil {
			return err
		}
	}
	for _, pt := range shared {
		bStart := a.blockStart(pt.b)
		if _, err := f.WriteAt(pt.buf[pt.lo-bStart:pt.hi-bStart], a.base+pt.lo); err != nil {
			return err
		}
	}
	return nil
}

// isShared says whether block b is in shared, which is in block order.
func isShared(shared []partPending, b int64) bool {
	_, ok := slices.BinarySearchFunc(shared, b, func(pt partPending, b int64) int { return cmp.Compare(pt.b, b) })
	return ok
}

// maxShared bounds the blocks of a write group that segments share, and
// so the memory they are merged in: buffers of up to this many blocks,
// grown by doubling, twice that allocated at most per write.
const maxShared = 64

// partPending is a block a write group covers in part: the block with the
// group's bytes merged in, and the area bytes [lo, hi) the group changes
// in it (holding old bytes between segments).
type partPending struct {
	b      int64
	lo, hi int64
	buf    []byte
	shared bool // more than one segment covers part of it
}

// settle gives the blocks of a group whose data write failed part way
// the CRC of what they now hold, unless that is still the old one. A
// pwrite cut short (a full disk) leaves the block it stopped in neither
// old nor new: the failed write's bytes there are some old, some new,
// and the block's other bytes, acknowledged before, are as they were.
// Left with its old CRC the block would fail its check, and those
// acknowledged bytes with it.
func (a *area) settle(f vfs.File, p *pending) {
	buf := make([]byte, blockSize)
	for _, r := range p.runs {
		for i := range r.crcs {
			b := r.block + int64(i)
			blk := buf[:a.blockLen(b)]
			if a.load(f, b, blk, false) != nil || a.verify(b, blk) == nil {
				continue
			}
			a.crcs.set(b, crc32.Checksum(blk, a.sum))
			// Now, for a crash to find it (the slot names the CRC the
			// block would have had whole); and, if the disk refuses
			// that too, again at the next flush.
			_ = a.writeCRCs(f, b, b)
			if p.at != 0 {
				p.markDirty(a, b, b)
			}
		}
	}
}

// writeRunsFrom stores sub, a box inside outer whose row-major bytes are
// read from r, in the runs it occupies in the area (shaped like outer), a
// bufferful of buf at a time; each bufferful is written as write does,
// so a block cut between two of them is merged with what the first left
// in the file. It returns the area offset just past the last run.
func (a *area) writeRunsFrom(f vfs.File, outer, sub region.Box, elem int, r io.Reader, buf []byte) (end int64, err error) {
	e := int64(elem)
	var segs []seg
	fill := 0
	flush := func() error {
		if fill == 0 {
			return nil
		}
		if _, err := io.ReadFull(r, buf[:fill]); err != nil {
			return err
		}
		err := a.write(f, segs)
		segs, fill = segs[:0], 0
		return err
	}
	region.Runs(outer, sub, func(run region.Run) bool {
		off, n := int64(run.Off)*e, int64(run.Len)*e
		end = off + n
		for n > 0 {
			k := min(n, int64(len(buf)-fill))
			segs = append(segs, seg{off: off, buf: buf[fill : fill+int(k)]})
			fill += int(k)
			off += k
			n -= k
			if fill == len(buf) {
				if err = flush(); err != nil {
					return false
				}
			}
		}
		return true
	})
	if err == nil {
		err = flush()
	}
	return end, err
}

// ioChunk is the most one pread or pwrite moves. Checksumming a chunk
// right after its copy finds it in the CPU cache; a 16 MiB buffer
// checksummed and copied whole would go through memory twice.
const ioChunk = 512 << 10

// chunk is the most bytes one pwrite moves: ioChunk, and no more blocks
// than the pending slot's record names (when tests make blocks tiny).
func chunk() int64 { return min(ioChunk, 512*blockSize) }

// cacheSized cuts segs at multiples of chunk() (whole blocks) in the area.
func (a *area) cacheSized(segs []seg) []seg {
	c := chunk()
	long := false
	for _, s := range segs {
		if int64(len(s.buf)) > c {
			long = true
			break
		}
	}
	if !long {
		return segs
	}
	var out []seg
	for _, s := range segs {
		for len(s.buf) > 0 {
			n := min(int64(len(s.buf)), ((s.off+a.skew)/c+1)*c-a.skew-s.off)
			out = append(out, seg{off: s.off, buf: s.buf[:n]})
			s.off, s.buf = s.off+n, s.buf[n:]
		}
	}
	return out
}

// writeCRCs stores table entries [lo, hi] from memory. Stretches with no
// chunk in memory are 0 on disk already (or holes) and are skipped.
func (a *area) writeCRCs(f vfs.File, lo, hi int64) error {
	if lo < 0 {
		return nil
	}
	return a.crcs.spans(lo, hi, func(lo, hi int64) error {
		buf := make([]byte, 4*(hi-lo+1))
		for i := lo; i <= hi; i++ {
			binary.LittleEndian.PutUint32(buf[4*(i-lo):], a.crc(i))
		}
		_, err := f.WriteAt(buf, a.crcAt+4*lo)
		return err
	})
}

// crcsOf checksums a whole payload laid out from an area's byte 0, with
// no skew.
func crcsOf(sum *crc32.Table, data []byte) []uint32 {
	s := newBlockSums(sum, 0, int64(len(data)))
	s.add(data)
	return s.done()
}

// blockSums checksums an area's bytes block by block as they come, in
// pieces of any length, in order.
type blockSums struct {
	sum       *crc32.Table
	left      int64 // bytes of the area still to come
	blockLeft int64 // of them, in the current block
	cur       uint32
	out       []uint32
}

// newBlockSums checksums an area of n bytes starting skew bytes into its
// first block.
func newBlockSums(sum *crc32.Table, skew, n int64) *blockSums {
	return &blockSums{sum: sum, left: n, blockLeft: min(n, blockSize-skew),
		out: make([]uint32, 0, (skew+n+blockSize-1)/blockSize)}
}

func (s *blockSums) add(b []byte) {
	for len(b) > 0 {
		k := min(int64(len(b)), s.blockLeft)
		s.cur = crc32.Update(s.cur, s.sum, b[:k])
		b = b[k:]
		s.left -= k
		if s.blockLeft -= k; s.blockLeft == 0 {
			s.out = append(s.out, s.cur)
			s.cur, s.blockLeft = 0, min(s.left, blockSize)
		}
	}
}

// done returns the CRCs, one per block.
func (s *blockSums) done() []uint32 { return s.out }

func decodeCRCs(b []byte) []uint32 {
	crcs := make([]uint32, len(b)/4)
	for i := range crcs {
		crcs[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return crcs
}

// loadCRCs reads entries [0, n) of a table at off in f, skipping the
// file's holes, so a sparse table costs what it holds.
func loadCRCs(f vfs.File, off, n int64) (crcTable, error) {
	var t crcTable
	const piece = 1 << 20
	buf := make([]byte, piece)
	for pos := int64(0); pos < 4*n; {
		d, err := nextData(f, off+pos)
		if err != nil {
			return t, err
		}
		if d < 0 || d >= off+4*n {
			break
		}
		pos = max(pos, (d-off)&^3)
		m := min(piece, 4*n-pos)
		got, err := f.ReadAt(buf[:m], off+pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return t, err
		}
		for i := 0; i+4 <= got; i += 4 {
			if c := binary.LittleEndian.Uint32(buf[i:]); c != 0 {
				t.set((pos+int64(i))/4, c)
			}
		}
		pos += m
	}
	return t, nil
}

func encodeCRCs(dst []byte, crcs []uint32) []byte {
	for _, c := range crcs {
		dst = binary.LittleEndian.AppendUint32(dst, c)
	}
	return dst
}
