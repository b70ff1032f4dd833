package postings

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sort"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pdcgo/pdc"
)

// runVersion is the format version of a run's blocks and description.
const runVersion = 1

const metaBlock = 0xffffffff

// diskRun describes a run on disk: its blocks hold its records in key
// order, each block starting with the key first[i].
type diskRun struct {
	id    uint64
	age   uint64
	level int
	count int
	first [][]byte
	last  []byte // the last key
}

// overlaps reports whether r may hold keys in [lo, hi) (nil hi: no end).
func (r *diskRun) overlaps(lo, hi []byte) bool {
	if len(r.first) == 0 {
		return false
	}
	return bytes.Compare(r.last, lo) >= 0 && (hi == nil || bytes.Compare(r.first[0], hi) < 0)
}

func (s *Store) runKey(id uint64, block uint32) []byte {
	k := binary.BigEndian.AppendUint64([]byte{s.runP}, id)
	return binary.BigEndian.AppendUint32(k, block)
}

func (s *Store) logKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{s.logP}, seq)
}

func (r *diskRun) marshal() []byte {
	b := []byte{runVersion}
	b = binary.BigEndian.AppendUint64(b, r.age)
	b = append(b, byte(r.level))
	b = binary.AppendUvarint(b, uint64(r.count))
	b = binary.AppendUvarint(b, uint64(len(r.first)))
	for _, k := range r.first {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	b = binary.AppendUvarint(b, uint64(len(r.last)))
	return append(b, r.last...)
}

func parseRunMeta(id uint64, b []byte) (*diskRun, error) {
	bad := func() (*diskRun, error) {
		return nil, fmt.Errorf("index run %d: malformed description: %w", id, pdc.ErrInvalid)
	}
	if len(b) < 1+8+1 {
		return bad()
	}
	if b[0] != runVersion {
		return nil, fmt.Errorf("index run %d has version %d; this build reads version %d: %w", id, b[0], runVersion, pdc.ErrVersion)
	}
	r := &diskRun{id: id, age: binary.BigEndian.Uint64(b[1:]), level: int(b[9])}
	b = b[10:]
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return bad()
	}
	b = b[n:]
	blocks, n := binary.Uvarint(b)
	if n <= 0 || blocks > uint64(len(b)) {
		return bad()
	}
	b = b[n:]
	r.count = int(count)
	for range blocks {
		kl, n := binary.Uvarint(b)
		if n <= 0 || kl > uint64(len(b)-n) {
			return bad()
		}
		r.first = append(r.first, bytes.Clone(b[n:n+int(kl)]))
		b = b[n+int(kl):]
	}
	kl, n := binary.Uvarint(b)
	if n <= 0 || kl != uint64(len(b)-n) {
		return bad()
	}
	r.last = bytes.Clone(b[n:])
	return r, nil
}

// getter reads blocks: the store itself, or a snapshot of it.
type getter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

type diskCursor struct {
	s   *Store
	g   getter
	r   *diskRun
	hi  []byte
	blk int
	buf []byte
	off int

	k, v, raw []byte
	del       bool
}

func (s *Store) newDiskCursor(g getter, r *diskRun, lo, hi []byte) (*diskCursor, error) {
	c := &diskCursor{s: s, g: g, r: r, hi: hi}
	// The last block starting at or before lo holds it, if any does.
	c.blk = max(sort.Search(len(r.first), func(i int) bool { return bytes.Compare(r.first[i], lo) > 0 })-1, 0)
	if err := c.load(); err != nil {
		return nil, err
	}
	for {
		if err := c.next(); err != nil {
			return nil, err
		}
		if !c.valid() || bytes.Compare(c.k, lo) >= 0 {
			return c, nil
		}
	}
}

func (c *diskCursor) load() error {
	c.buf, c.off = nil, 0
	if c.blk >= len(c.r.first) {
		return nil
	}
	v, closer, err := c.g.Get(c.s.runKey(c.r.id, uint32(c.blk)))
	if err != nil {
		return fmt.Errorf("index run %d block %d: %w", c.r.id, c.blk, err)
	}
	c.buf = bytes.Clone(v)
	closer.Close()
	if len(c.buf) == 0 || c.buf[0] != runVersion {
		return fmt.Errorf("index run %d block %d: unknown version: %w", c.r.id, c.blk, pdc.ErrVersion)
	}
	c.off = 1
	return nil
}

func (c *diskCursor) valid() bool { return c.k != nil }
func (c *diskCursor) age() uint64 { return c.r.age }
func (c *diskCursor) rec() (k, v []byte, del bool, raw []byte) {
	return c.k, c.v, c.del, c.raw
}

func (c *diskCursor) next() error {
	c.k = nil
	for c.buf != nil && c.off >= len(c.buf) {
		c.blk++
		if err := c.load(); err != nil {
			return err
		}
	}
	if c.buf == nil {
		return nil
	}
	k, v, del, end, ok := readRec(c.buf, c.off)
	if !ok {
		return fmt.Errorf("index run %d block %d: %w at byte %d", c.r.id, c.blk, errRecord, c.off)
	}
	raw := c.buf[c.off:end]
	c.off = end
	if c.hi != nil && bytes.Compare(k, c.hi) >= 0 {
		c.buf = nil
		return nil
	}
	c.k, c.v, c.del, c.raw = k, v, del, raw
	return nil
}

// runWriter writes a run's blocks, committing them in batches of about
// chunkBytes: they are invisible until the batch with the run's
// description commits (and dropped at Open if it never does).
type runWriter struct {
	s     *Store
	r     *diskRun
	b     *pebble.Batch
	block []byte
}

const chunkBytes = 4 << 20

// chunk is how many bytes of blocks go in one commit: chunkBytes, or less
// for a store that flushes less than four times as much.
func (s *Store) chunk() int { return max(s.opt.BlockBytes, min(chunkBytes, s.opt.FlushBytes/4)) }

func (s *Store) newRunWriter(id uint64, level int, age uint64) *runWriter {
	return &runWriter{s: s, r: &diskRun{id: id, age: age, level: level}, b: s.db.NewBatch()}
}

// drop deletes the blocks of an unfinished run that reached the store,
// best effort: Open drops any left.
func (w *runWriter) drop() {
	b := w.s.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange(w.s.runKey(w.r.id, 0), w.s.runKey(w.r.id+1, 0), nil)
	_ = w.s.commitWait(b)
}

func (w *runWriter) add(k, raw []byte) error {
	if len(w.block) == 0 {
		w.block = append(w.block, runVersion)
		w.r.first = append(w.r.first, bytes.Clone(k))
	}
	w.block = append(w.block, raw...)
	w.r.last = append(w.r.last[:0], k...)
	w.r.count++
	if len(w.block) >= w.s.opt.BlockBytes {
		return w.endBlock()
	}
	return nil
}

func (w *runWriter) endBlock() error {
	if len(w.block) == 0 {
		return nil
	}
	_ = w.b.Set(w.s.runKey(w.r.id, uint32(len(w.r.first)-1)), w.block, nil)
	w.block = w.block[:0]
	if w.b.Len() < w.s.chunk() {
		return nil
	}
	err := w.s.commitWait(w.b)
	w.b.Close()
	w.b = w.s.db.NewBatch()
	return err
}

// finish writes the last blocks and returns the batch to commit the run
// with: its description is in it.
func (w *runWriter) finish() (*pebble.Batch, error) {
	if err := w.endBlock(); err != nil {
		w.b.Close()
		return nil, err
	}
	if w.r.count > 0 {
		_ = w.b.Set(w.s.runKey(w.r.id, metaBlock), w.r.marshal(), nil)
	}
	return w.b, nil
}
