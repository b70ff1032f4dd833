package regionstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
)

// A write in place changes stored blocks and then their CRCs. A process
// killed in between (kill -9 lands inside a pwrite as readily as anywhere
// else) used to leave blocks whose CRC matched neither their old bytes nor
// their new ones: acknowledged data, the old bytes of an overwrite never
// acknowledged, read back as corrupt (issue 25). So before a write
// changes blocks in place, it records in its file's pending slot the CRC
// each block will have. Opening the file checks the blocks the slot
// names: one that fails its stored CRC but matches a pending one gets it.
// Blocks are pages here (4 KiB at page-aligned file offsets: the data of a
// by-offset file, the payloads of a by-region log from version 3), and
// the kernel copies a write into the page cache a page at a time, so a
// killed write leaves every block whole, old or new, each matching one of
// its CRCs.
//
// The slot is the rest of the file's first page, past the header, and
// holds records one after another from its start:
//
//	magic "pdcpend\x00", version u32, block size u32, seq u64, runs u32,
//	runs × (table offset u64, first byte u64, end byte u64, first block
//	length u32, blocks u32, blocks × CRC u32), CRC-32C u32 of the record
//	before it.
//
// A run is consecutive blocks of one area: the first starts at its first
// byte and is first-block-length long, each next one is a block long,
// the last ends at the end byte (an area's last block may be short);
// their CRCs go at the table offset, 4 bytes apiece.
//
// A record names the blocks of one write, or of one group of at most
// 1 MiB of a larger one. The CRCs it names go into the table in memory
// once the group's bytes are written, and into the file's table only
// when the slot is full (before its first record is overwritten) or the
// object is flushed: so a write costs the file one small write besides
// its data, as it did when the CRCs went to the table right after the
// data. Opening applies every record it can read from the slot's start:
// a CRC that matches a block's bytes is right for them, however old the
// record that names it.
//
// What it does not cover: power loss. Without an fsync between the slot
// and the data, the disk may get the data and not the slot; and a
// device may tear a page. Making that safe would cost an fsync per write
// (see the design record 0012).

const (
	pendMagic   = "pdcpend\x00"
	pendVersion = 1
	pendAt      = 1024 // file offset of the slot, in the header page
	pendSize    = 3072 // the rest of the page
	pendHead    = 8 + 4 + 4 + 8 + 4
	pendRunHead = 8 + 8 + 8 + 4 + 4
)

// pendRun is a run of consecutive blocks of one area and their new CRCs.
type pendRun struct {
	tableAt int64 // file offset of the first block's CRC entry
	lo, hi  int64 // file bytes the blocks span
	first   int64 // length of the first block
	block   int64 // the first block's number in its area
	crcs    []uint32
}

// pending is a file's slot, the runs of the group of blocks being
// written, and the table entries its records name that are not in the
// file yet. Guarded by the object's lock, as the file is.
type pending struct {
	at    int64 // file offset of the slot; 0 if the file has none
	pos   int64 // where the next record goes, from at
	seq   uint64
	runs  []pendRun
	parts []partPending // writeGroup's shared blocks, kept for their room
	size  int           // encoded bytes of the record of runs
	buf   []byte
	// dirty are table entries set in memory and named by records in the
	// slot, not yet written to the file's tables.
	dirty []dirtyRun
}

// dirtyRun is entries [lo, hi] of a's table.
type dirtyRun struct {
	a      *area
	lo, hi int64
}

func (p *pending) reset() {
	for i := range p.runs {
		p.runs[i].crcs = p.runs[i].crcs[:0]
	}
	p.runs = p.runs[:0]
	p.size = pendHead + 4
}

// room reports whether blocks more blocks fit, in a run of their own.
func (p *pending) room(blocks int64) bool {
	return int64(p.size)+pendRunHead+4*blocks <= pendSize
}

// add appends block b of a and its new CRC, to the last run if b follows
// it in the same area.
func (p *pending) add(a *area, b int64, crc uint32) {
	if n := len(p.runs); n > 0 {
		r := &p.runs[n-1]
		if r.tableAt+4*int64(len(r.crcs)) == a.crcAt+4*b && r.block+int64(len(r.crcs)) == b && r.hi == a.base+a.blockStart(b) {
			r.crcs = append(r.crcs, crc)
			r.hi = a.base + a.blockEnd(b)
			p.size += 4
			return
		}
	}
	if len(p.runs) < cap(p.runs) {
		p.runs = p.runs[:len(p.runs)+1]
	} else {
		p.runs = append(p.runs, pendRun{})
	}
	r := &p.runs[len(p.runs)-1]
	r.tableAt, r.block = a.crcAt+4*b, b
	r.lo, r.hi, r.first = a.base+a.blockStart(b), a.base+a.blockEnd(b), a.blockLen(b)
	r.crcs = append(r.crcs[:0], crc)
	p.size += pendRunHead + 4
}

// write puts a record of the runs in the slot, after the last, or at its
// start once the table has every entry the slot names, if it is full.
func (p *pending) write(f vfs.File) error {
	if p.at == 0 || len(p.runs) == 0 {
		return nil
	}
	p.seq++
	b := append(p.buf[:0], pendMagic...)
	b = binary.LittleEndian.AppendUint32(b, pendVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(blockSize))
	b = binary.LittleEndian.AppendUint64(b, p.seq)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p.runs)))
	for _, r := range p.runs {
		b = binary.LittleEndian.AppendUint64(b, uint64(r.tableAt))
		b = binary.LittleEndian.AppendUint64(b, uint64(r.lo))
		b = binary.LittleEndian.AppendUint64(b, uint64(r.hi))
		b = binary.LittleEndian.AppendUint32(b, uint32(r.first))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(r.crcs)))
		b = encodeCRCs(b, r.crcs)
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	p.buf = b
	if len(b) > pendSize {
		return fmt.Errorf("pending record of %d bytes overflows the slot's %d: %w", len(b), pendSize, pdc.ErrInternal)
	}
	if p.pos+int64(len(b)) > pendSize {
		if err := p.flushTables(f); err != nil {
			return err
		}
		p.pos = 0
	}
	if _, err := f.WriteAt(b, p.at+p.pos); err != nil {
		return fmt.Errorf("pending slot: %w", err)
	}
	p.pos += int64(len(b))
	return nil
}

// written records that the group's bytes are in the file: its CRCs are
// in a's table in memory, and are written to the file's table later if
// the slot names them, now if there is no slot.
func (p *pending) written(f vfs.File, a *area) error {
	if len(p.runs) == 0 {
		return nil
	}
	lo, hi := p.runs[0].block, int64(0)
	for _, r := range p.runs {
		for i, c := range r.crcs {
			a.crcs.set(r.block+int64(i), c)
		}
		hi = r.block + int64(len(r.crcs)) - 1
	}
	if p.at == 0 {
		return a.writeCRCs(f, lo, hi)
	}
	for _, r := range p.runs {
		p.markDirty(a, r.block, r.block+int64(len(r.crcs))-1)
	}
	return nil
}

// markDirty notes that a's table entries [lo, hi] changed in memory: the
// file's table gets them before the slot is reused, and on flush.
func (p *pending) markDirty(a *area, lo, hi int64) {
	if n := len(p.dirty); n > 0 && p.dirty[n-1].a == a && lo <= p.dirty[n-1].hi+1 && hi >= p.dirty[n-1].lo-1 {
		d := &p.dirty[n-1]
		d.lo, d.hi = min(d.lo, lo), max(d.hi, hi)
		return
	}
	p.dirty = append(p.dirty, dirtyRun{a: a, lo: lo, hi: hi})
}

// flushTables writes the table entries the slot names to the file.
func (p *pending) flushTables(f vfs.File) error {
	for _, d := range p.dirty {
		if err := d.a.writeCRCs(f, d.lo, d.hi); err != nil {
			return fmt.Errorf("crc table: %w", err)
		}
	}
	clear(p.dirty)
	p.dirty = p.dirty[:0]
	return nil
}

// clear writes the table entries the slot names and empties it: on
// flush, so that a clean restart has nothing to check.
func (p *pending) clear(f vfs.File) error {
	if p.at == 0 || p.pos == 0 {
		return nil
	}
	if err := p.flushTables(f); err != nil {
		return err
	}
	if _, err := f.WriteAt(make([]byte, len(pendMagic)), p.at); err != nil {
		return fmt.Errorf("clear pending slot: %w", err)
	}
	p.pos = 0
	return nil
}

// recoverPending settles the blocks the slot at at names, in a file
// whose CRCs are sum: each that fails its stored CRC and matches one a
// record names gets it. It runs when the file is opened, before its
// tables are read, and empties the slot. It returns how many entries it
// fixed.
func recoverPending(f vfs.File, at int64, sum *crc32.Table) (int, error) {
	b := make([]byte, pendSize)
	if _, err := f.ReadAt(b, at); err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("pending slot: %w", err)
	}
	fixed, pos := 0, 0
	var blk []byte
	var entry [4]byte
	for {
		runs, bs, n, ok := decodePending(b[pos:])
		if !ok {
			break
		}
		pos += n
		for _, r := range runs {
			start, n := r.lo, r.first
			for i, want := range r.crcs {
				if i > 0 {
					n = min(bs, r.hi-start)
				}
				if n <= 0 || n > maxBlockSize {
					break // not a record this build wrote
				}
				if int64(cap(blk)) < n {
					blk = make([]byte, n)
				}
				blk = blk[:n]
				got, err := f.ReadAt(blk, start)
				if err != nil && !errors.Is(err, io.EOF) {
					return fixed, fmt.Errorf("pending block at %d: %w", start, err)
				}
				clear(blk[got:])
				eAt := r.tableAt + 4*int64(i)
				k, err := f.ReadAt(entry[:], eAt)
				if err != nil && !errors.Is(err, io.EOF) {
					return fixed, fmt.Errorf("pending crc at %d: %w", eAt, err)
				}
				clear(entry[k:])
				stored, c := binary.LittleEndian.Uint32(entry[:]), crc32.Checksum(blk, sum)
				if c != stored && !(stored == 0 && allZero(blk)) && c == want {
					binary.LittleEndian.PutUint32(entry[:], want)
					if _, err := f.WriteAt(entry[:], eAt); err != nil {
						return fixed, fmt.Errorf("pending crc at %d: %w", eAt, err)
					}
					fixed++
				}
				start += n
			}
		}
	}
	if pos > 0 {
		if _, err := f.WriteAt(make([]byte, len(pendMagic)), at); err != nil {
			return fixed, fmt.Errorf("clear pending slot: %w", err)
		}
	}
	return fixed, nil
}

// decodePending decodes the record at the start of b and says how long
// it is; ok is false if b starts with none this build reads.
func decodePending(b []byte) (runs []pendRun, bs int64, n int, ok bool) {
	if len(b) < pendHead+4 || string(b[:8]) != pendMagic || binary.LittleEndian.Uint32(b[8:]) != pendVersion {
		return nil, 0, 0, false
	}
	bs = int64(binary.LittleEndian.Uint32(b[12:]))
	nr := int(binary.LittleEndian.Uint32(b[24:]))
	if bs <= 0 || bs > maxBlockSize || nr > pendSize/pendRunHead {
		return nil, 0, 0, false
	}
	p := pendHead
	for range nr {
		if p+pendRunHead > len(b) {
			return nil, 0, 0, false
		}
		var r pendRun
		r.tableAt = int64(binary.LittleEndian.Uint64(b[p:]))
		r.lo = int64(binary.LittleEndian.Uint64(b[p+8:]))
		r.hi = int64(binary.LittleEndian.Uint64(b[p+16:]))
		r.first = int64(binary.LittleEndian.Uint32(b[p+24:]))
		k := int(binary.LittleEndian.Uint32(b[p+28:]))
		p += pendRunHead
		if k > (len(b)-p)/4 || r.lo < 0 || r.hi < r.lo || r.tableAt < 0 {
			return nil, 0, 0, false
		}
		r.crcs = decodeCRCs(b[p : p+4*k])
		p += 4 * k
		runs = append(runs, r)
	}
	if p+4 > len(b) || crc32.Checksum(b[:p], castagnoli) != binary.LittleEndian.Uint32(b[p:]) {
		return nil, 0, 0, false
	}
	return runs, bs, p + 4, true
}
