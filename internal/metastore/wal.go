package metastore

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/vfs"
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
// truncated once pebble has flushed what it holds. Where the file cannot be
// mapped (a file system in memory, in tests), each record is written with
// one pwrite instead: the same bytes in the same place.
//
// A store into a mapped page the disk cannot back kills the process
// (SIGBUS), so every block of the file is allocated before it is mapped:
// by fallocate, or by writing zeros where the file system has no
// fallocate. On a disk too full for the whole file, a smaller one is
// taken (down to a minimum), and failing that the commit fails with
// ENOSPC: the server keeps serving reads and takes writes again once space
// is freed. A fault that happens anyway (a file system that allocates on
// write-back, or the file cut by someone else) fails that commit instead
// of the process, and the next commit starts a new file.
//
// File (version 2): a header of walHeaderLen bytes (walMagic, u32 flags,
// the 16-byte boot id of the machine that wrote it, u32 CRC-32C of what
// precedes it), then records: u32 length n, u32 CRC-32C of the next 8+n
// bytes, u64 mark, n bytes of payload (a pebble batch); then zeros to the
// end of the file. Offsets are bytes from the start of the file, which
// holds one run of the log: it is replaced (reset) at open, at rotation
// and after a fault or a failed fsync, each time with everything before
// durable in pebble.
//
// A record's mark is the offset up to which the log was acknowledged as
// durable when the record was written: with sync durability what was
// fsynced, with process durability everything before the record (it was
// in the page cache, which is what process durability rests on). The
// replay ends at the first zero length, torn or corrupt record; the mark
// tells whether that is the tail a crash may leave, to be dropped, or a
// record that was acknowledged and is lost, which must stop the start
// (see parseWALv2).
//
// Version 1 (walMagicV1) had 8-byte record headers without a mark; such a
// log, left by an older pdc, is still replayed, up to its first bad
// record as that version did.

const (
	walMagic   = "PDCWAL2\n"
	walMagicV1 = "PDCWAL1\n"

	walHeaderLen    = 32
	walRecHeaderLen = 16
	walRecHeaderV1  = 8

	// walFlagSync: the file was written with sync durability, so its
	// marks are fsynced offsets.
	walFlagSync = 1
)

const walFile = "pdc.wal"

// walRotateBytes is the log size at which pebble is flushed and the log
// truncated.
var walRotateBytes int64 = 64 << 20

// walMinBytes is the smallest log file taken when the disk has no room
// for one of walRotateBytes.
const walMinBytes = 256 << 10

type wal struct {
	fs   vfs.FS
	path string
	sync bool
	// rotate is the log file's size; 0 is walRotateBytes. Set before
	// the first reset.
	rotate int64

	mu     sync.Mutex // held while a record is written and applied, in order
	f      vfs.File   // nil once closed; guarded by mu
	refuse bool       // commits fail (Store.FailCommits); guarded by mu
	m      []byte     // the file, mapped; nil if written with pwrite; guarded by mu
	cap    int64      // bytes of the file records may use; guarded by mu
	size   int64      // bytes used in the current file; guarded by mu
	broken error      // a store into the mapping faulted: start a new file; guarded by mu
	buf    []byte     // a record with its header, for pwrite; guarded by mu
	// origin is the logical offset of the current file's first byte, and
	// fileSync the durability its header names; guarded by mu.
	origin   int64
	fileSync bool

	written atomic.Int64 // logical bytes written over all files
	// syncFailed is set with err: the next commit starts a new file, once
	// pebble holds everything durably, and clears both.
	syncFailed atomic.Bool

	syncMu sync.Mutex
	cond   *sync.Cond
	// synced is the logical bytes known durable. Changed only under
	// syncMu; read without it for the marks of records, so that a commit
	// takes no second lock.
	synced  atomic.Int64
	syncing bool // a goroutine is in fsync; guarded by syncMu
	// durable is closed when synced moves or err is set, and then
	// replaced, for waiters that may give up (Store.awaitDurable): they
	// select on it with their context, where a cond cannot be. nil while
	// none waits. Guarded by syncMu.
	durable chan struct{}
	// helping says a sync made for such waiters is under way
	// (Store.syncForWaiters); guarded by syncMu.
	helping bool
	// closing says the store is closing: no such sync starts; guarded by
	// syncMu.
	closing bool
	err     error // a failed fsync fails every later wait; guarded by syncMu; set with setErr
	// failing is err != nil, read without syncMu: Store.Settle, called
	// by every read, takes no lock unless a sync failed.
	failing atomic.Bool
}

// notifyLocked wakes every waiter for synced or err: those of the cond
// and those of durable. Requires syncMu held.
func (w *wal) notifyLocked() {
	w.cond.Broadcast()
	if w.durable != nil {
		close(w.durable)
		w.durable = nil
	}
}

// setErr sets err, and failing with it. Requires syncMu held.
func (w *wal) setErr(err error) {
	w.err = err
	w.failing.Store(err != nil)
}

// openWAL opens the log in dir on the OS's file system; see openWALFS.
func openWAL(dir string, syncMode bool) (*wal, [][]byte, error) {
	return openWALFS(vfs.Default, dir, syncMode)
}

// openWALFS opens the log in dir for appending and returns the records it
// holds, to be replayed.
func openWALFS(fsys vfs.FS, dir string, syncMode bool) (*wal, [][]byte, error) {
	w := &wal{fs: fsys, path: filepath.Join(dir, walFile), sync: syncMode}
	w.cond = sync.NewCond(&w.syncMu)
	recs, err := readWALFS(fsys, w.path)
	if err != nil {
		return nil, nil, err
	}
	return w, recs, nil
}

// readWAL returns the intact records of the log at path.
func readWAL(path string) ([][]byte, error) { return readWALFS(vfs.Default, path) }

func readWALFS(fsys vfs.FS, path string) ([][]byte, error) {
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read metadata log: %w", err)
	}
	return parseWAL(path, data)
}

// parseWAL returns the records of a log's bytes (which they alias) up to
// the first zero length, torn or corrupt record. It fails, wrapping
// pdc.ErrCorrupt, if that record is provably one that was acknowledged
// (parseWALv2).
func parseWAL(path string, data []byte) ([][]byte, error) {
	if len(data) == 0 {
		return nil, nil
	}
	switch {
	case bytes.HasPrefix(data, []byte(walMagic)):
		return parseWALv2(path, data)
	case bytes.HasPrefix(data, []byte(walMagicV1)):
		return parseWALv1(data), nil
	case len(data) < len(walMagic) && bytes.HasPrefix([]byte(walMagic), data):
		return nil, nil // torn while the header was written
	}
	return nil, fmt.Errorf("metadata log %s: not a pdc log or an unknown version (header %q): %w", path, data[:min(len(data), 8)], pdc.ErrVersion)
}

// parseWALv1 reads a log of version 1. Its records carry no mark, so a bad
// record cannot be told from a torn tail: the replay ends there, as that
// version's own did.
func parseWALv1(data []byte) [][]byte {
	var recs [][]byte
	p := data[len(walMagicV1):]
	for len(p) >= walRecHeaderV1 {
		n := binary.LittleEndian.Uint32(p)
		sum := binary.LittleEndian.Uint32(p[4:])
		if n == 0 || uint64(n) > uint64(len(p)-walRecHeaderV1) {
			break // the unused, zeroed end of the file, or a torn tail
		}
		rec := p[walRecHeaderV1 : walRecHeaderV1+n]
		if crc32.Checksum(rec, castagnoli) != sum {
			break // torn or corrupt tail
		}
		recs = append(recs, rec)
		p = p[walRecHeaderV1+n:]
	}
	return recs
}

// parseWALv2 reads a log of version 2. Where the records end at a bad one
// at offset x, the rest of the file is searched for a whole record whose
// mark is past x: it was written once x was durable, so x held an
// acknowledged change, which is lost (a flipped bit, a bad sector). That
// fails the replay: going on would drop every acknowledged change after x
// without a word.
//
// Without such a record the end is a torn tail: the records after the
// last acknowledged one, which a crash may leave in part, or with sync
// durability even out of order (the disk writes back what was not
// fsynced in any order), and which are dropped. With process durability
// marks only count if the machine has not restarted since the file was
// written (same boot id): a power loss may lose any part of what was not
// written back, and process durability does not promise to survive one.
func parseWALv2(path string, data []byte) ([][]byte, error) {
	if len(data) < walHeaderLen {
		return nil, nil // torn while the header was written (never, once linked)
	}
	h := data[:walHeaderLen]
	if crc32.Checksum(h[:walHeaderLen-4], castagnoli) != binary.LittleEndian.Uint32(h[walHeaderLen-4:]) {
		return nil, fmt.Errorf("metadata log %s: the header (bytes 0-%d) fails its checksum: %w; to recover, %s",
			path, walHeaderLen-1, pdc.ErrCorrupt, walRecovery(path, 0))
	}
	flags := binary.LittleEndian.Uint32(h[8:])
	var recs [][]byte
	off := walHeaderLen
	for {
		rec, _, ok := walRecordAt(data, off)
		if !ok {
			break
		}
		recs = append(recs, rec)
		off += walRecHeaderLen + len(rec)
	}
	if flags&walFlagSync == 0 {
		var boot [16]byte
		copy(boot[:], h[12:28])
		if now, ok := bootID(); !ok || boot == ([16]byte{}) || now != boot {
			return recs, nil
		}
	}
	if later, ok := laterAcked(data, off); ok {
		return nil, fmt.Errorf("metadata log %s: the record at byte %d is damaged, and it had been acknowledged as durable (the intact record at byte %d was written after it was); "+
			"starting would lose every change logged from byte %d on: %w; to recover, %s",
			path, off, later, off, pdc.ErrCorrupt, walRecovery(path, off))
	}
	return recs, nil
}

// walRecovery says what an operator can do about a log damaged at off.
func walRecovery(path string, off int) string {
	return fmt.Sprintf("check the disk, then restore the metadata store's directory %s from a copy, "+
		"or, to start without the changes logged from byte %d on, keep a copy of the log for analysis and cut it there (truncate -s %d %s)",
		filepath.Dir(path), off, off, path)
}

// walRecordAt returns the payload and mark of the record at off, if it is
// whole and passes its CRC.
func walRecordAt(data []byte, off int) (rec []byte, mark uint64, ok bool) {
	if len(data)-off < walRecHeaderLen {
		return nil, 0, false
	}
	p := data[off:]
	n := binary.LittleEndian.Uint32(p)
	if n == 0 || uint64(n) > uint64(len(p)-walRecHeaderLen) {
		return nil, 0, false // the unused, zeroed end of the file, or torn
	}
	end := walRecHeaderLen + int(n)
	if crc32.Checksum(p[8:end], castagnoli) != binary.LittleEndian.Uint32(p[4:]) {
		return nil, 0, false
	}
	return p[walRecHeaderLen:end], binary.LittleEndian.Uint64(p[8:]), true
}

// laterAcked searches data after the bad record at x for a whole record
// with a mark past x, and returns its offset. Every offset is a candidate
// (the bad record's length may be what is damaged), but only a header
// whose mark lies in (x, its own offset] is checksummed, runs of zeros are
// skipped 8 bytes at a time, and the bytes checksummed are capped at the
// file's size: a payload made to look like records (it holds values
// clients sent) costs at most one more pass, never a quadratic one. If
// the cap is reached nothing is proven, and the end counts as torn.
func laterAcked(data []byte, x int) (int, bool) {
	budget := len(data)
	for o := x + walRecHeaderLen; o+walRecHeaderLen <= len(data); o++ {
		p := data[o:]
		n := binary.LittleEndian.Uint32(p)
		if n == 0 {
			q := skipZeros(data, o+4)
			o = max(o, q-4) // a record's length has a nonzero byte
			continue
		}
		if uint64(n) > uint64(len(p)-walRecHeaderLen) {
			continue
		}
		if mark := binary.LittleEndian.Uint64(p[8:]); mark <= uint64(x) || mark > uint64(o) {
			continue
		}
		if budget -= 8 + int(n); budget < 0 {
			return 0, false
		}
		if _, _, ok := walRecordAt(data, o); ok {
			return o, true
		}
	}
	return 0, false
}

// zeroRun is how much of a log's unused tail skipZeros compares at once.
const zeroRun = 4096

// skipZeros returns the first q' = q + 8k at which data's 8 bytes are
// not all zero, or past which fewer than 8 remain. A log is preallocated
// (64 MiB by default), so every open scans its zero tail: a block at a
// time, that is a vectorised compare instead of a load per word, which
// matters at each restart and a lot under the race detector.
func skipZeros(data []byte, q int) int {
	for q+zeroRun <= len(data) && bytes.Equal(data[q:q+zeroRun], zeroBlock[:zeroRun]) {
		q += zeroRun
	}
	for q+8 <= len(data) && binary.LittleEndian.Uint64(data[q:]) == 0 {
		q += 8
	}
	return q
}

// bootID returns the id of the running boot of the machine, and whether
// it is known; a variable so that tests can restart the machine.
var bootID = sync.OnceValues(readBootID)

func readBootID() (id [16]byte, ok bool) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return id, false
	}
	h, err := hex.DecodeString(string(bytes.ReplaceAll(bytes.TrimSpace(b), []byte("-"), nil)))
	if err != nil || len(h) != len(id) {
		return id, false
	}
	copy(id[:], h)
	return id, true
}

// walHeader returns a file's header for a log of the given durability.
func walHeader(syncMode bool) []byte {
	h := make([]byte, walHeaderLen)
	copy(h, walMagic)
	if syncMode {
		binary.LittleEndian.PutUint32(h[8:], walFlagSync)
	}
	if id, ok := bootID(); ok {
		copy(h[12:28], id[:])
	}
	binary.LittleEndian.PutUint32(h[walHeaderLen-4:], crc32.Checksum(h[:walHeaderLen-4], castagnoli))
	return h
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
// (or is the only user). On error the old file stays in use.
func (w *wal) reset(minRoom int) error {
	dir := filepath.Dir(w.path)
	tmp := w.path + ".new"
	f, err := w.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("metadata log: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		_ = w.fs.Remove(tmp)
		return fmt.Errorf("metadata log %s: %w", w.path, err)
	}
	if _, err := f.Write(walHeader(w.sync)); err != nil {
		return fail(err)
	}
	need := int64(minRoom) + walRecHeaderLen
	size := walRotateBytes
	if w.rotate > 0 {
		size = w.rotate
	}
	capacity, err := reserve(f, roomFor(dir, max(size, need)), need)
	if err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	// Map before the rename: once the new file replaces the old one, the
	// log must be writable, or later commits would go to an unlinked file.
	var m []byte
	if mf, ok := f.(vfs.Mapper); ok {
		m, err = mf.Map(walHeaderLen+int(capacity), true)
		if errors.Is(err, errors.ErrUnsupported) {
			m, err = nil, nil
		}
		if err != nil {
			return fail(err)
		}
	}
	if err := w.fs.Rename(tmp, w.path); err != nil {
		if m != nil {
			_ = f.(vfs.Mapper).Unmap(m)
		}
		return fail(err)
	}
	syncErr := atomicfile.SyncDirFS(w.fs, dir)
	// Everything logged in the old file is durable in pebble: say so
	// before the file closes, for a waiter whose fsync of it is under
	// way and fails with ErrClosed (waitSynced). A failed fsync of the old
	// file is forgotten only once the new file's name is durable. With
	// the directory's fsync failed no record goes into the new file
	// (room says no): however well it is synced, a power loss can take
	// its name, and the kernel may have dropped the directory's dirty
	// state, so that a later fsync of the directory would not write the
	// name either. The next commit starts yet another file, with a rename
	// and a directory fsync of its own.
	w.syncMu.Lock()
	w.synced.Store(w.written.Load())
	switch {
	case syncErr != nil:
		w.syncFailed.Store(true)
	case w.syncFailed.Load():
		w.setErr(nil)
		w.syncFailed.Store(false)
	}
	w.notifyLocked()
	w.syncMu.Unlock()
	// The new file is the one linked now: go on with it, even if the
	// rename may not be durable yet (and then report).
	w.unmap()
	w.f, w.m, w.cap, w.size, w.broken = f, m, capacity, walHeaderLen, nil
	w.origin, w.fileSync = w.written.Load()-walHeaderLen, w.sync
	return syncErr
}

// reserve allocates the blocks of f, which holds only the header, for
// want bytes of records, or for fewer (not under need, nor a minimum) if
// the disk has no room for want. It returns the bytes of records the file
// holds.
func reserve(f vfs.File, want, need int64) (int64, error) {
	hdr := int64(walHeaderLen)
	floor := max(need, walMinBytes)
	for n := max(want, need); ; n = max(n/2, floor) {
		err := f.Fallocate(hdr, n)
		if errors.Is(err, errors.ErrUnsupported) {
			err = writeZeros(f, hdr, n)
		}
		if err == nil {
			return n, nil
		}
		// Give back what a failed attempt took before a smaller one.
		if terr := f.Truncate(hdr); terr != nil {
			return 0, errors.Join(err, terr)
		}
		if n <= floor || !errors.Is(err, syscall.ENOSPC) {
			return 0, fmt.Errorf("reserve %d bytes: %w", n+hdr, err)
		}
	}
}

// roomFor is want, or a quarter of the space left on dir's file system
// if that is less. A reservation larger than the free space takes every
// free block before it fails and gives them back, and meanwhile a write
// of anything else on that disk (a data server's, another store's) fails
// for room; two stores starting on a small disk failed their starts so.
// And what a full log holds must be flushed into tables, in new space,
// before the log's own space comes back: a log that took most of a
// nearly full disk would hold more than the disk can take once an
// operator frees some, and the store would stay full.
func roomFor(dir string, want int64) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return want
	}
	return min(want, int64(st.Bavail)*int64(st.Bsize)/4)
}

var zeroBlock = make([]byte, 1<<20)

// writeZeros writes n zero bytes at off: on a file system without
// fallocate, writing is what allocates blocks.
func writeZeros(f vfs.File, off, n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeroBlock)))
		if _, err := f.WriteAt(zeroBlock[:k], off); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

// unmap ends the mapping and closes the file. The caller holds mu.
func (w *wal) unmap() {
	if w.m != nil {
		_ = w.f.(vfs.Mapper).Unmap(w.m)
		w.m = nil
	}
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}

// room reports whether a record of n bytes fits. The caller holds mu.
func (w *wal) room(n int) bool {
	return w.broken == nil && !w.syncFailed.Load() && w.size+walRecHeaderLen+int64(n) <= w.cap+walHeaderLen
}

// mark returns the mark of a record written now (the file's offset up to
// which the log is acknowledged as durable). The caller holds mu.
func (w *wal) mark() uint64 {
	if !w.fileSync {
		return uint64(w.size)
	}
	// Before the file's start if the rename that made it did not reach
	// the disk (reset): then nothing in it is known durable.
	return uint64(min(max(w.synced.Load()-w.origin, walHeaderLen), w.size))
}

// frame writes the header of a record of payload rec, with mark, into
// p[:walRecHeaderLen], the length last.
func frame(p, rec []byte, mark uint64) {
	binary.LittleEndian.PutUint64(p[8:], mark)
	sum := crc32.Update(crc32.Checksum(p[8:walRecHeaderLen], castagnoli), castagnoli, rec)
	binary.LittleEndian.PutUint32(p[4:], sum)
	binary.LittleEndian.PutUint32(p, uint32(len(rec)))
}

// append writes one record; the caller holds mu and has checked room. It
// returns the logical offset the record ends at. On error nothing of the
// record counts: the next one is written in its place, and after a fault
// the log must start a new file (room says no).
func (w *wal) append(rec []byte) (int64, error) {
	if w.m == nil {
		return w.appendWrite(rec)
	}
	if err := w.store(rec); err != nil {
		w.broken = err
		return 0, err
	}
	w.size += walRecHeaderLen + int64(len(rec))
	return w.written.Add(walRecHeaderLen + int64(len(rec))), nil
}

// store copies rec with its header into the mapping, the length last, so
// that a replay never takes a record stored in part. A fault in the copy
// (the disk could not back a page) is an error of this record instead of
// the end of the process.
func (w *wal) store(rec []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("metadata log %s: storing a record at %d faulted (%v): %w", w.path, w.size, p, w.faultErrno())
		}
	}()
	p := w.m[w.size:]
	copy(p[walRecHeaderLen:], rec)
	frame(p, rec, w.mark())
	return nil
}

// faultErrno says why a store into the mapping faulted: no space left if
// the file system is full, else an I/O error.
func (w *wal) faultErrno() error {
	var st unix.Statfs_t
	if unix.Statfs(filepath.Dir(w.path), &st) == nil && st.Bavail == 0 {
		return syscall.ENOSPC
	}
	return syscall.EIO
}

// appendWrite is append for a log that is not mapped: one pwrite of the
// record with its header.
func (w *wal) appendWrite(rec []byte) (int64, error) {
	n := walRecHeaderLen + len(rec)
	if cap(w.buf) < n {
		w.buf = make([]byte, n, max(n, 64<<10))
	}
	b := w.buf[:n]
	copy(b[walRecHeaderLen:], rec)
	frame(b, rec, w.mark())
	if _, err := w.f.WriteAt(b, w.size); err != nil {
		// A part may be written; the next record overwrites it, and until
		// then its CRC ends the replay.
		return 0, fmt.Errorf("metadata log %s: %w", w.path, err)
	}
	w.size += int64(n)
	return w.written.Add(int64(n)), nil
}

// waitSynced returns once the log is durable up to off. The first waiter
// fsyncs for all who are waiting (group commit). It fails if the fsync
// fails, or if the log was closed (close) before the record was durable.
func (w *wal) waitSynced(off int64) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	for w.synced.Load() < off && w.err == nil {
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
		switch {
		case errors.Is(err, os.ErrClosed):
			// The file was closed under the fsync, which proves nothing.
			// A rotation first moves synced past all the file held (it is
			// in pebble; reset), so the loop ends; a close that left
			// records unsynced sets err (close). What remains is a record
			// written after close looked: it is not durable either.
			if w.synced.Load() < target && w.err == nil {
				w.setErr(fmt.Errorf("metadata log %s was closed before it was synced: %w", w.path, pdc.ErrClosed))
			}
		case err != nil:
			// Never retried on this file: after a failed fsync the kernel
			// may have dropped the pages, and a second one would say they
			// are durable. The next commit moves to a new file instead.
			w.setErr(fmt.Errorf("fsync metadata log %s: %w", w.path, err))
			w.syncFailed.Store(true)
		case target > w.synced.Load():
			w.synced.Store(target)
		}
		w.notifyLocked()
	}
	if w.synced.Load() >= off {
		// Durable before a later sync failed: the record of a change is
		// dropped only if it may not be (commitChanges), and dropping a
		// durable one would deliver it at the next start after newer ones.
		return nil
	}
	return w.err
}

// close closes the log's file. It syncs nothing: a waiter for a record
// not yet durable fails with why (or with its own fsync's error), never
// hears that the record is durable. Records a reset moved into pebble are
// durable, and their waiters hear so.
func (w *wal) close(why error) {
	w.syncMu.Lock()
	if w.synced.Load() < w.written.Load() && w.err == nil {
		w.setErr(why)
	}
	w.notifyLocked()
	w.syncMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unmap()
}
