package regionstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"slices"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A by-offset file (%016x.off) is
//
//	header  4 KiB: magic "pdcoff\x00\x00", version u32, elem u32, ndim u32,
//	        pad u32, table blocks u64, trailing dims (ndim-1)×u64, CRC u32
//	        of the bytes before it; all little-endian, zero-padded; the
//	        dims version's slots at byte 512 (dimsmark.go) and the
//	        pending slot at byte 1024 (pending.go), in files of every
//	        version: builds before them leave those bytes zero and
//	        ignore them
//	table   4 bytes per 4 KiB data block: the block's CRC, 0 if never
//	        written; sized for "table blocks", rounded up to 4 KiB
//	data    element i of the object (row-major over its current dims) at
//	        data offset + i*elem
//
// Every CRC is CRC-32 (IEEE) from version 2, CRC-32C in version 1 (see
// sumVersion).
//
// The CRC table lives in the same file, not in a sidecar, so that a
// relayout replaces data and checksums with one rename: with two files a
// crash between two renames would pair new data with old checksums. The
// price is that the table has a capacity; a write past it relayouts the
// file into a larger table (at least doubling, so the copies add up to
// at most the final size). The table is a hole until written.
//
// The first dim is not recorded: the call's dims say it, and data past
// the end of the first dim is cut off when it shrinks.

const (
	offMagic      = "pdcoff\x00\x00"
	offVersion    = sumVersion // 1 is read too
	offHeaderSize = 4096
	// minTableBlocks sizes a new table for 1 GiB of data (a 1 MiB hole).
	minTableBlocks = 1 << 18
)

type offsetFile struct {
	version  uint32 // format: says the checksum
	path     string
	elem     int
	ndim     int
	trailing []uint64 // dims[1:]
	blocks   int64    // table capacity, in blocks
	dataLen  int64    // bytes of the data area the file holds
	area     area
	pend     pending  // in the header page (pending.go)
	mark     dimsMark // in the header page (dimsmark.go)
}

func tableBytes(blocks int64) int64 { return (4*blocks + 4095) &^ 4095 }

func newOffsetFile(version uint32, path string, elem int, dims []uint64, blocks int64) *offsetFile {
	o := &offsetFile{version: version, path: path, elem: elem, ndim: len(dims), trailing: slices.Clone(dims[1:]), blocks: blocks}
	o.area = area{sum: sumTable(version), base: offHeaderSize + tableBytes(blocks), size: blocks * blockSize, crcAt: offHeaderSize, pend: &o.pend}
	o.pend.at = pendAt
	o.mark = newMark(markAt, 0)
	return o
}

func (o *offsetFile) encodeHeader() []byte {
	b := make([]byte, 0, offHeaderSize)
	b = append(b, offMagic...)
	b = binary.LittleEndian.AppendUint32(b, o.version)
	b = binary.LittleEndian.AppendUint32(b, uint32(o.elem))
	b = binary.LittleEndian.AppendUint32(b, uint32(o.ndim))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(o.blocks))
	for _, d := range o.trailing {
		b = binary.LittleEndian.AppendUint64(b, d)
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, o.area.sum))
	b = b[:offHeaderSize]
	o.mark.put(b)
	return b
}

// maxTableBlocks bounds a decoded table (2^40 blocks: 64 PiB of data).
const maxTableBlocks = 1 << 40

func decodeOffsetHeader(path string, b []byte) (*offsetFile, error) {
	if len(b) < 32 || string(b[:8]) != offMagic {
		return nil, fmt.Errorf("%s: not a by-offset file: %w", path, pdc.ErrCorrupt)
	}
	version := binary.LittleEndian.Uint32(b[8:])
	if version < 1 || version > offVersion {
		return nil, fmt.Errorf("%s: by-offset file version %d, this build reads 1 to %d: %w", path, version, offVersion, pdc.ErrVersion)
	}
	elem := binary.LittleEndian.Uint32(b[12:])
	ndim := binary.LittleEndian.Uint32(b[16:])
	blocks := binary.LittleEndian.Uint64(b[24:])
	if ndim == 0 || ndim > region.MaxDims || elem == 0 || elem > 1<<30 || blocks == 0 || blocks > maxTableBlocks {
		return nil, fmt.Errorf("%s: header has elem %d, ndim %d, table of %d blocks: %w", path, elem, ndim, blocks, pdc.ErrCorrupt)
	}
	end := 32 + 8*int(ndim-1)
	if len(b) < end+4 {
		return nil, fmt.Errorf("%s: header cut short: %w", path, pdc.ErrCorrupt)
	}
	if got, want := crc32.Checksum(b[:end], sumTable(version)), binary.LittleEndian.Uint32(b[end:]); got != want {
		return nil, fmt.Errorf("%s: header crc %08x, stored %08x: %w", path, got, want, pdc.ErrCorrupt)
	}
	dims := make([]uint64, ndim)
	for i := 1; i < int(ndim); i++ {
		dims[i] = binary.LittleEndian.Uint64(b[32+8*(i-1):])
		if dims[i] == 0 {
			return nil, fmt.Errorf("%s: dim %d is 0: %w", path, i, pdc.ErrCorrupt)
		}
	}
	o := newOffsetFile(version, path, int(elem), dims, int64(blocks))
	if len(b) >= markAt+2*markSlot {
		o.mark = decodeMark(markAt, b)
	}
	return o, nil
}

// loadOffsetFile reads the header and the used part of the table.
func loadOffsetFile(path string, f vfs.File) (*offsetFile, error) {
	hdr := make([]byte, offHeaderSize)
	if _, err := f.ReadAt(hdr, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	o, err := decodeOffsetHeader(path, hdr)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	o.dataLen = max(0, st.Size()-o.area.base)
	if _, err := recoverPending(f, o.pend.at, o.area.sum); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if used := (o.dataLen + blockSize - 1) / blockSize; used > 0 {
		if o.area.crcs, err = loadCRCs(f, o.area.crcAt, used); err != nil {
			return nil, fmt.Errorf("%s: crc table: %w", path, err)
		}
	}
	return o, nil
}

// rowBytes is the size of one index of the first dim, math.MaxInt64 if
// larger: no file holds that much.
func (o *offsetFile) rowBytes() int64 {
	n := uint64(o.elem)
	for _, d := range o.trailing {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 || lo > math.MaxInt64 {
			return math.MaxInt64
		}
		n = lo
	}
	return int64(n)
}

// rowsBytes is the size of the first rows indexes of the first dim,
// math.MaxInt64 if larger (an unlimited first dim is math.MaxUint64).
func (o *offsetFile) rowsBytes(rows uint64) int64 {
	hi, lo := bits.Mul64(rows, uint64(o.rowBytes()))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

func (o *offsetFile) dims(first uint64) []uint64 { return append([]uint64{first}, o.trailing...) }

// runSegs cuts sub, a box inside outer, into the contiguous runs it
// occupies in a row-major area shaped like outer, over buf, sub's
// elements row-major.
func runSegs(outer, sub region.Box, elem int, buf []byte) []seg {
	e := int64(elem)
	var segs []seg
	var pos int64
	region.Runs(outer, sub, func(r region.Run) bool {
		n := int64(r.Len) * e
		segs = append(segs, seg{off: int64(r.Off) * e, buf: buf[pos : pos+n]})
		pos += n
		return true
	})
	return segs
}

func (o *offsetFile) write(f vfs.File, dims []uint64, box region.Box, data []byte) error {
	segs := runSegs(region.Shape(dims...), box, o.elem, data)
	if err := o.area.write(f, segs); err != nil {
		o.storedSome(f)
		return err
	}
	last := segs[len(segs)-1]
	o.dataLen = max(o.dataLen, last.off+int64(len(last.buf)))
	return nil
}

func (o *offsetFile) writeFrom(f vfs.File, dims []uint64, box region.Box, r io.Reader, buf []byte) error {
	end, err := o.area.writeRunsFrom(f, region.Shape(dims...), box, o.elem, r, buf)
	if err != nil {
		o.storedSome(f)
		return err
	}
	o.dataLen = max(o.dataLen, end)
	return nil
}

// storedSome counts in dataLen what a write that failed part way (a
// full disk after some of its groups, a broken stream) stored: it is
// data like any other, which a cut must drop and a view must see.
func (o *offsetFile) storedSome(f vfs.File) {
	if st, err := f.Stat(); err == nil {
		o.dataLen = max(o.dataLen, st.Size()-o.area.base)
	}
}

func (o *offsetFile) read(f vfs.File, dims []uint64, box region.Box, into []byte) error {
	return o.area.read(f, runSegs(region.Shape(dims...), box, o.elem, into))
}

// byteEnd is the data area offset just past box's last element, or an
// error wrapping pdc.ErrTooLarge if that is past what a file offset
// holds: the row-major offset would wrap and name another element.
func byteEnd(dims []uint64, box region.Box, elem int) (int64, error) {
	var idx, carry uint64
	for i, d := range dims {
		hi, lo := bits.Mul64(idx, d)
		idx, carry = bits.Add64(lo, box.End(i)-1, 0)
		if hi != 0 || carry != 0 {
			return 0, fmt.Errorf("region %v of dims %v ends past 2^64 elements: %w", box, dims, pdc.ErrTooLarge)
		}
	}
	idx, carry = bits.Add64(idx, 1, 0)
	hi, lo := bits.Mul64(idx, uint64(elem))
	if carry != 0 || hi != 0 || lo > math.MaxInt64 {
		return 0, fmt.Errorf("region %v of dims %v ends past 2^63 bytes: %w", box, dims, pdc.ErrTooLarge)
	}
	return int64(lo), nil
}

// bytesNeeded is the data area a write of box needs: up to the end of
// its last element.
func bytesNeeded(dims []uint64, box region.Box, elem int) (int64, error) {
	n, err := byteEnd(dims, box, elem)
	if err != nil {
		return 0, err
	}
	if n > maxTableBlocks*blockSize {
		return 0, fmt.Errorf("region %v of dims %v needs more than %d bytes: %w", box, dims, maxTableBlocks*blockSize, pdc.ErrTooLarge)
	}
	return n, nil
}

// tableFor is the table capacity for a file that needs n bytes now.
func tableFor(n int64) int64 {
	return min(maxTableBlocks, max(minTableBlocks, 2*((n+blockSize-1)/blockSize)))
}

// needsRelayout reports whether dims move data in the file: a trailing
// dim changed.
func (o *offsetFile) needsRelayout(dims []uint64) bool {
	return !slices.Equal(o.trailing, dims[1:])
}

// needsCut reports whether the first dim shrank below data in the file.
func (o *offsetFile) needsCut(dims []uint64) bool {
	return o.dataLen > o.rowsBytes(dims[0])
}

// cut drops the data past the first dim of dims: elements outside the
// dims are gone, and read as zeros if the dim grows again. A crash in the
// middle leaves every block it keeps reading as before.
func (o *offsetFile) cut(f vfs.File, dims []uint64) error {
	keep := o.rowsBytes(dims[0])
	if o.dataLen <= keep {
		return nil
	}
	// Entries of blocks wholly past the end go first, so a crash cannot
	// leave them claiming data that is gone.
	first := (keep + blockSize - 1) / blockSize
	if hi := o.area.crcs.n - 1; first <= hi {
		// Zero the entries on disk through the chunks that hold them.
		err := o.area.crcs.spans(first, hi, func(lo, hi int64) error {
			_, err := f.WriteAt(make([]byte, 4*(hi-lo+1)), o.area.crcAt+4*lo)
			return err
		})
		if err != nil {
			return err
		}
		o.area.crcs.truncate(first)
	}
	// The block the new end cuts gets the CRC of what it keeps, named in
	// the pending slot before the truncate: a process killed between the
	// two leaves the block matching its old CRC or the new one, which
	// opening the file puts in the table (pending.go). Unless it is
	// corrupt: a fresh CRC would make its damaged bytes read as good
	// data. Its old CRC, left, keeps it reading as corrupt.
	b, part := keep/blockSize, keep%blockSize
	var c uint32
	set := false
	if part != 0 {
		buf := make([]byte, blockSize)
		err := o.area.load(f, b, buf, true)
		switch {
		case errors.Is(err, pdc.ErrCorrupt):
		case err != nil:
			return err
		default:
			clear(buf[part:]) // what the block holds once cut
			c, set = crc32.Checksum(buf, o.area.sum), true
			if p := o.area.pend; p != nil {
				p.reset()
				p.add(&o.area, b, c)
				if err := p.write(f); err != nil {
					return err
				}
			}
		}
	}
	if err := f.Truncate(o.area.base + keep); err != nil {
		return err
	}
	o.dataLen = keep
	if set {
		o.area.crcs.set(b, c)
		// The slot names the entry until the table has it: a flush
		// empties the slot after writing the entries marked dirty, so
		// one this write fails to store must be among them, or the
		// block, cut already, is left with the CRC of its uncut bytes
		// once the slot is gone, and its kept bytes read as corrupt.
		if p := o.area.pend; p != nil && p.at != 0 {
			p.markDirty(&o.area, b, b)
		}
		if err := o.area.writeCRCs(f, b, b); err != nil {
			return err
		}
	}
	return nil
}

// relayoutChunk bounds the memory a relayout copies through.
const relayoutChunk = 4 << 20

// relayout rewrites the file for new dims and a table of blocks entries:
// every element inside both the old and the new dims keeps its value at
// its new row-major position. It writes a temporary file, fsyncs it,
// renames it over the old one and fsyncs the directory, whatever the
// store's durability: the old file may hold fsynced data, which a rename
// of unsynced data could lose on power failure. The caller drops the old
// file from the cache first.
func (o *offsetFile) relayout(fsys vfs.FS, old vfs.File, dims []uint64, blocks int64) (*offsetFile, error) {
	// The new file keeps the old one's format: copyBlocks moves checksums
	// as they are.
	n := newOffsetFile(o.version, o.path, o.elem, dims, blocks)
	n.mark = newMark(markAt, o.mark.version)
	err := replaceFile(fsys, o.path, true, func(f vfs.File) error {
		if _, err := f.WriteAt(n.encodeHeader(), 0); err != nil {
			return err
		}
		if o.dataLen == 0 {
			return nil
		}
		if !o.needsRelayout(dims) {
			return o.copyBlocks(old, n, f)
		}
		// Elements keep their coordinates: copy the box both layouts hold.
		oldDims, both := o.kept(dims)
		buf := make([]byte, relayoutChunk)
		var err error
		chunks(both, int64(o.elem), relayoutChunk, func(c region.Box) bool {
			b := buf[:c.Volume()*uint64(o.elem)]
			if err = o.read(old, oldDims, c, b); err != nil {
				return false
			}
			if allZero(b) {
				return true // leave a hole: it reads as zeros all the same
			}
			err = n.write(f, dims, c, b)
			return err == nil
		})
		if err != nil {
			return err
		}
		// The file is fsynced before the rename: with its whole table.
		return n.pend.clear(f)
	})
	if !replaced(err) {
		return nil, err
	}
	return n, err
}

// kept is the object's dims as far as the file holds data, and the box of
// elements inside both them and dims.
func (o *offsetFile) kept(dims []uint64) (old []uint64, both region.Box) {
	old = o.dims(uint64((o.dataLen-1)/o.rowBytes() + 1)) // dataLen > 0
	both = region.Shape(slices.Clone(dims)...)
	for i := range both.Size {
		both.Size[i] = min(both.Size[i], old[i])
	}
	return old, both
}

// relayoutNeeds is the data area a relayout to dims fills.
func (o *offsetFile) relayoutNeeds(dims []uint64) (int64, error) {
	if o.dataLen == 0 {
		return 0, nil
	}
	_, both := o.kept(dims)
	for _, s := range both.Size {
		if s == 0 {
			return 0, nil
		}
	}
	return bytesNeeded(dims, both, o.elem)
}

// copyBlocks copies data and CRCs unchanged into a file whose table is a
// different size: the layout of elements is the same. Blocks never
// written stay holes.
func (o *offsetFile) copyBlocks(old vfs.File, n *offsetFile, f vfs.File) error {
	buf := make([]byte, blockSize)
	nb := (o.dataLen + blockSize - 1) / blockSize
	for b := int64(0); b < nb; b++ {
		// Skip the holes of a sparse file: blocks never written.
		d, err := nextData(old, o.area.base+b*blockSize)
		if err != nil {
			return err
		}
		if d < 0 {
			break
		}
		if b = max(b, (d-o.area.base)/blockSize); b >= nb {
			break
		}
		if err := o.area.load(old, b, buf, false); err != nil {
			return err
		}
		c := o.area.crc(b)
		if c == 0 && allZero(buf) {
			continue
		}
		m := min(blockSize, o.dataLen-b*blockSize)
		if _, err := f.WriteAt(buf[:m], n.area.base+b*blockSize); err != nil {
			return err
		}
		n.area.crcs.set(b, c)
	}
	n.dataLen = o.dataLen
	if err := f.Truncate(n.area.base + n.dataLen); err != nil {
		return err
	}
	return n.area.writeCRCs(f, 0, n.area.crcs.n-1)
}

// chunks cuts box into boxes of at most limit bytes (or single elements),
// halving along the outermost dimension longer than one, in row-major
// order.
func chunks(box region.Box, elem, limit int64, fn func(region.Box) bool) bool {
	if int64(box.Volume())*elem <= limit || box.Volume() == 1 {
		return fn(box)
	}
	d := 0
	for box.Size[d] == 1 {
		d++
	}
	lo, hi := box.Clone(), box.Clone()
	lo.Size[d] = box.Size[d] / 2
	hi.Off[d], hi.Size[d] = box.Off[d]+lo.Size[d], box.Size[d]-lo.Size[d]
	return chunks(lo, elem, limit, fn) && chunks(hi, elem, limit, fn)
}
