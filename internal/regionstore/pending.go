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
// names: one that fails its stored CRC but matches its pending one gets
// it. Blocks are pages here (4 KiB at page-aligned file offsets: the data
// of a by-offset file, the payloads of a by-region log from version 3),
// and the kernel copies a write into the page cache a page at a time,
// so a killed write leaves every block whole, old or new, each matching
// one of its two CRCs.
//
// The slot lives in the file's first page, which the header leaves unused
// past its first few hundred bytes:
//
//	magic "pdcpend\x00", version u32, block size u32, seq u64, runs u32,
//	runs × (table offset u64, first byte u64, end byte u64, first block
//	length u32, blocks u32, blocks × CRC u32), CRC-32C u32 of all before
//	it.
//
// A run is consecutive blocks of one area: the first starts at its first
// byte and is first-block-length long, each next one is a block long,
// the last ends at the end byte (an area's last block may be short);
// their CRCs go at the table offset, 4 bytes apiece. The slot holds the
// blocks of one write (or of one group of at most ioChunk bytes of a
// larger one: a group's CRCs are in the table before the next group
// takes the slot), so only its blocks can be torn.
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

// pending is a file's slot, and the runs of the group of blocks being
// written. Guarded by the object's lock, as the file is.
type pending struct {
	at   int64 // file offset of the slot; 0 if the file has none
	seq  uint64
	runs []pendRun
	size int // encoded bytes of runs
	buf  []byte
	// dirty is set once the slot has been written since it was last
	// cleared: a flush clears it, so a clean restart checks nothing.
	dirty bool
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

// write puts the runs in the slot.
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
		return fmt.Errorf("pending slot of %d bytes overflows its %d: %w", len(b), pendSize, pdc.ErrInternal)
	}
	if _, err := f.WriteAt(b, p.at); err != nil {
		return fmt.Errorf("pending slot: %w", err)
	}
	p.dirty = true
	return nil
}

// clear marks the slot empty, once every write it could name is whole
// with its CRCs in the table.
func (p *pending) clear(f vfs.File) error {
	if p.at == 0 || !p.dirty {
		return nil
	}
	if _, err := f.WriteAt(make([]byte, len(pendMagic)), p.at); err != nil {
		return fmt.Errorf("clear pending slot: %w", err)
	}
	p.dirty = false
	return nil
}

// recoverPending settles the blocks the slot at at names, in a file
// whose CRCs are sum: each that fails its stored CRC and matches its
// pending one gets the pending one in the table. It runs when the file is
// opened, before its tables are read. A slot that is empty, torn or of
// another version names nothing. It returns how many blocks it fixed.
func recoverPending(f vfs.File, at int64, sum *crc32.Table) (int, error) {
	b := make([]byte, pendSize)
	if _, err := f.ReadAt(b, at); err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("pending slot: %w", err)
	}
	runs, bs, ok := decodePending(b)
	if !ok {
		return 0, nil
	}
	fixed := 0
	var blk []byte
	var entry [4]byte
	for _, r := range runs {
		start, n := r.lo, r.first
		for i, want := range r.crcs {
			if i > 0 {
				n = min(bs, r.hi-start)
			}
			if n <= 0 || n > maxBlockSize {
				return fixed, nil // not a slot this build wrote
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
	if _, err := f.WriteAt(make([]byte, len(pendMagic)), at); err != nil {
		return fixed, fmt.Errorf("clear pending slot: %w", err)
	}
	return fixed, nil
}

// decodePending decodes a slot; ok is false if it holds none this build
// reads.
func decodePending(b []byte) (runs []pendRun, bs int64, ok bool) {
	if len(b) < pendHead+4 || string(b[:8]) != pendMagic || binary.LittleEndian.Uint32(b[8:]) != pendVersion {
		return nil, 0, false
	}
	bs = int64(binary.LittleEndian.Uint32(b[12:]))
	n := int(binary.LittleEndian.Uint32(b[24:]))
	if bs <= 0 || bs > maxBlockSize || n > pendSize/pendRunHead {
		return nil, 0, false
	}
	p := pendHead
	for range n {
		if p+pendRunHead > len(b) {
			return nil, 0, false
		}
		var r pendRun
		r.tableAt = int64(binary.LittleEndian.Uint64(b[p:]))
		r.lo = int64(binary.LittleEndian.Uint64(b[p+8:]))
		r.hi = int64(binary.LittleEndian.Uint64(b[p+16:]))
		r.first = int64(binary.LittleEndian.Uint32(b[p+24:]))
		k := int(binary.LittleEndian.Uint32(b[p+28:]))
		p += pendRunHead
		if k > (len(b)-p)/4 || r.lo < 0 || r.hi < r.lo || r.tableAt < 0 {
			return nil, 0, false
		}
		r.crcs = decodeCRCs(b[p : p+4*k])
		p += 4 * k
		runs = append(runs, r)
	}
	if p+4 > len(b) || crc32.Checksum(b[:p], castagnoli) != binary.LittleEndian.Uint32(b[p:]) {
		return nil, 0, false
	}
	return runs, bs, true
}
