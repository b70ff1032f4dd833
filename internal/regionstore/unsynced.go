package regionstore

import (
	"errors"
	"fmt"
	"io"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
)

// rewriteChunk is how much of a file a rewrite copies or checks at once.
const rewriteChunk = 1 << 20

// rewrite replaces the file of o whose fsync failed (fileCache.unsynced)
// with a copy made durable: a new file, fsynced, renamed over it, the
// directory fsynced. Retrying the fsync of the old file could report as
// durable bytes the kernel gave up on; a new file has every byte dirty
// again. The copy holds what the store vouches for, not merely what the
// old file reads now: the header and the CRC tables come from memory,
// and every block the object's reads can reach is checked against its
// CRC, so a page the kernel dropped (which reads as what the disk had)
// fails the rewrite with pdc.ErrCorrupt naming the block, and the file
// stays unsynced, until a write replaces the block or the object is
// deleted. Without a failed fsync it does nothing. Requires o.mu held
// exclusively and the object loaded.
func (s *Store) rewrite(o *object) error {
	if o.mode == 0 || s.files.unsynced(o.off.pathOr(o.reg)) == nil {
		return nil
	}
	return s.rewriteFile(o, "after a failed fsync")
}

// rewriteFile is rewrite, done whatever the file's state (after why): a
// new file, checked, fsynced and renamed into place, and the directory
// fsynced, so that o's name is durable too (o.entrySynced). Requires o.mu
// held exclusively and the object to have files.
func (s *Store) rewriteFile(o *object, why string) error {
	path := o.off.pathOr(o.reg)
	// Every CRC the pending slot names goes to the tables first: the copy
	// starts with an empty slot.
	err := s.withFile(path, func(f vfs.File) error {
		if o.mode == ByOffset {
			return o.off.pend.clear(f)
		}
		return o.reg.pend.clear(f)
	})
	if err != nil {
		return fmt.Errorf("region store: object %d: rewrite %s %s: %w", o.id, path, why, err)
	}
	o.maps.drop() // the rename replaces the file under the mapping
	if err := s.files.drop(path); err != nil {
		return fmt.Errorf("region store: object %d: rewrite %s %s: %w", o.id, path, why, err)
	}
	old, err := s.fs.Open(path)
	if err != nil {
		return fmt.Errorf("region store: object %d: rewrite %s %s: %w", o.id, path, why, err)
	}
	err = replaceFile(s.fs, path, true, func(f vfs.File) error {
		if o.mode == ByOffset {
			return o.off.rewrite(old, f)
		}
		return o.reg.rewrite(old, f)
	})
	_ = old.Close()
	if !replaced(err) {
		return fmt.Errorf("region store: object %d: rewrite %s %s: %w", o.id, path, why, err)
	}
	s.files.clearUnsynced(path)
	o.entrySynced = err == nil
	if o.mode == ByRegion {
		// The next flush writes a durable index of the new file.
		o.reg.checkpointed = 0
	}
	if err != nil {
		return fmt.Errorf("region store: object %d: rewrite %s %s: %w", o.id, path, why, err)
	}
	return nil
}

// copyData copies old's bytes [0, size) into f, leaving holes where old
// has holes or zeros.
func copyData(old, f vfs.File, size int64) error {
	buf := make([]byte, rewriteChunk)
	for off := int64(0); off < size; {
		d, err := nextData(old, off)
		if err != nil {
			return err
		}
		if d < 0 || d >= size {
			break
		}
		b := buf[:min(int64(len(buf)), size-d)]
		n, err := old.ReadAt(b, d)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if n == 0 {
			break
		}
		if !allZero(b[:n]) {
			if _, err := f.WriteAt(b[:n], d); err != nil {
				return err
			}
		}
		off = d + int64(n)
	}
	return f.Truncate(size)
}

// checkArea reads back every block of a from f, checking each against
// its CRC in memory. Stretches of the table that hold no CRC in memory
// are never written and are not read.
func checkArea(f vfs.File, a *area, buf []byte) error {
	if a.size == 0 || a.crcs.n == 0 {
		return nil
	}
	return a.crcs.spans(0, a.crcs.n-1, func(lo, hi int64) error {
		start, end := a.blockStart(lo), a.blockEnd(hi)
		for off := start; off < end; {
			n := min(int64(len(buf)), end-off)
			if err := a.read(f, []seg{{off: off, buf: buf[:n]}}); err != nil {
				return err
			}
			off += n
		}
		return nil
	})
}

// rewrite fills f, a new file, with the by-offset file old and checks it
// (Store.rewrite).
func (o *offsetFile) rewrite(old, f vfs.File) error {
	if err := copyData(old, f, o.area.base+o.dataLen); err != nil {
		return err
	}
	if _, err := f.WriteAt(o.encodeHeader(), 0); err != nil {
		return err
	}
	if err := o.area.writeCRCs(f, 0, o.area.crcs.n-1); err != nil {
		return err
	}
	if err := checkArea(f, &o.area, make([]byte, rewriteChunk)); err != nil {
		return fmt.Errorf("data %w", err)
	}
	return nil
}

// rewrite fills f, a new file, with the by-region log old and checks it
// (Store.rewrite): the header, and every piece's record and payload.
// Records no piece holds any more are copied as they read.
func (l *regionLog) rewrite(old, f vfs.File) error {
	if err := copyData(old, f, l.size); err != nil {
		return err
	}
	hdr := make([]byte, l.hdrLen)
	copy(hdr, encodeRegHeader(l.version, l.elem, l.ndim))
	if l.version >= 3 {
		l.mark.put(hdr)
	}
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return err
	}
	buf := make([]byte, rewriteChunk)
	for _, p := range l.pieces {
		r, _, err := l.readRecord(f, p.rec, l.size)
		if err == nil && (r.seq != p.seq || r.kind != kindData) {
			err = fmt.Errorf("record at %d: seq %d kind %d, want %d of data: %w", p.rec, r.seq, r.kind, p.seq, pdc.ErrCorrupt)
		}
		if err == nil {
			err = p.area.writeCRCs(f, 0, p.area.crcs.n-1)
		}
		if err == nil {
			err = checkArea(f, &p.area, buf)
		}
		if err != nil {
			return fmt.Errorf("region %v: %w", p.box, err)
		}
	}
	return nil
}
