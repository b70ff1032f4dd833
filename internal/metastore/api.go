package metastore

import (
	"context"
	"errors"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pdcgo/pdc/internal/vfs"
)

// Options configures a store.
type Options struct {
	// Dir holds the store. Required.
	Dir string
	// FS holds Dir; nil means the operating system's.
	FS vfs.FS
	// Durability of acknowledged changes.
	Durability Durability
	// CacheBytes is the block cache. Default 64 MiB.
	CacheBytes int64
	// LogBytes is the size the log file is given, and at which pebble is
	// flushed and the log started again. Default 64 MiB. Tests on an
	// in-memory file system give a small one: there every byte of it is
	// memory, copied at each sync and each crash image.
	LogBytes int64
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Open opens (or creates) the store in o.Dir, replaying what its log holds
// that pebble had not flushed.
func Open(o Options) (*Store, error) {
	if o.CacheBytes == 0 {
		o.CacheBytes = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return openStoreFS(vfs.OrDefault(o.FS), o.Dir, o.Durability, o.CacheBytes, o.LogBytes, o.Logger)
}

// Batch is a set of changes committed together (Commit). It is a value
// around pebble's batch: passing it costs no allocation. Not safe for
// concurrent use; Close it once committed or abandoned.
type Batch struct{ b *pebble.Batch }

// NewBatch returns an empty batch.
func (s *Store) NewBatch() Batch { return Batch{s.db.NewBatch()} }

// Set sets key to value. Neither is retained.
func (b Batch) Set(key, value []byte) { _ = b.b.Set(key, value, nil) }

// Delete deletes key.
func (b Batch) Delete(key []byte) { _ = b.b.Delete(key, nil) }

// DeleteRange deletes the keys from start up to, not including, end.
func (b Batch) DeleteRange(start, end []byte) { _ = b.b.DeleteRange(start, end, nil) }

// Empty reports whether b holds no change.
func (b Batch) Empty() bool { return b.b.Empty() }

// Count is the number of changes in b.
func (b Batch) Count() uint32 { return b.b.Count() }

// Close releases b.
func (b Batch) Close() { _ = b.b.Close() }

// Pebble is b's pebble batch, for the stores kept inside this one
// (internal/postings) that add their own changes to a commit.
func (b Batch) Pebble() *pebble.Batch { return b.b }

// ErrUnsynced marks the error of a commit that was applied but whose sync
// failed (DurabilitySync). Such a change is visible and ordered like any
// other, and cannot be taken back: it may or may not survive a crash,
// and it is durable once a commit made after it is, because the log is
// synced in order and, after a failed sync, the next commit first makes
// everything applied durable in pebble. A commit error without it means
// that nothing of the batch was applied.
var ErrUnsynced = errors.New("applied, not known to be durable")

// Commit logs and applies b, and returns once the change is as durable as
// the store promises: in the kernel, or with DurabilitySync fsynced.
// Changes commit in the order of the calls. An error wrapping
// ErrUnsynced leaves the change applied. Safe for concurrent use.
func (s *Store) Commit(b Batch) error { return s.commit(b.b) }

// Settle returns once the changes applied by commits whose sync failed
// are durable: at once, with one atomic load, if no sync failed since
// the log last started afresh, else once a commit of its own (the layout
// version, unchanged) is durable, which makes everything applied before
// it durable too. It is for an answer that acknowledges a change without
// making one (a retry that finds its change applied by a commit whose
// sync failed) and for a read, which must not hand out what such a
// commit applied (nor, after a delete, leave out what it removed).
// Changes whose committers still wait for their sync are theirs to
// acknowledge, and Settle does not wait for them. Its error wraps
// ErrUnsynced.
func (s *Store) Settle() error { return s.settle() }

// SettleContext is Settle for a read that must answer within ctx: it
// returns ctx's error if ctx ends before the changes are durable. The
// commit that makes them durable, if one is needed, goes on without it,
// and callers meanwhile wait for that same commit.
func (s *Store) SettleContext(ctx context.Context) error { return s.settleContext(ctx) }

// AwaitDurable returns once every change applied before the call is
// durable, the changes whose commits are still in their fsync included:
// at once, with two atomic loads, if none is applied and not yet durable.
// It joins the fsync under way (or makes one) and, if the log's sync
// failed, settles (SettleContext). It is for a read that answers what many
// changes made, or did not make, without knowing which: a listing, a
// query, a "not found". It returns ctx's error if ctx ends first, and
// otherwise an error wrapping ErrUnsynced if the store cannot sync.
func (s *Store) AwaitDurable(ctx context.Context) error { return s.awaitDurable(ctx) }

// CommitApply logs and applies b, like Commit, but returns before waiting
// for the sync that DurabilitySync asks for: the caller calls wait, out of
// any lock it holds, before it acknowledges the change. The change is
// visible to readers (and ordered) once CommitApply returns; wait's error
// wraps ErrUnsynced.
func (s *Store) CommitApply(b Batch) (wait func() error, err error) { return s.commitApply(b.b) }

// CommitPebble is CommitApply for a pebble batch: the commit function of
// the stores kept inside this one (internal/postings).
func (s *Store) CommitPebble(b *pebble.Batch) (wait func() error, err error) {
	return s.commitApply(b)
}

// DB is the pebble database, for the stores kept inside this one
// (internal/postings): their reads and batches. Changes go through
// CommitPebble, never straight to the database.
func (s *Store) DB() *pebble.DB { return s.db }

// Get returns a copy of the value of key, or nil and false.
func (s *Store) Get(key []byte) ([]byte, bool, error) { return s.get(key) }

// Scan calls fn for every key with prefix p, in key order. fn must not
// retain k or v.
func (s *Store) Scan(p []byte, fn func(k, v []byte) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: PrefixEnd(p)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := fn(it.Key(), v); err != nil {
			return err
		}
	}
	return it.Error()
}

// Iter is an iterator over the store, a value around pebble's (no
// allocation of its own). Close it.
type Iter struct{ *pebble.Iterator }

// NewIter returns an iterator over the keys from lower up to, not
// including, upper; nil bounds are open.
func (s *Store) NewIter(lower, upper []byte) (Iter, error) {
	if lower == nil && upper == nil {
		it, err := s.db.NewIter(nil)
		return Iter{it}, err
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	return Iter{it}, err
}

// NextSeq returns a fresh sequence number, never handed out before, even
// across crashes.
func (s *Store) NextSeq() (uint32, error) { return s.nextSeqNum() }

// NextSeqs returns the first of n fresh consecutive sequence numbers.
func (s *Store) NextSeqs(n int) (uint32, error) { return s.nextSeqNums(n) }

// HighWater is the first sequence number this store has not handed out.
func (s *Store) HighWater() uint64 { return s.highWater() }

// ObserveSeq makes later sequence numbers larger than seq (after an
// import of records that carry ids).
func (s *Store) ObserveSeq(seq uint32) { s.observeSeq(seq) }

// RaiseSeq makes later sequence numbers larger than seq, durably: the
// new high-water mark is committed before it returns, so a crash or a
// restart before the next id is handed out keeps it.
func (s *Store) RaiseSeq(seq uint32) error { return s.raiseSeq(seq) }

// Checkpoint writes a consistent copy of the store into a new directory
// dir/name and returns its path; name "" names it by the time. Of those
// named by the time, it keeps the newest few; those given a name stay
// until removed. A name taken already is pdc.ErrExists. The copy ends
// with a manifest of its files and their CRCs (ManifestFile), which a
// restore checks (RestoreCheckpoint). ctx bounds the wait for the flush.
func (s *Store) Checkpoint(ctx context.Context, dir, name string) (string, error) {
	return s.checkpoint(ctx, dir, name)
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Gets counts the point lookups made (Get): what a cache in front saves.
func (s *Store) Gets() int64 { return s.gets.Load() }

// Close flushes the store and closes it. What a failed flush left is in
// the log, and the next Open replays it.
func (s *Store) Close() error { return s.close() }

// PrefixEnd returns the smallest key greater than every key with prefix
// p, or nil if there is none (p is all 0xff).
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
