package regionstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// createRegionLog makes an empty log.
func createRegionLog(fsys vfs.FS, path string, elem, ndim int, dimsVersion uint64, durable bool) (*regionLog, error) {
	version := newRegVersion
	hdr := make([]byte, regHeaderLen(version))
	copy(hdr, encodeRegHeader(version, elem, ndim))
	var mark dimsMark
	if version >= 3 {
		mark = newMark(markAt, dimsVersion)
		mark.put(hdr)
	}
	err := replaceFile(fsys, path, durable, func(f vfs.File) error {
		_, err := f.Write(hdr)
		return err
	})
	if err != nil {
		return nil, err
	}
	l := &regionLog{fs: fsys, version: version, hdrLen: int64(len(hdr)), sum: sumTable(version), path: path, idxPath: idxPathOf(path), elem: elem, ndim: ndim, size: int64(len(hdr)),
		ends: make([]uint64, ndim), mark: mark}
	if l.pagedBlocks() {
		l.pend.at = pendAt
	}
	return l, nil
}

func idxPathOf(logPath string) string { return logPath[:len(logPath)-len(".reg")] + ".idx" }

// loadRegionLog reads the checkpoint, replays the log after it and cuts
// off a torn tail.
func loadRegionLog(fsys vfs.FS, path string, f vfs.File, durable bool) (*regionLog, error) {
	hdr := make([]byte, regHeaderSize)
	if _, err := f.ReadAt(hdr, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	version, elem, ndim, err := decodeRegHeader(path, hdr)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	l := &regionLog{fs: fsys, version: version, hdrLen: regHeaderLen(version), sum: sumTable(version), path: path, idxPath: idxPathOf(path), elem: elem, ndim: ndim}
	if l.pagedBlocks() {
		l.pend.at = pendAt
		if l.mark, err = loadMark(f, markAt); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		// Before anything reads the records' CRC tables.
		if _, err := recoverPending(f, l.pend.at, l.sum); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	start := l.hdrLen
	if at, ok := l.loadCheckpoint(f, st.Size()); ok {
		start = at
		l.checkpointed = at
	} else {
		l.pieces, l.maxLen0, l.seq, l.dead = nil, 0, 0, 0
	}
	end, err := l.replay(f, start, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	l.scanEnds()
	l.size = end
	if end < st.Size() {
		if err := f.Truncate(end); err != nil {
			return nil, fmt.Errorf("%s: cut torn tail at %d: %w", path, end, err)
		}
		if durable {
			if err := f.Sync(); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	return l, nil
}

// replay applies the records from off to the end of the log and returns
// where the intact log ends.
func (l *regionLog) replay(f vfs.File, off, size int64) (int64, error) {
	for off < size {
		r, crcs, err := l.readRecord(f, off, size)
		if err != nil {
			if errors.Is(err, pdc.ErrCorrupt) {
				return off, nil // a torn tail
			}
			return off, err
		}
		if r.seq <= l.seq {
			return off, nil // left over from a log cut shorter before
		}
		if r.kind == kindClip {
			l.seq = r.seq
			l.clip(r.box.Size)
			off += r.len()
			continue
		}
		p := l.newPiece(r, off, crcs)
		if off+r.len() == size {
			// The last record may be torn under a valid header after
			// power loss: keep it only if its payload is whole.
			if err := p.area.read(f, []seg{{off: 0, buf: make([]byte, r.paylen)}}); err != nil {
				if errors.Is(err, pdc.ErrCorrupt) {
					return off, nil
				}
				return off, err
			}
		}
		l.add(p)
		off += r.len()
	}
	return off, nil
}

// loadCheckpoint loads the index from the .idx file if it is intact and
// covers no more log than there is; it returns the log length it covers.
func (l *regionLog) loadCheckpoint(f vfs.File, logSize int64) (int64, bool) {
	b, err := vfs.ReadFile(l.fs, l.idxPath)
	if err != nil || len(b) < 52 || string(b[:8]) != idxMagic {
		return 0, false
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) ||
		binary.LittleEndian.Uint32(b[8:]) != idxVersion ||
		int(binary.LittleEndian.Uint32(b[12:])) != l.elem || int(binary.LittleEndian.Uint32(b[16:])) != l.ndim {
		return 0, false
	}
	covers := int64(binary.LittleEndian.Uint64(b[24:]))
	seq := binary.LittleEndian.Uint64(b[32:])
	count := binary.LittleEndian.Uint64(b[40:])
	per := uint64(8 + 16*l.ndim)
	if covers < l.hdrLen || covers > logSize || count > uint64(len(body)-48)/per || uint64(len(body)-48) != count*per {
		return 0, false
	}
	l.seq = seq
	p := 48
	for range count {
		rec := int64(binary.LittleEndian.Uint64(b[p:]))
		p += 8
		live := region.Box{Off: make([]uint64, l.ndim), Size: make([]uint64, l.ndim)}
		for i := range live.Off {
			live.Off[i] = binary.LittleEndian.Uint64(b[p:])
			p += 8
		}
		for i := range live.Size {
			live.Size[i] = binary.LittleEndian.Uint64(b[p:])
			p += 8
		}
		r, crcs, err := l.readRecord(f, rec, covers)
		if err != nil || r.kind != kindData || !r.box.Contains(live) {
			return 0, false
		}
		pc := l.newPiece(r, rec, crcs)
		pc.live = live
		l.add(pc)
	}
	l.dead = 0 // not known without a scan; compaction starts counting afresh
	return covers, true
}

// checkpoint writes the index for all of the log. When durable it
// fsyncs the log first, so the index never names records a power failure
// could lose, and the index itself. The periodic checkpoints of a store
// without Options.Sync are not durable: fsyncing 64 MiB of log on a write
// path that promised only to survive a process crash would stall it, and
// an index that names lost records is refused on open (the log is then
// scanned whole).
func (l *regionLog) checkpoint(f vfs.File, durable bool) error {
	// Every write the pending slot could name is whole, CRCs and all.
	if err := l.pend.clear(f); err != nil {
		return err
	}
	if durable {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if l.checkpointed == l.size {
		return nil
	}
	b := make([]byte, 0, 52+len(l.pieces)*(8+16*l.ndim))
	b = append(b, idxMagic...)
	b = binary.LittleEndian.AppendUint32(b, idxVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(l.elem))
	b = binary.LittleEndian.AppendUint32(b, uint32(l.ndim))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(l.size))
	b = binary.LittleEndian.AppendUint64(b, l.seq)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(l.pieces)))
	for _, p := range l.pieces {
		b = binary.LittleEndian.AppendUint64(b, uint64(p.rec))
		for _, v := range p.live.Off {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		for _, v := range p.live.Size {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	err := replaceFile(l.fs, l.idxPath, durable, func(f vfs.File) error {
		_, err := f.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	l.checkpointed = l.size
	return nil
}
