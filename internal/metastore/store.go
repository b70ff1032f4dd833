package metastore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
)

// storeVersion is the layout version of the keys in metaserver's doc.go.
// Version 2 added staged records of named namespaces ('f' keys); a
// version 1 store is a version 2 store without them, and is upgraded at
// open by writing the version, so that an older build, which would not
// move them when the cluster resizes, refuses the store instead.
// Version 3 added pending dims cuts ('K' keys): a build before them would
// neither push them at start nor refuse a set dims while one is pending,
// so a newer dims version could reach a data server before a shrink's
// cut and a regrow read the rows the shrink dropped; nor would it move
// them on a resize. A version 1 or 2 store has none and is upgraded the
// same way.
const storeVersion = 3

// upgradable are the older layout versions a store is upgraded from in
// place: none of their keys changed meaning.
var upgradable = map[uint32]bool{1: true, 2: true}

// Store is the pebble database of one metadata server, with its log.
type Store struct {
	db  *pebble.DB
	dir string
	log *wal
	fs  vfs.FS
	pfs *pebbleFS

	gets atomic.Int64 // point lookups (get) made: what a cache in front saves

	seqMu    sync.Mutex
	nextSeq  uint64 // guarded by seqMu
	reserved uint64 // ids below this are reserved on disk; guarded by seqMu

	// settling is the settle under way for callers that may give up
	// before it returns (settleContext), nil if none; none starts once
	// the store is closing (settleClosed). Guarded by settleMu.
	settleMu     sync.Mutex
	settling     *settleCall
	settleClosed bool

	// bg counts the syncs made for waiters (syncForWaiters), which close
	// waits for.
	bg sync.WaitGroup
}

// settleCall is one settle under way, on a goroutine of its own.
type settleCall struct {
	done chan struct{}
	err  error // set before done is closed
}

// seqBlock is how many ids are reserved on disk at a time.
const seqBlock = 4096

func openStore(dir string, durability Durability, cacheBytes int64, log *slog.Logger) (*Store, error) {
	return openStoreFS(vfs.Default, dir, durability, cacheBytes, 0, log)
}

// openStoreFS opens the store in dir on fsys.
// logBytes is Options.LogBytes (0: walRotateBytes).
func openStoreFS(fsys vfs.FS, dir string, durability Durability, cacheBytes, logBytes int64, log *slog.Logger) (*Store, error) {
	if err := fsys.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("metadata store: %w", err)
	}
	if err := checkComplete(fsys, dir); err != nil {
		return nil, err
	}
	pfs := newPebbleFS(fsys, dir)
	// Pebble may end the process when it cannot create its files (it
	// treats a failed MANIFEST write as fatal): refuse to open on a disk
	// with no room instead.
	if err := pfs.probeErr(); err != nil {
		return nil, fmt.Errorf("open metadata store %s: %w", dir, err)
	}
	// Pebble charges its memtables (up to MemTableStopWritesThreshold of
	// them, 2 by default) to the block cache: a cache no larger than them
	// holds no blocks at all, and every lookup reads and checksums its
	// filter and index blocks from the file again.
	const memTableSize = 32 << 20
	cache := pebble.NewCache(cacheBytes + 2*memTableSize)
	defer cache.Unref()
	opts := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                memTableSize,
		MemTableStopWritesThreshold: 2,
		L0CompactionThreshold:       4,
		// The store keeps its own log (wal.go).
		DisableWAL: true,
		FS:         pfs,
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	opts.Logger = newStoreLogger(log)
	db, err := pebble.Open(dir, opts)
	pfs.opened()
	if err != nil {
		pfs.close()
		return nil, fmt.Errorf("open metadata store %s: %w", dir, err)
	}
	s := &Store{db: db, dir: dir, fs: fsys, pfs: pfs}
	if err := s.openLog(durability == DurabilitySync, logBytes, log); err != nil {
		pfs.close()
		db.Close()
		return nil, err
	}
	if err := s.loadSeq(); err != nil {
		s.log.close(fmt.Errorf("metadata store %s failed to open: %w", dir, pdc.ErrClosed))
		pfs.close()
		db.Close()
		return nil, err
	}
	return s, nil
}

// checkComplete refuses a store directory that holds tables or a log
// but not pebble's manifest marker: pebble takes a directory without the
// marker for a new store, opens it empty and deletes its tables as
// obsolete. The marker is an empty file, which a copy (of a checkpoint,
// say) can drop; a server opened on such a copy would know no object,
// and pdc fsck --remove would then delete the data of every one. A store
// whose creation was cut short has a MANIFEST but no tables and no log
// yet, and opens.
func checkComplete(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		return fmt.Errorf("metadata store: %w", err)
	}
	var held []string
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "marker.manifest."):
			return nil
		case n == walFile || strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".blob"):
			held = append(held, n)
		}
	}
	if len(held) == 0 {
		return nil
	}
	if len(held) > 3 {
		held = append(held[:3], "...")
	}
	return fmt.Errorf("metadata store %s holds %s but not pebble's manifest marker (marker.manifest.*): it is incomplete (a partial copy?) and would open empty; "+
		"put the whole directory back: %w", dir, strings.Join(held, ", "), pdc.ErrCorrupt)
}

// openLog replays what the log holds that pebble had not flushed, flushes
// it, and starts an empty log; then it checks the layout version.
func (s *Store) openLog(syncMode bool, logBytes int64, log *slog.Logger) error {
	w, recs, err := openWALFS(s.fs, s.dir, syncMode)
	if err != nil {
		return err
	}
	w.rotate = logBytes
	for i, rec := range recs {
		if err := replayRecord(s.db, rec); err != nil {
			return fmt.Errorf("metadata store %s: replay log record %d: %w", s.dir, i, err)
		}
	}
	if len(recs) > 0 {
		if err := s.flush(context.Background()); err != nil {
			return fmt.Errorf("metadata store %s: flush the replayed log: %w", s.dir, err)
		}
		log.Info("replayed the metadata log", "records", len(recs))
	}
	if err := w.reset(0); err != nil {
		return err
	}
	s.log = w
	if err := s.checkVersion(); err != nil {
		w.close(fmt.Errorf("metadata store %s failed to open: %w", s.dir, pdc.ErrClosed))
		return err
	}
	return nil
}

// loadSeq reads the id sequence's high-water mark.
func (s *Store) loadSeq() error {
	v, closer, err := s.db.Get([]byte{'S'})
	switch {
	case err == nil:
		if len(v) == 8 {
			s.nextSeq = binary.BigEndian.Uint64(v)
		}
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("metadata store %s: read id sequence: %w", s.dir, err)
	}
	if s.nextSeq == 0 {
		s.nextSeq = 1
	}
	s.reserved = s.nextSeq
	return nil
}

func (s *Store) checkVersion() error {
	v, closer, err := s.db.Get([]byte{'V'})
	if errors.Is(err, pebble.ErrNotFound) {
		b := s.db.NewBatch()
		defer b.Close()
		_ = b.Set([]byte{'V'}, binary.BigEndian.AppendUint32(nil, storeVersion), nil)
		return s.commit(b)
	}
	if err != nil {
		return fmt.Errorf("metadata store %s: %w", s.dir, err)
	}
	ok := len(v) == 4 && binary.BigEndian.Uint32(v) == storeVersion
	old := len(v) == 4 && upgradable[binary.BigEndian.Uint32(v)]
	if !ok && !old {
		defer closer.Close()
		if len(v) == 4 && binary.BigEndian.Uint32(v) > storeVersion {
			return fmt.Errorf("metadata store %s has layout version %d, written by a newer pdc; this build reads versions up to %d: %w",
				s.dir, binary.BigEndian.Uint32(v), storeVersion, pdc.ErrVersion)
		}
		return fmt.Errorf("metadata store %s has layout version %x; this build reads version %d: %w", s.dir, v, storeVersion, pdc.ErrVersion)
	}
	closer.Close()
	if old {
		b := s.db.NewBatch()
		defer b.Close()
		_ = b.Set([]byte{'V'}, binary.BigEndian.AppendUint32(nil, storeVersion), nil)
		return s.commit(b)
	}
	return nil
}

// nextID returns a fresh sequence number; it reserves a block on disk (an
// fsynced write) when the reserved ones run out, so that ids are never
// reused after a crash.
func (s *Store) nextSeqNum() (uint32, error) {
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	if s.nextSeq >= 1<<32 {
		return 0, fmt.Errorf("this metadata server has used all 2^32 ids: %w", pdc.ErrOutOfRange)
	}
	if s.nextSeq >= s.reserved {
		r := s.nextSeq + seqBlock
		b := s.db.NewBatch()
		_ = b.Set([]byte{'S'}, binary.BigEndian.AppendUint64(nil, r), nil)
		err := s.commit(b)
		b.Close()
		if err != nil {
			return 0, fmt.Errorf("reserve ids: %w", err)
		}
		s.reserved = r
	}
	n := s.nextSeq
	s.nextSeq++
	return uint32(n), nil
}

// nextSeqNums returns the first of n fresh consecutive sequence numbers.
func (s *Store) nextSeqNums(n int) (uint32, error) {
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	if s.nextSeq+uint64(n) > 1<<32 {
		return 0, fmt.Errorf("this metadata server has used all 2^32 ids: %w", pdc.ErrOutOfRange)
	}
	if s.nextSeq+uint64(n) > s.reserved {
		r := s.nextSeq + uint64(n) + seqBlock
		b := s.db.NewBatch()
		_ = b.Set([]byte{'S'}, binary.BigEndian.AppendUint64(nil, r), nil)
		err := s.commit(b)
		b.Close()
		if err != nil {
			return 0, fmt.Errorf("reserve ids: %w", err)
		}
		s.reserved = r
	}
	first := s.nextSeq
	s.nextSeq += uint64(n)
	return uint32(first), nil
}

// highWater is the first sequence number this store has not handed out.
func (s *Store) highWater() uint64 {
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	return s.nextSeq
}

// observeSeq makes later ids larger than seq (after an import).
func (s *Store) observeSeq(seq uint32) {
	s.seqMu.Lock()
	if uint64(seq) >= s.nextSeq {
		s.nextSeq = uint64(seq) + 1
	}
	s.seqMu.Unlock()
}

// raiseSeq makes later ids larger than seq, and reserves them on disk.
func (s *Store) raiseSeq(seq uint32) error {
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	if uint64(seq) < s.nextSeq {
		return nil
	}
	next := uint64(seq) + 1
	if next > s.reserved {
		b := s.db.NewBatch()
		_ = b.Set([]byte{'S'}, binary.BigEndian.AppendUint64(nil, next), nil)
		err := s.commit(b)
		b.Close()
		if err != nil {
			return fmt.Errorf("reserve ids above %d: %w", seq, err)
		}
		s.reserved = next
	}
	s.nextSeq = next
	return nil
}

// get returns a copy of the value of key, or nil and false.
func (s *Store) get(key []byte) ([]byte, bool, error) {
	s.gets.Add(1)
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, true, nil
}

// commit logs b and applies it, in one order for both, and returns once
// the change is as durable as the store promises: in the kernel, or with
// sync durability fsynced.
func (s *Store) commit(b *pebble.Batch) error {
	wait, err := s.commitApply(b)
	if err != nil {
		return err
	}
	return wait()
}

// commitApply logs and applies b, like commit, but returns before waiting
// for the sync that sync durability asks for: the caller calls wait, out of
// any lock it holds, before it acknowledges the change. Changes are
// visible to readers (and ordered) once commitApply returns.
func (s *Store) commitApply(b *pebble.Batch) (wait func() error, err error) {
	if sb := sortedBatch(s.db, b); sb != b {
		defer sb.Close()
		b = sb
	}
	// A store whose pebble cannot write (a full disk) takes no changes it
	// could not flush: they would fill memtables, and then pebble stalls
	// every commit.
	if err := s.pfs.failing(); err != nil {
		return nil, err
	}
	w := s.log
	rec := b.Repr()
	w.mu.Lock()
	if w.f == nil || w.refuse {
		w.mu.Unlock()
		return nil, fmt.Errorf("metadata store is closed: %w", pdc.ErrClosed)
	}
	if !w.room(len(rec)) {
		// The log is full (or its file faulted): make everything logged
		// durable in pebble, then start afresh with room for this record.
		err := s.flush(context.Background())
		if err == nil {
			err = w.reset(len(rec))
		}
		if err != nil {
			w.mu.Unlock()
			return nil, fmt.Errorf("rotate the metadata log: %w", err)
		}
	}
	off, err := w.append(rec)
	if err != nil {
		w.mu.Unlock()
		return nil, err
	}
	err = s.db.Apply(b, pebble.NoSync)
	w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if w.sync {
		return func() error {
			if err := w.waitSynced(off); err != nil {
				return fmt.Errorf("%w (%w)", err, ErrUnsynced)
			}
			return nil
		}, nil
	}
	return noWait, nil
}

func noWait() error { return nil }

func (s *Store) settle() error {
	w := s.log
	if !w.sync {
		return nil
	}
	// One atomic load unless a sync failed: reads that hand out what
	// the store holds call this on every answer. A failed sync sets the
	// flag (under syncMu, with its error) before its committer hears of
	// it, so a read that saw the change of a commit whose sync had failed
	// by now finds the flag set; one whose sync is still under way is its
	// committer's to wait for (or the reader's: AwaitDurable).
	if !w.failing.Load() {
		return nil
	}
	// The failed log is never synced again: only a commit, which starts
	// a new one once pebble holds everything, can make the rest durable.
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set([]byte{'V'}, binary.BigEndian.AppendUint32(nil, storeVersion), nil)
	if err := s.commit(b); err != nil {
		if !errors.Is(err, ErrUnsynced) {
			err = fmt.Errorf("%w (%w)", err, ErrUnsynced)
		}
		return err
	}
	return nil
}

// settleContext is settle for a caller that gives up when ctx ends: a
// read, which must answer within its deadline even when the disk stalls.
// The commit a settle makes cannot be given up half-way (it flushes
// pebble and starts a new log, holding the log's lock), so it runs on a
// goroutine of its own, bounded by that commit, which later callers join
// while it is under way: on a disk that stalls, the reads retried by their
// clients add no commit and no goroutine each. A settle joined may have
// made its commit before what the caller read was applied; if a sync
// failed since, failing is set again, and it settles again.
func (s *Store) settleContext(ctx context.Context) error {
	w := s.log
	if !w.sync {
		return nil
	}
	for w.failing.Load() {
		s.settleMu.Lock()
		c := s.settling
		if c == nil && s.settleClosed {
			s.settleMu.Unlock()
			return fmt.Errorf("metadata store is closed: %w", pdc.ErrClosed)
		}
		if c == nil {
			c = &settleCall{done: make(chan struct{})}
			s.settling = c
			go func() {
				c.err = s.settle()
				s.settleMu.Lock()
				s.settling = nil
				s.settleMu.Unlock()
				close(c.done)
			}()
		}
		s.settleMu.Unlock()
		select {
		case <-c.done:
			if c.err != nil {
				return c.err
			}
		case <-ctx.Done():
			return fmt.Errorf("wait for a commit to make the changes read durable, after a failed sync: %w", ctx.Err())
		}
	}
	return nil
}

// awaitDurable returns once everything applied before the call is
// durable; see Store.AwaitDurable. A waiter blocks on the log's durable
// channel, shared by all of them, and starts no goroutine: one that gives
// up leaves nothing behind. If no fsync is under way to cover it (a
// commit applied whose committer has not begun waiting), one is made on
// a goroutine of the store's, at most one at a time, each bounded by one
// fsync, so that the waiters can still give up at their deadline while
// the disk stalls.
func (s *Store) awaitDurable(ctx context.Context) error {
	w := s.log
	if !w.sync {
		return nil
	}
	// Every change applied is logged first, so it lies below written.
	off := w.written.Load()
	if w.synced.Load() >= off {
		return nil
	}
	for {
		w.syncMu.Lock()
		switch {
		case w.synced.Load() >= off:
			w.syncMu.Unlock()
			return nil
		case w.err != nil:
			w.syncMu.Unlock()
			// The log's sync failed: only a commit, on a new log, can
			// make the rest durable.
			return s.settleContext(ctx)
		case w.closing:
			w.syncMu.Unlock()
			return fmt.Errorf("metadata store is closed: %w", pdc.ErrClosed)
		}
		if !w.syncing && !w.helping {
			w.helping = true
			s.bg.Add(1)
			go s.syncForWaiters()
		}
		if w.durable == nil {
			w.durable = make(chan struct{})
		}
		ch := w.durable
		w.syncMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for the changes read to be durable: %w", ctx.Err())
		}
	}
}

// syncForWaiters syncs the log for awaitDurable's waiters (joining an
// fsync under way, group commit), then wakes them: if it covered less
// than they wait for, one of them starts another.
func (s *Store) syncForWaiters() {
	defer s.bg.Done()
	w := s.log
	_ = w.waitSynced(w.written.Load()) // its error is w.err, which the waiters read
	w.syncMu.Lock()
	w.helping = false
	w.notifyLocked()
	w.syncMu.Unlock()
}

// flush makes pebble write its memtables and waits for it, until ctx ends
// or a write of pebble's fails: on a full disk pebble retries a flush until
// space is freed, and a caller waiting for that would hang.
func (s *Store) flush(ctx context.Context) error {
	done, err := s.db.AsyncFlush()
	if err != nil {
		return err
	}
	for {
		changed, failed := s.pfs.errNow()
		select {
		case <-done:
			return nil
		default:
		}
		if failed != nil {
			return failed
		}
		select {
		case <-done:
			return nil
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("the flush of the memtables did not finish (see the log for pebble's errors): %w", ctx.Err())
		}
	}
}

// sortedBatch returns b's entries in key order, as a new batch, or b
// itself when they are few, already in a few sorted runs, or hold anything
// but sets and deletes. The memtable adds a batch's keys one after another
// starting from where the last one went: in key order each costs a step or
// two instead of a search of the whole skiplist, which for a tag change
// with its dozen index entries spread over the key space is most of the
// commit. The sort is stable, so of two changes of one key the later still
// wins.
func sortedBatch(db *pebble.DB, b *pebble.Batch) *pebble.Batch {
	const minSort = 4
	if b.Count() < minSort {
		return b
	}
	type entry struct {
		set        bool
		key, value []byte
	}
	entries := make([]entry, 0, b.Count())
	r := b.Reader()
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return b
		}
		if !ok {
			break
		}
		switch kind {
		case pebble.InternalKeyKindSet:
			entries = append(entries, entry{true, k, v})
		case pebble.InternalKeyKindDelete:
			entries = append(entries, entry{false, k, nil})
		default:
			return b
		}
	}
	// A batch made of a few sorted runs (a batch of creates adds each kind
	// of key in order) gains nothing from a sort: the inserter steps
	// through each run.
	runs := 1
	for i := 1; i < len(entries); i++ {
		if bytes.Compare(entries[i-1].key, entries[i].key) > 0 {
			runs++
		}
	}
	if runs <= max(len(entries)/64, 1) {
		return b
	}
	// Indexes sort without moving pointers (no write barriers), and the
	// tie on the index keeps the sort stable.
	order := make([]int32, len(entries))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int {
		return cmp.Or(bytes.Compare(entries[x].key, entries[y].key), cmp.Compare(x, y))
	})
	sb := db.NewBatchWithSize(len(b.Repr()))
	for _, i := range order {
		if e := &entries[i]; e.set {
			_ = sb.Set(e.key, e.value, nil)
		} else {
			_ = sb.Delete(e.key, nil)
		}
	}
	return sb
}

// checkpoint writes a consistent copy of the store into a new directory
// dir/name (name "": the time) and returns its path. ctx bounds the wait
// for the flush, which never ends if pebble cannot write (its directory
// removed under it).
func (s *Store) checkpoint(ctx context.Context, dir, name string) (string, error) {
	if name == "" {
		name = time.Now().UTC().Format(CheckpointTimeLayout)
	} else if err := ValidCheckpointName(name); err != nil {
		return "", err
	}
	if err := s.fs.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	dest := filepath.Join(dir, name)
	if _, err := s.fs.Stat(dest); err == nil {
		return "", fmt.Errorf("checkpoint %s exists already: give another name: %w", dest, pdc.ErrExists)
	}
	// Pebble runs without its own log: flush the memtables first so the
	// checkpoint holds everything acknowledged.
	if err := s.flush(ctx); err != nil {
		return "", fmt.Errorf("checkpoint: flush: %w", err)
	}
	if err := s.db.Checkpoint(dest); err != nil {
		return "", fmt.Errorf("checkpoint metadata store to %s: %w", dest, err)
	}
	if err := copyIdentity(s.fs, s.dir, dest); err != nil {
		return "", fmt.Errorf("checkpoint metadata store to %s: %w", dest, err)
	}
	rank, store := -1, ""
	if id, err := ReadIdentity(s.fs, dest); err == nil {
		rank, store = id.Rank, id.ID
	}
	if err := writeManifest(s.fs, dest, max(rank, 0), store); err != nil {
		return "", fmt.Errorf("checkpoint metadata store to %s: %w", dest, err)
	}
	pruneCheckpoints(s.fs, dir, keepCheckpoints, filepath.Base(dest))
	return dest, nil
}

// CheckpointTimeLayout names a checkpoint by the time it was made; of
// those named so, the newest keepCheckpoints are kept.
const CheckpointTimeLayout = "20060102T150405.000000000Z"

// keepCheckpoints is how many checkpoints named by the time are kept;
// older ones are removed. Checkpoints given another name stay.
const keepCheckpoints = 3

// pruneCheckpoints removes all but the newest keep checkpoints in dir (their
// names sort by time), never the one named last, just written: after the
// clock stepped back its name sorts before older ones.
func pruneCheckpoints(fsys vfs.FS, dir string, keep int, last string) {
	entries, err := fsys.List(dir)
	if err != nil {
		return
	}
	var names []string
	for _, e := range entries {
		if _, err := time.Parse(CheckpointTimeLayout, e); err == nil && e != last {
			if st, err := fsys.Stat(filepath.Join(dir, e)); err == nil && st.IsDir() {
				names = append(names, e)
			}
		}
	}
	sort.Strings(names)
	for len(names) > keep-1 {
		_ = fsys.RemoveAll(filepath.Join(dir, names[0]))
		names = names[1:]
	}
}

func (s *Store) close() error {
	// A settle under way (settleContext) is the store's own goroutine:
	// it ends, its commit bounded by the disk as the flush below is,
	// before the log closes under it.
	s.settleMu.Lock()
	s.settleClosed = true
	c := s.settling
	s.settleMu.Unlock()
	if c != nil {
		<-c.done
	}
	// A sync made for waiters likewise, bounded by one fsync.
	s.log.syncMu.Lock()
	s.log.closing = true
	s.log.notifyLocked()
	s.log.syncMu.Unlock()
	s.bg.Wait()
	s.log.mu.Lock()
	err := s.flush(context.Background())
	if err == nil {
		err = s.log.reset(0) // all of it is in pebble now
	}
	s.log.mu.Unlock()
	// What a failed flush left in memtables is in the log: the next open
	// replays it, if the log reached the disk. A committer still waiting
	// for its sync hears that it may not have (wal.close).
	s.pfs.close()
	if err != nil {
		s.log.close(fmt.Errorf("metadata store closed with changes neither synced nor flushed (%w): %w", err, pdc.ErrClosed))
		s.db.Close()
		return err
	}
	s.log.close(fmt.Errorf("metadata store is closed: %w", pdc.ErrClosed))
	return s.db.Close()
}

// storeLogger sends pebble's messages to the server's log, its errors at
// most once a second: pebble retries a failing background job (a flush
// into a data dir that was removed under it) without pause, and a line per
// retry once filled a tmpfs log at hundreds of MB a minute.
type storeLogger struct {
	log *slog.Logger
	mu  *sync.Mutex
	lim *errLimit // guarded by mu
}

type errLimit struct {
	last       time.Time
	suppressed int
}

func newStoreLogger(log *slog.Logger) storeLogger {
	return storeLogger{log: log, mu: new(sync.Mutex), lim: new(errLimit)}
}

func (l storeLogger) Infof(format string, args ...any) {
	l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l storeLogger) Errorf(format string, args ...any) {
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.lim.last) < time.Second {
		l.lim.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.lim.suppressed
	l.lim.last, l.lim.suppressed = now, 0
	l.mu.Unlock()
	msg := "pebble: " + fmt.Sprintf(format, args...)
	if n > 0 {
		msg += fmt.Sprintf(" (%d more errors in the last second not shown)", n)
	}
	l.log.Error(msg)
}

// Fatalf is called on corruption pebble cannot continue from; pebble needs
// it not to return, so it goes to pebble's own logger, which exits.
func (l storeLogger) Fatalf(format string, args ...any) {
	l.log.Error("pebble: fatal: " + fmt.Sprintf(format, args...))
	pebble.DefaultLogger.Fatalf(format, args...)
}
