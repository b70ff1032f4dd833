package metaserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
)

// The store's own write-ahead log. Pebble's log is written by a goroutine
// of its own, and a commit that waits for it pays two hand-offs between
// threads, which on a small machine cost several times the commit itself.
// This log is a file mapped into memory (MAP_SHARED) and written by the
// committing goroutine with a copy: the bytes are in the kernel's page cache
// as they are stored, with no system call, so a change survives the death
// of the process once commit returns; in sync mode the file is then
// fsynced, concurrent committers sharing one fsync (group commit). Pebble
// runs without its own log; the log is replayed into it at open and
// truncated once pebble has flushed what it holds.
//
// File: the header walMagic, then records: u32 length, u32 CRC-32C of the
// payload, payload (a pebble batch), then zeros to the end of the mapping.
// A zero length, or a torn or corrupt record, ends the replay; nothing
// after it was acknowledged.

const walMagic = "PDCWAL1\n"

const walFile = "pdc.wal"

// walRotateBytes is the log size at which pebble is flushed and the log
// truncated.
var walRotateBytes int64 = 64 << 20

type wal struct {
	path string
	sync bool

	mu   sync.Mutex // held while a record is written and applied, in order
	f    *os.File   // guarded by mu
	m    []byte     // the file, mapped; guarded by mu
	size int64      // bytes used in the current file; guarded by mu

	written atomic.Int64 // logical bytes written over all files

	syncMu  sync.Mutex
	cond    *sync.Cond
	synced  int64 // logical bytes known durable; guarded by syncMu
	syncing bool  // a goroutine is in fsync; guarded by syncMu
	err     error // a failed fsync fails every later wait; guarded by syncMu
}

// openWAL opens the log in dir for appending and returns the records it
// holds, to be replayed.
func openWAL(dir string, syncMode bool) (*wal, [][]byte, error) {
	w := &wal{path: filepath.Join(dir, walFile), sync: syncMode}
	w.cond = sync.NewCond(&w.syncMu)
	recs, err := readWAL(w.path)
	if err != nil {
		return nil, nil, err
	}
	return w, recs, nil
}

// readWAL returns the intact records of the log at path.
func readWAL(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read metadata log: %w", err)
	}
	return parseWAL(path, data)
}

// parseWAL returns the intact records of a log's bytes (which they alias),
// up to the first zero length, torn or corrupt record.
func parseWAL(path string, data []byte) ([][]byte, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if !bytes.HasPrefix(data, []byte(walMagic)) {
		if len(data) < len(walMagic) && bytes.HasPrefix([]byte(walMagic), data) {
			return nil, nil // torn while the header was written
		}
		return nil, fmt.Errorf("metadata log %s: not a pdc log or an unknown version (header %q): %w", path, data[:min(len(data), 8)], pdc.ErrVersion)
	}
	var recs [][]byte
	p := data[len(walMagic):]
	for len(p) >= 8 {
		n := binary.LittleEndian.Uint32(p)
		sum := binary.LittleEndian.Uint32(p[4:])
		if n == 0 || uint64(n) > uint64(len(p)-8) {
			break // the unused, zeroed end of the mapping, or a torn tail
		}
		rec := p[8 : 8+n]
		if crc32.Checksum(rec, castagnoli) != sum {
			break // torn or corrupt tail
		}
		recs = append(recs, rec)
		p = p[8+n:]
	}
	return recs, nil
}

// replayRecord applies one record of the log (a pebble batch) to db.
func replayRecord(db *pebble.DB, rec []byte) error {
	if err := checkBatch(rec); err != nil {
		return err
	}
	b := db.NewBatch()
	if err := b.SetRepr(append([]byte(nil), rec...)); err != nil {
		return err
	}
	return db.Apply(b, pebble.NoSync)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch record kinds this store writes (pebble's InternalKeyKind values).
const (
	batchDelete       = 0
	batchSet          = 1
	batchSingleDelete = 7
	batchDeleteRange  = 15
)

// checkBatch checks that rec is a pebble batch of the kinds this store
// writes, each key and value within rec, and as many as its header
// counts. Pebble decodes a batch without bounds checks (it panics, or
// reads past the slice, on a malformed one), and a record can pass its
// CRC and still be malformed if whatever wrote it was wrong: that must
// stop the server with an error naming the log, not a crash at every
// start.
func checkBatch(rec []byte) error {
	const headerLen = 12
	if len(rec) < headerLen {
		return fmt.Errorf("batch of %d bytes, shorter than its header: %w", len(rec), pdc.ErrCorrupt)
	}
	count := binary.LittleEndian.Uint32(rec[8:])
	p := rec[headerLen:]
	str := func() bool {
		// Pebble reads at most 5 bytes of length; a longer varint would
		// put it out of step with this check.
		n, k := binary.Uvarint(p)
		if k <= 0 || k > binary.MaxVarintLen32 || n > uint64(len(p)-k) {
			return false
		}
		p = p[k+int(n):]
		return true
	}
	var got uint32
	for len(p) > 0 {
		kind := p[0]
		p = p[1:]
		switch kind {
		case batchDelete, batchSingleDelete:
			if !str() {
				return fmt.Errorf("batch entry %d: key runs past the record: %w", got, pdc.ErrCorrupt)
			}
		case batchSet, batchDeleteRange:
			key := str()
			if !key || !str() {
				return fmt.Errorf("batch entry %d: key or value runs past the record: %w", got, pdc.ErrCorrupt)
			}
		default:
			return fmt.Errorf("batch entry %d of kind %d, which this store never writes: %w", got, kind, pdc.ErrCorrupt)
		}
		got++
	}
	if got != count {
		return fmt.Errorf("batch of %d entries, header says %d: %w", got, count, pdc.ErrCorrupt)
	}
	return nil
}

// reset starts an empty log, crash-safely: a new file with only the header
// (and room for at least minRoom bytes of records) replaces the old one.
// Call it once everything logged is durable in pebble. The caller holds mu
// (or is the only user).
func (w *wal) reset(minRoom int) error {
	dir := filepath.Dir(w.path)
	capacity := max(walRotateBytes, int64(minRoom)+8) + int64(len(walMagic))
	tmp := w.path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("metadata log: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		return fmt.Errorf("metadata log: %w", err)
	}
	if _, err := f.WriteString(walMagic); err != nil {
		return fail(err)
	}
	// Allocate the blocks now: a store into a mapped hole that the disk
	// cannot back would kill the process instead of failing a commit.
	if err := unix.Fallocate(int(f.Fd()), 0, 0, capacity); err != nil {
		if err := f.Truncate(capacity); err != nil {
			return fail(err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	// Map before the rename: once the new file replaces the old one, the
	// log must be writable, or later commits would go to an unlinked file.
	m, err := unix.Mmap(int(f.Fd()), 0, int(capacity), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, w.path); err != nil {
		_ = unix.Munmap(m)
		return fail(err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		// The rename may not be durable yet, but the new file is the one
		// linked now: go on with it, and report.
		w.unmap()
		w.f, w.m, w.size = f, m, int64(len(walMagic))
		return err
	}
	w.unmap()
	w.f, w.m, w.size = f, m, int64(len(walMagic))
	// Everything before is durable in pebble.
	w.syncMu.Lock()
	w.synced = w.written.Load()
	w.syncMu.Unlock()
	return nil
}

func (w *wal) unmap() {
	if w.m != nil {
		_ = unix.Munmap(w.m)
		w.m = nil
	}
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}

// room reports whether a record of n bytes fits. The caller holds mu.
func (w *wal) room(n int) bool { return w.size+8+int64(n) <= int64(len(w.m)) }

// append copies one record into the mapping; the caller holds mu and has
// checked room. It returns the logical offset the record ends at.
func (w *wal) append(rec []byte) int64 {
	p := w.m[w.size:]
	copy(p[8:], rec)
	binary.LittleEndian.PutUint32(p[4:], crc32.Checksum(rec, castagnoli))
	binary.LittleEndian.PutUint32(p, uint32(len(rec)))
	w.size += 8 + int64(len(rec))
	return w.written.Add(8 + int64(len(rec)))
}

// waitSynced returns once the log is durable up to off. The first waiter
// fsyncs for all who are waiting (group commit).
func (w *wal) waitSynced(off int64) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	for w.synced < off && w.err == nil {
		if w.syncing {
			w.cond.Wait()
			continue
		}
		w.syncing = true
		target := w.written.Load()
		w.syncMu.Unlock()
		w.mu.Lock()
		f := w.f
		w.mu.Unlock()
		// fdatasync writes back the mapping's dirty pages too.
		err := os.ErrClosed
		if f != nil {
			err = f.Sync()
		}
		w.syncMu.Lock()
		w.syncing = false
		if err != nil && !errors.Is(err, os.ErrClosed) {
			w.err = fmt.Errorf("fsync metadata log: %w", err)
		} else if target > w.synced {
			w.synced = target
		}
		w.cond.Broadcast()
	}
	if w.synced >= off {
		// Durable before a later sync failed: the record of a change is
		// dropped only if it may not be (commitChanges), and dropping a
		// durable one would deliver it at the next start after newer ones.
		return nil
	}
	return w.err
}

func (w *wal) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unmap()
	return nil
}
