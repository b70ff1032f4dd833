package regionstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/overlay"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A by-region log (%016x.reg) is
//
//	header   64 bytes (4 KiB from version 3): magic "pdcreg\x00\x00",
//	         version u32, elem u32, ndim u32, CRC u32 of the bytes before
//	         it, zero-padded; from version 3 the dims version's slots at
//	         byte 512 (dimsmark.go) and the pending slot at byte 1024
//	records  one after another, each
//	  crc      u32   CRC of the rest of the fixed part and the box
//	  kind     u8    1 data, 2 clip; then 3 zero bytes
//	  seq      u64   write order, increasing
//	  ndim     u32
//	  nblocks  u32   ceil(payload length / 4 KiB), one more from version 3
//	                 (0 for an empty payload)
//	  paylen   u64   volume(box)*elem for data, 0 for clip
//	  box      data: off[ndim] u64, size[ndim] u64; clip: dims[ndim] u64
//	  crcs     nblocks × u32: CRC of each block of the payload; 0 past
//	           the last
//	  payload  the box's elements, row-major
//
// Every CRC is CRC-32 (IEEE) from version 2, CRC-32C in version 1 (see
// sumVersion); a log keeps its version for life.
//
// The blocks of a payload: before version 3, 4 KiB from its first byte;
// from version 3, cut at the file offsets that are multiples of 4 KiB
// (pages), so the first and the last may be shorter, and nblocks has room
// for one more than the payload's length needs. From version 3 a payload
// of 64 KiB or more starts at a page boundary, after zero bytes following
// the block CRCs.
//
// The record CRC leaves out the block CRCs because a write that falls
// inside a stored piece rewrites part of its payload in place, and then
// those blocks' CRCs; one CRC over the whole record could not be updated
// atomically with the bytes. From version 3 the pending slot (pending.go)
// makes a crash between the two leave every block old or new: a killed
// write is cut at page boundaries, which are block boundaries there.
// Logs of versions 1 and 2 have no slot, and their blocks straddle pages:
// a write to them is never made in place, it is appended.
//
// An append writes the payload and block CRCs first and the fixed part
// last, so a process killed in between leaves a tail whose record CRC
// fails: it is cut off on the next open. After power loss (without
// Options.Sync) the last record can hold a valid header over a torn
// payload, so opening also checks the payload of the last record.
//
// A clip record says the object's dims shrank to dims: every earlier piece
// keeps only its part inside them. Pieces are in object coordinates, so
// a change of dims moves nothing else.
//
// The index checkpoint (%016x.idx) records, for the log length it covers,
// every live piece: its record offset and the part of it still visible.
// Opening loads it and replays the records after that length; a missing,
// corrupt or newer-version checkpoint is rebuilt from the whole log, so
// it is never the only copy of anything.
//
//	magic "pdcidx\x00\x00", version u32, elem u32, ndim u32, pad u32,
//	log length u64, last seq u64, count u64,
//	count × (record offset u64, live off[ndim] u64, live size[ndim] u64),
//	CRC-32C u32 of everything before it, whatever the log's version

const (
	regMagic   = "pdcreg\x00\x00"
	regVersion = 3 // 1 and 2 are read and written too
	// regHeaderSize is the header of logs of versions 1 and 2; from
	// version 3 it takes a page, with the pending slot.
	regHeaderSize = 64
	regPageHeader = 4096
	recFixed      = 32
	kindData      = 1
	kindClip      = 2
	idxMagic      = "pdcidx\x00\x00"
	idxVersion    = 1
)

// checkpointEvery bounds the log replayed after a crash (a variable only
// so that the crash tests can reach it with a quarter of the writes).
var checkpointEvery int64 = 64 << 20

// piece is a stored data record and the part of it still visible.
type piece struct {
	box  region.Box // the payload's box
	live region.Box // inside box; the rest was clipped away
	seq  uint64
	rec  int64 // file offset of the record
	len  int64 // record length, header to end of payload
	area area  // the payload
}

type regionLog struct {
	fs            vfs.FS
	version       uint32 // format: says the checksum, the blocks, the header
	hdrLen        int64  // the header's length: where the first record is
	sum           *crc32.Table
	path, idxPath string
	elem, ndim    int
	size          int64  // log length: the next record goes here
	seq           uint64 // the last seq used
	checkpointed  int64  // log length the .idx covers
	dead          int64  // bytes of records no longer in the index

	// pieces are sorted by live.Off[0]; none has a live box that reaches
	// further along dim 0 than maxLen0, so a lookup scans only the pieces
	// starting within maxLen0 before the box.
	pieces  []*piece
	maxLen0 uint64
	// ends is, per dim, the furthest end of a piece's live box: kept by
	// add, clip and loading, since outside reads it under a read lock.
	ends []uint64
	pend pending  // version 3 on; at 0 before
	mark dimsMark // version 3 on; at 0 before
}

// newRegVersion is the version new logs get: regVersion, but a variable so
// that tests can make logs of earlier versions and check that they still
// work.
var newRegVersion uint32 = regVersion

func regHeaderLen(version uint32) int64 {
	if version >= 3 {
		return regPageHeader
	}
	return regHeaderSize
}

// pagedBlocks reports whether the log's payload blocks are cut at page
// boundaries of the file, so that it can be written in place safely.
func (l *regionLog) pagedBlocks() bool { return l.version >= 3 }

// padMin is the smallest payload that starts at a page boundary in a log
// of version 3, after zeros: so that writes in place into it at page
// multiples of its own offsets cover whole blocks and need no read of the
// blocks at their ends, at a cost of at most 1/16 of the payload.
const padMin = 64 << 10

// payloadAt is where a payload of n bytes goes when its record's header
// ends at end.
func (l *regionLog) payloadAt(end, n int64) int64 {
	if l.pagedBlocks() && n >= padMin {
		return (end + blockSize - 1) / blockSize * blockSize
	}
	return end
}

// blocksFor is nblocks of a record with a payload of n bytes.
func (l *regionLog) blocksFor(n int64) int64 {
	nb := (n + blockSize - 1) / blockSize
	if l.pagedBlocks() && n > 0 {
		nb++
	}
	return nb
}

// skewAt is the skew of a payload at file offset base.
func (l *regionLog) skewAt(base int64) int64 {
	if l.pagedBlocks() {
		return base % blockSize
	}
	return 0
}

func encodeRegHeader(version uint32, elem, ndim int) []byte {
	b := make([]byte, 0, regHeaderSize)
	b = append(b, regMagic...)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint32(b, uint32(elem))
	b = binary.LittleEndian.AppendUint32(b, uint32(ndim))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, sumTable(version)))
	return b[:regHeaderSize]
}

func decodeRegHeader(path string, b []byte) (version uint32, elem, ndim int, err error) {
	if len(b) < 24 || string(b[:8]) != regMagic {
		return 0, 0, 0, fmt.Errorf("%s: not a by-region log: %w", path, pdc.ErrCorrupt)
	}
	version = binary.LittleEndian.Uint32(b[8:])
	if version < 1 || version > regVersion {
		return 0, 0, 0, fmt.Errorf("%s: by-region log version %d, this build reads 1 to %d: %w", path, version, regVersion, pdc.ErrVersion)
	}
	if got, want := crc32.Checksum(b[:20], sumTable(version)), binary.LittleEndian.Uint32(b[20:]); got != want {
		return 0, 0, 0, fmt.Errorf("%s: header crc %08x, stored %08x: %w", path, got, want, pdc.ErrCorrupt)
	}
	e, n := binary.LittleEndian.Uint32(b[12:]), binary.LittleEndian.Uint32(b[16:])
	if e == 0 || e > 1<<30 || n == 0 || n > region.MaxDims {
		return 0, 0, 0, fmt.Errorf("%s: header has elem %d, ndim %d: %w", path, e, n, pdc.ErrCorrupt)
	}
	return version, int(e), int(n), nil
}

// record is a decoded record header.
type record struct {
	kind    byte
	seq     uint64
	box     region.Box // data: the payload's box; clip: Shape(dims)
	paylen  int64
	nblocks int
	hdrLen  int64 // fixed part, box and block CRCs
	pad     int64 // zero bytes between the block CRCs and the payload
}

func (r *record) len() int64 { return r.hdrLen + r.pad + r.paylen }

func boxBytes(kind byte, ndim int) int {
	if kind == kindClip {
		return 8 * ndim
	}
	return 16 * ndim
}

// encodeRecHeader is a record's bytes before its payload.
func encodeRecHeader(sum *crc32.Table, kind byte, seq uint64, box region.Box, paylen int64, crcs []uint32) []byte {
	ndim := box.Ndim()
	b := make([]byte, 4, recFixed+boxBytes(kind, ndim)+4*len(crcs))
	b = append(b, kind, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = binary.LittleEndian.AppendUint32(b, uint32(ndim))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(crcs)))
	b = binary.LittleEndian.AppendUint64(b, uint64(paylen))
	if kind == kindData {
		for _, v := range box.Off {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	for _, v := range box.Size {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	binary.LittleEndian.PutUint32(b, crc32.Checksum(b[4:], sum))
	return encodeCRCs(b, crcs)
}

// decodeRecFixed checks the fixed part of a record and says how long the
// rest of its header is.
func (l *regionLog) decodeRecFixed(b []byte) (record, error) {
	r := record{kind: b[4], seq: binary.LittleEndian.Uint64(b[8:])}
	ndim := binary.LittleEndian.Uint32(b[16:])
	r.nblocks = int(binary.LittleEndian.Uint32(b[20:]))
	r.paylen = int64(binary.LittleEndian.Uint64(b[24:]))
	if (r.kind != kindData && r.kind != kindClip) || int(ndim) != l.ndim || r.paylen < 0 ||
		int64(r.nblocks) != l.blocksFor(r.paylen) {
		return r, fmt.Errorf("bad record: kind %d, ndim %d, %d blocks, payload %d bytes: %w", r.kind, ndim, r.nblocks, r.paylen, pdc.ErrCorrupt)
	}
	r.hdrLen = int64(recFixed + boxBytes(r.kind, l.ndim) + 4*r.nblocks)
	return r, nil
}

// decodeRecBox checks the record CRC over b (the header up to the block
// CRCs) and decodes the box.
func (l *regionLog) decodeRecBox(r *record, b []byte) error {
	n := recFixed + boxBytes(r.kind, l.ndim)
	if got, want := crc32.Checksum(b[4:n], l.sum), binary.LittleEndian.Uint32(b); got != want {
		return fmt.Errorf("record crc %08x, stored %08x: %w", got, want, pdc.ErrCorrupt)
	}
	r.box = region.Box{Off: make([]uint64, l.ndim), Size: make([]uint64, l.ndim)}
	p := recFixed
	if r.kind == kindData {
		for i := range r.box.Off {
			r.box.Off[i] = binary.LittleEndian.Uint64(b[p:])
			p += 8
		}
	}
	for i := range r.box.Size {
		r.box.Size[i] = binary.LittleEndian.Uint64(b[p:])
		p += 8
	}
	if err := r.box.Check(); err != nil {
		return fmt.Errorf("record box: %v: %w", err, pdc.ErrCorrupt)
	}
	if r.kind == kindData && int64(r.box.Volume())*int64(l.elem) != r.paylen {
		return fmt.Errorf("record box %v holds %d elements of %d bytes, payload %d bytes: %w",
			r.box, r.box.Volume(), l.elem, r.paylen, pdc.ErrCorrupt)
	}
	return nil
}

// readRecord reads and checks the record header at off, which must end
// by limit.
func (l *regionLog) readRecord(f vfs.File, off, limit int64) (record, []uint32, error) {
	var fixed [recFixed]byte
	if off+recFixed > limit {
		return record{}, nil, fmt.Errorf("record at %d cut short: %w", off, pdc.ErrCorrupt)
	}
	if _, err := f.ReadAt(fixed[:], off); err != nil {
		return record{}, nil, err
	}
	r, err := l.decodeRecFixed(fixed[:])
	if err != nil {
		return r, nil, fmt.Errorf("record at %d: %w", off, err)
	}
	r.pad = l.payloadAt(off+r.hdrLen, r.paylen) - off - r.hdrLen
	if off+r.len() > limit || off+r.len() < off {
		return r, nil, fmt.Errorf("record at %d of %d bytes runs past the log's %d: %w", off, r.len(), limit, pdc.ErrCorrupt)
	}
	hdr := make([]byte, r.hdrLen)
	if _, err := f.ReadAt(hdr, off); err != nil {
		return r, nil, err
	}
	if err := l.decodeRecBox(&r, hdr); err != nil {
		return r, nil, fmt.Errorf("record at %d: %w", off, err)
	}
	return r, decodeCRCs(hdr[recFixed+boxBytes(r.kind, l.ndim):]), nil
}

func (l *regionLog) newPiece(r record, off int64, crcs []uint32) *piece {
	base := off + r.hdrLen + r.pad
	a := area{sum: l.sum, base: base, size: r.paylen, skew: l.skewAt(base), crcAt: off + r.hdrLen - 4*int64(r.nblocks), crcs: newCRCTable(crcs)}
	if l.pagedBlocks() {
		a.pend = &l.pend
	}
	return &piece{box: r.box, live: r.box.Clone(), seq: r.seq, rec: off, len: r.len(), area: a}
}

// overlaps is Intersect without the allocation.
func overlaps(a, b region.Box) bool {
	for i := range a.Size {
		if a.Off[i] >= b.End(i) || b.Off[i] >= a.End(i) {
			return false
		}
	}
	return true
}

// candidates are the pieces whose live box overlaps box.
func (l *regionLog) candidates(box region.Box) []*piece {
	lo := uint64(0)
	if box.Off[0] >= l.maxLen0 {
		lo = box.Off[0] - l.maxLen0 + 1
	}
	i, _ := slices.BinarySearchFunc(l.pieces, lo, func(p *piece, v uint64) int {
		if p.live.Off[0] < v {
			return -1
		}
		return 1
	})
	var out []*piece
	for ; i < len(l.pieces) && l.pieces[i].live.Off[0] < box.End(0); i++ {
		if overlaps(l.pieces[i].live, box) {
			out = append(out, l.pieces[i])
		}
	}
	return out
}

// add puts a new piece in the index and drops the pieces it hides
// wholly: they can never be read again, and leaving them would slow every
// read over them.
func (l *regionLog) add(p *piece) {
	for _, q := range l.candidates(p.live) {
		if p.live.Contains(q.live) {
			l.remove(q)
		}
	}
	i, _ := slices.BinarySearchFunc(l.pieces, p.live.Off[0], func(q *piece, v uint64) int {
		if q.live.Off[0] <= v {
			return -1
		}
		return 1
	})
	l.pieces = slices.Insert(l.pieces, i, p)
	l.maxLen0 = max(l.maxLen0, p.live.Size[0])
	l.seq = max(l.seq, p.seq)
	for i := range l.ends {
		l.ends[i] = max(l.ends[i], p.live.End(i))
	}
}

func (l *regionLog) remove(q *piece) {
	if i := slices.Index(l.pieces, q); i >= 0 {
		l.pieces = slices.Delete(l.pieces, i, i+1)
		l.dead += q.len
	}
}

// clip keeps of every piece only its part inside dims. Offsets do not
// change, so the order holds.
func (l *regionLog) clip(dims []uint64) {
	shape := region.Shape(dims...)
	kept := l.pieces[:0]
	for _, p := range l.pieces {
		if shape.Contains(p.live) {
			kept = append(kept, p)
			continue
		}
		in, ok := region.Intersect(p.live, shape)
		if !ok {
			l.dead += p.len
			continue
		}
		p.live = in
		kept = append(kept, p)
	}
	clear(l.pieces[len(kept):])
	l.pieces = kept
	l.scanEnds()
}

// scanEnds sets ends from the pieces.
func (l *regionLog) scanEnds() {
	ends := make([]uint64, l.ndim)
	for _, p := range l.pieces {
		for i := range ends {
			ends[i] = max(ends[i], p.live.End(i))
		}
	}
	l.ends = ends
}

// outside reports whether some piece reaches outside dims. It is asked on
// every call, under the object's read lock by readers: it changes
// nothing.
func (l *regionLog) outside(dims []uint64) bool {
	return endsPast(l.ends, dims)
}

func endsPast(ends, dims []uint64) bool {
	for i, e := range ends {
		if e > dims[i] {
			return true
		}
	}
	return false
}

// appendRecord writes a record at the end of the log: payload and block
// CRCs first, the fixed part (the commit point) last.
func (l *regionLog) appendRecord(f vfs.File, kind byte, box region.Box, data []byte) (*piece, error) {
	return l.appendRecordFrom(f, kind, box, int64(len(data)), ioChunk, func(pos, n int64) ([]byte, error) {
		return data[pos : pos+n], nil
	})
}

// appendRecordFrom is appendRecord of n bytes that next gives a chunk of
// at most chunk bytes (a multiple of blockSize) at a time.
func (l *regionLog) appendRecordFrom(f vfs.File, kind byte, box region.Box, n, chunk int64, next func(pos, n int64) ([]byte, error)) (*piece, error) {
	seq := l.seq + 1
	nb := l.blocksFor(n)
	hdrLen := int64(recFixed+boxBytes(kind, box.Ndim())) + 4*nb
	off := l.size
	base := l.payloadAt(off+hdrLen, n)
	// Checksum each chunk right after copying it, while it is in cache.
	sums := newBlockSums(l.sum, l.skewAt(base), n)
	for pos := int64(0); pos < n; pos += chunk {
		b, err := next(pos, min(chunk, n-pos))
		if err != nil {
			return nil, err
		}
		if _, err := f.WriteAt(b, base+pos); err != nil {
			return nil, err
		}
		sums.add(b)
	}
	crcs := sums.done()
	for int64(len(crcs)) < nb {
		crcs = append(crcs, 0)
	}
	hdr := encodeRecHeader(l.sum, kind, seq, box, n, crcs)
	if _, err := f.WriteAt(hdr[4:], off+4); err != nil {
		return nil, err
	}
	if _, err := f.WriteAt(hdr[:4], off); err != nil {
		return nil, err
	}
	l.size = base + n
	l.seq = seq
	r := record{kind: kind, seq: seq, box: box.Clone(), paylen: n, nblocks: len(crcs), hdrLen: int64(len(hdr)), pad: base - off - int64(len(hdr))}
	return l.newPiece(r, off, crcs), nil
}

// write stores data as box: in place when box lies inside one piece that
// nothing newer overlaps there, or when each of its rows does (slabs),
// else as a new record.
func (l *regionLog) write(f vfs.File, box region.Box, data []byte) error {
	if host := l.host(box); host != nil {
		return host.area.write(f, runSegs(host.box, box, l.elem, data))
	}
	if ss := l.slabs(box); ss != nil {
		row := int(box.Volume()/box.Size[0]) * l.elem
		for _, s := range ss {
			n := int(s.box.Size[0]) * row
			if err := s.host.area.write(f, runSegs(s.host.box, s.box, l.elem, data[:n])); err != nil {
				return err
			}
			data = data[n:]
		}
		return nil
	}
	p, err := l.appendRecord(f, kindData, box, data)
	if err != nil {
		return err
	}
	l.add(p)
	return nil
}

// writeFrom is write of n bytes read from r through buf (see
// Store.WriteFrom).
func (l *regionLog) writeFrom(f vfs.File, box region.Box, n int64, r io.Reader, buf []byte) error {
	if host := l.host(box); host != nil {
		_, err := host.area.writeRunsFrom(f, host.box, box, l.elem, r, buf)
		return err
	}
	if ss := l.slabs(box); ss != nil {
		for _, s := range ss {
			if _, err := s.host.area.writeRunsFrom(f, s.host.box, s.box, l.elem, r, buf); err != nil {
				return err
			}
		}
		return nil
	}
	p, err := l.appendRecordFrom(f, kindData, box, n, int64(len(buf)), func(_, n int64) ([]byte, error) {
		b := buf[:n]
		_, err := io.ReadFull(r, b)
		return b, err
	})
	if err != nil {
		return err
	}
	l.add(p)
	return nil
}

// host is the piece a write of box goes into in place: the newest that
// holds all of box, if nothing newer overlaps box; nil if none, or if the
// log cannot be written in place safely (before version 3).
func (l *regionLog) host(box region.Box) *piece {
	if !l.pagedBlocks() {
		return nil
	}
	cands := l.candidates(box)
	var host *piece
	for _, p := range cands {
		if p.live.Contains(box) && (host == nil || p.seq > host.seq) {
			host = p
		}
	}
	for _, p := range cands {
		if host != nil && p.seq > host.seq {
			return nil
		}
	}
	return host
}

// slab is a part of a write that goes in place into host.
type slab struct {
	host *piece
	box  region.Box
}

// slabs splits a write of box that no one piece holds along its first
// dim, into slabs that each go in place into one piece (see host), in
// order; nil if some part has no such piece. The data server stores a run
// of adjacent regions of one request as one write, and the run's bounds
// change with how the client's requests fall: without this, writing the
// same regions again appended them all, growing the log by the whole
// object every round. A slab along the first dim is a run of whole rows,
// so its bytes are the next ones of the write's row-major bytes.
func (l *regionLog) slabs(box region.Box) []slab {
	if box.Size[0] < 2 || !l.pagedBlocks() {
		return nil // one row: host has said no
	}
	var out []slab
	off, end := box.Off[0], box.End(0)
	for off < end {
		sub := box.Clone()
		sub.Off[0], sub.Size[0] = off, 1
		h := l.host(sub)
		if h == nil {
			return nil
		}
		stop := min(end, h.live.End(0))
		sub.Size[0] = stop - off
		// A newer piece over part of the rows below: not in place.
		if stop-off > 1 && l.host(sub) != h {
			return nil
		}
		out = append(out, slab{host: h, box: sub})
		off = stop
	}
	return out
}

// setDims records a shrink of the dims that hides stored data.
func (l *regionLog) setDims(f vfs.File, dims []uint64) error {
	if !l.outside(dims) {
		return nil
	}
	if _, err := l.appendRecord(f, kindClip, region.Shape(dims...), nil); err != nil {
		return err
	}
	l.clip(dims)
	return nil
}

// read fills into with box: fragments from the newest pieces holding
// them, zeros for the rest.
func (l *regionLog) read(f vfs.File, box region.Box, into []byte) error {
	cands := l.candidates(box)
	pcs := make([]overlay.Piece, len(cands))
	for i, p := range cands {
		pcs[i] = overlay.Piece{Box: p.live, Seq: p.seq}
	}
	frags, holes := overlay.Resolve(box, pcs)
	e := uint64(l.elem)
	for _, h := range holes {
		region.Runs(box, h, func(r region.Run) bool {
			clear(into[r.Off*e : (r.Off+r.Len)*e])
			return true
		})
	}
	for _, fr := range frags {
		p := cands[fr.Piece]
		if err := p.area.read(f, fragmentSegs(p.box, box, fr.Box, l.elem, into)); err != nil {
			return fmt.Errorf("piece %v (seq %d): %w", p.box, p.seq, err)
		}
	}
	return nil
}

// fragmentSegs pairs the runs of sub in a piece's payload (src) with its
// runs in the read's buffer (dst).
func fragmentSegs(src, dst, sub region.Box, elem int, into []byte) []seg {
	runs := fragmentRuns(src, dst, sub, elem)
	segs := make([]seg, len(runs))
	for i, r := range runs {
		segs[i] = seg{off: r.src, buf: into[r.dst : r.dst+r.n]}
	}
	return segs
}

// fragRun is one run of a fragment: n bytes at byte src of the piece's
// payload and at byte dst of the read's box.
type fragRun struct{ src, dst, n int64 }

// fragmentRuns pairs the runs of sub in a piece's payload (src) with its
// runs in the read's box (dst): both walk sub row-major, cut in different
// places.
func fragmentRuns(src, dst, sub region.Box, elem int) []fragRun {
	var sr, dr []region.Run
	region.Runs(src, sub, func(r region.Run) bool { sr = append(sr, r); return true })
	region.Runs(dst, sub, func(r region.Run) bool { dr = append(dr, r); return true })
	e := int64(elem)
	var out []fragRun
	for len(sr) > 0 && len(dr) > 0 {
		n := min(sr[0].Len, dr[0].Len)
		out = append(out, fragRun{src: int64(sr[0].Off) * e, dst: int64(dr[0].Off) * e, n: int64(n) * e})
		sr[0].Off, sr[0].Len = sr[0].Off+n, sr[0].Len-n
		dr[0].Off, dr[0].Len = dr[0].Off+n, dr[0].Len-n
		if sr[0].Len == 0 {
			sr = sr[1:]
		}
		if dr[0].Len == 0 {
			dr = dr[1:]
		}
	}
	return out
}
