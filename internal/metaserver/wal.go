package metaserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/pdcgo/pdc"
)

// The store's own write-ahead log. Pebble's log is written by a goroutine
// of its own, and a commit that waits for it pays two hand-offs between
// threads, which on a small machine cost several times the commit itself.
// This log is written by the committing goroutine with one write(2), so a
// change is in the kernel when commit returns, and in sync mode it is
// fsynced, concurrent committers sharing one fsync (group commit). Pebble
// runs without its own log; the log is replayed into it at open and
// truncated once pebble has flushed what it holds.
//
// File: the header walMagic, then records: u32 length, u32 CRC-32C of the
// payload, payload (a pebble batch). A torn or corrupt tail, left by a crash
// mid-write, ends the replay; nothing after it was acknowledged.

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
	size int64      // bytes in the current file; guarded by mu

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
		if uint64(n) > uint64(len(p)-8) {
			break // torn tail
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

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// reset starts an empty log, crash-safely: a new file with only the header
// replaces the old one. Call it once everything logged is durable in
// pebble. The caller holds mu (or is the only user).
func (w *wal) reset() error {
	dir := filepath.Dir(w.path)
	tmp := w.path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("metadata log: %w", err)
	}
	if _, err := f.WriteString(walMagic); err != nil {
		f.Close()
		return fmt.Errorf("metadata log: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("metadata log: %w", err)
	}
	if err := os.Rename(tmp, w.path); err != nil {
		f.Close()
		return fmt.Errorf("metadata log: %w", err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return err
	}
	// Appends go to the end; O_APPEND keeps them there.
	f.Close()
	f, err = os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("metadata log: %w", err)
	}
	if w.f != nil {
		w.f.Close()
	}
	w.f, w.size = f, int64(len(walMagic))
	// Everything before is durable in pebble.
	w.syncMu.Lock()
	w.synced = w.written.Load()
	w.syncMu.Unlock()
	return nil
}

// append writes one record; the caller holds mu. It returns the logical
// offset the record ends at.
func (w *wal) append(rec []byte) (int64, error) {
	buf := make([]byte, 8+len(rec))
	binary.LittleEndian.PutUint32(buf, uint32(len(rec)))
	binary.LittleEndian.PutUint32(buf[4:], crc32.Checksum(rec, castagnoli))
	copy(buf[8:], rec)
	n, err := w.f.Write(buf)
	if err != nil {
		if n > 0 {
			// A partial record would end every later replay here: cut it.
			_ = w.f.Truncate(w.size)
		}
		return 0, fmt.Errorf("append to metadata log: %w", err)
	}
	w.size += int64(n)
	return w.written.Add(int64(n)), nil
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
		w.mu.Lock()
		f := w.f
		w.mu.Unlock()
		w.syncMu.Unlock()
		err := f.Sync()
		w.syncMu.Lock()
		w.syncing = false
		if err != nil && !errors.Is(err, os.ErrClosed) {
			w.err = fmt.Errorf("fsync metadata log: %w", err)
		} else if target > w.synced {
			w.synced = target
		}
		w.cond.Broadcast()
	}
	return w.err
}

func (w *wal) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
