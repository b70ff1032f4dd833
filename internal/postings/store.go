package postings

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pdcgo/pdc"
)

// Options tune a Store; zero fields take their defaults.
type Options struct {
	// FlushBytes is how many bytes of records the runs in memory hold
	// before they go to disk as one run (default 32 MiB, at most 1 GiB).
	// Memory holds at most twice as much: a writer that fills it while the
	// previous runs are still being written waits for them.
	FlushBytes int
	// Fanout is how many runs of a level are merged into one of the next
	// (default 16). More makes fewer merges for writers and more runs for
	// readers to look in.
	Fanout int
	// BlockBytes is the size of a block of a run on disk (default 32 KiB).
	BlockBytes int
	// Logger reports flushes and merges that failed (they are retried);
	// nil discards.
	Logger *slog.Logger
}

func (o *Options) ensureDefaults() {
	if o.FlushBytes <= 0 {
		o.FlushBytes = 32 << 20
	}
	// Offsets in a run are 32-bit.
	o.FlushBytes = min(o.FlushBytes, 1<<30)
	if o.Fanout < 2 {
		o.Fanout = 16
	}
	if o.BlockBytes <= 0 {
		o.BlockBytes = 32 << 10
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Commit logs and applies a batch, visible to readers when it returns,
// and returns a wait for the durability its store promises (an fsync
// under sync durability), which the Store calls outside its locks.
type Commit func(*pebble.Batch) (wait func() error, err error)

// Store is the set of index entries of one server. Its methods are safe
// for concurrent use. Changes take effect in the order they are staged.
//
// Runs in memory go to disk on a goroutine of the Store's own (Close
// stops it); merges of runs on disk happen there too.
type Store struct {
	db         *pebble.DB
	commit     Commit
	logP, runP byte
	opt        Options

	// lmu is held from Stage to Publish or Abandon: changes become
	// visible in the order of their log records, the order a restart
	// replays them in.
	lmu sync.Mutex
	seq atomic.Uint64 // the last log sequence number taken

	// wmu guards w; cond (on wmu) wakes the flusher and the merger when
	// they have work, and writers and Flush when they finished some.
	wmu  sync.Mutex
	cond *sync.Cond
	w    struct {
		age, nextID uint64
		mem         [][]*run // by level, oldest first in each
		memBytes    int
		merged      int64        // bytes written by merges in memory, for Stats
		imm         []*run       // runs being written to disk, or nil
		flushing    bool         // the flusher is writing imm
		flushed     uint64       // flushes of imm tried, for Flush
		flushErr    error        // the last flush's error
		merging     bool         // the merger is merging a disk level
		disk        [][]*diskRun // by level, oldest first in each
		closed      bool
	}
	closing atomic.Bool    // set by Close: merges and flushes under way stop
	wg      sync.WaitGroup // the flusher and the merger

	// mu is held while the published version changes with the store's
	// contents, and while a reader takes the version and a snapshot: a
	// reader's snapshot always holds the blocks of its version's runs.
	mu  sync.Mutex
	cur *version // guarded by mu
}

// version is what readers see: every run, immutable.
type version struct {
	mem  []*run
	disk []*diskRun
}

// Open loads the store kept under the two prefixes of db: the runs on
// disk, then the log, replayed. Close stops it.
func Open(db *pebble.DB, commit Commit, logPrefix, runPrefix byte, opt Options) (*Store, error) {
	opt.ensureDefaults()
	s := &Store{db: db, commit: commit, logP: logPrefix, runP: runPrefix, opt: opt, cur: &version{}}
	s.cond = sync.NewCond(&s.wmu)
	if err := s.loadRuns(); err != nil {
		return nil, err
	}
	s.wg.Add(2)
	go s.flusher()
	go s.merger()
	s.wmu.Lock()
	err := s.replay()
	if err == nil {
		s.install()
	}
	s.wmu.Unlock()
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the flusher and the merger; a flush or merge under way
// stops too, its blocks left for the next Open to drop. Runs still in
// memory stay in the log, replayed at the next Open. It is idempotent.
func (s *Store) Close() {
	s.closing.Store(true)
	s.wmu.Lock()
	s.w.closed = true
	s.cond.Broadcast()
	s.wmu.Unlock()
	s.wg.Wait()
}

func (s *Store) commitWait(b *pebble.Batch) error {
	wait, err := s.commit(b)
	if err != nil {
		return err
	}
	return wait()
}

func (s *Store) loadRuns() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{s.runP}, UpperBound: []byte{s.runP + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	metas := map[uint64]*diskRun{}
	blocks := map[uint64]bool{}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 13 {
			return fmt.Errorf("index store: unexpected key %x: %w", k, pdc.ErrInvalid)
		}
		id, blk := binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint32(k[9:])
		s.w.nextID = max(s.w.nextID, id)
		if blk != metaBlock {
			blocks[id] = true
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		r, err := parseRunMeta(id, v)
		if err != nil {
			return err
		}
		metas[id] = r
	}
	if err := it.Error(); err != nil {
		return err
	}
	// Blocks of a run whose description never committed: a crash during
	// a flush or a merge, whose inputs are all still here.
	b := s.db.NewBatch()
	defer b.Close()
	for id := range blocks {
		if metas[id] == nil {
			_ = b.DeleteRange(s.runKey(id, 0), s.runKey(id+1, 0), nil)
		}
	}
	if !b.Empty() {
		if err := s.commitWait(b); err != nil {
			return fmt.Errorf("index store: drop unfinished runs: %w", err)
		}
	}
	runs := make([]*diskRun, 0, len(metas))
	for _, r := range metas {
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b *diskRun) int { return cmp.Compare(a.age, b.age) })
	for _, r := range runs {
		s.w.age = max(s.w.age, r.age)
		s.addDisk(r)
	}
	return nil
}

// replay publishes the log records left by the last process, in order.
// The caller holds wmu.
func (s *Store) replay() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{s.logP}, UpperBound: []byte{s.logP + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 9 {
			return fmt.Errorf("index store: unexpected key %x: %w", k, pdc.ErrInvalid)
		}
		seq := binary.BigEndian.Uint64(k[1:])
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		// buildRun copies the records: v need outlive only this step.
		ops, err := ParseOps(v)
		if err != nil {
			return fmt.Errorf("index log record %d: %w", seq, err)
		}
		r := buildRun(&ops)
		r.logs = []uint64{seq}
		s.publishLocked(r)
		s.seq.Store(max(s.seq.Load(), seq))
	}
	return it.Error()
}

// Staged is a batch of changes written into a pebble batch, to publish
// once that batch has committed.
type Staged struct {
	r *run
}

// Stage adds ops to b as one log record and returns it, nil if ops is
// empty. Until the caller calls Publish (b committed) or Abandon (it did
// not), other changes wait: they become visible in the order of their log
// records, which is the order a restart replays them in.
func (s *Store) Stage(b *pebble.Batch, ops *Ops) *Staged {
	if ops.Len() == 0 {
		return nil
	}
	r := buildRun(ops)
	s.lmu.Lock()
	seq := s.seq.Add(1)
	_ = b.Set(s.logKey(seq), ops.Bytes(), nil)
	r.logs = []uint64{seq}
	return &Staged{r: r}
}

// Publish makes staged changes, committed, visible; a nil p does nothing.
func (s *Store) Publish(p *Staged) {
	if p == nil {
		return
	}
	defer s.lmu.Unlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.publishLocked(p.r)
	s.install()
}

// Abandon forgets staged changes whose batch did not commit; a nil p does
// nothing.
func (s *Store) Abandon(p *Staged) {
	if p != nil {
		s.lmu.Unlock()
	}
}

// Apply commits ops and publishes them.
func (s *Store) Apply(ops *Ops) error {
	b := s.db.NewBatch()
	defer b.Close()
	p := s.Stage(b, ops)
	if p == nil {
		return nil
	}
	wait, err := s.commit(b)
	if err != nil {
		s.Abandon(p)
		return err
	}
	s.Publish(p)
	return wait()
}

// publishLocked adds r as the newest run and merges full levels. When
// memory is full it hands the runs to the flusher, first waiting for the
// runs it is writing, if any: memory never holds more than about twice
// FlushBytes.
func (s *Store) publishLocked(r *run) {
	s.w.age++
	r.age = s.w.age
	if len(s.w.mem) == 0 {
		s.w.mem = append(s.w.mem, nil)
	}
	s.w.mem[0] = append(s.w.mem[0], r)
	s.w.memBytes += len(r.data)
	s.mergeMemLocked()
	if s.w.memBytes < s.opt.FlushBytes {
		return
	}
	for s.w.imm != nil && !s.w.closed {
		s.cond.Wait()
	}
	if s.w.imm == nil {
		s.freezeLocked()
	}
}

// mergeMemLocked merges full levels of runs in memory: Fanout runs of a
// level become one of the next. Only the newest runs of a level are ever
// merged, so runs stay in age order across levels.
//
// A level whose merge would reach a 16th of FlushBytes is not merged
// whole: its runs wait for the flush, which merges everything anyway, and
// merging them in memory first would be one more pass over their bytes.
// Only its newest runs are merged, in tiers (mergeTailLocked), so that
// small changes (one tag at a time) do not pile up. Runs of middling size
// do pile up until the flush: readers may look in up to about a hundred
// runs in memory (a binary search each, some tens of microseconds in all).
func (s *Store) mergeMemLocked() {
	limit := s.opt.FlushBytes / 16
	for l := 0; l < len(s.w.mem) && len(s.w.mem[l]) >= s.opt.Fanout; l++ {
		runs := s.w.mem[l]
		total := 0
		for _, x := range runs {
			total += len(x.data)
		}
		if total >= limit {
			s.mergeTailLocked(l, limit)
			return
		}
		m := mergeRuns(runs, true)
		s.w.memBytes += len(m.data) - total
		s.w.merged += int64(len(m.data))
		s.w.mem[l] = nil
		if l+1 == len(s.w.mem) {
			s.w.mem = append(s.w.mem, nil)
		}
		s.w.mem[l+1] = append(s.w.mem[l+1], m)
	}
}

// mergeTailLocked merges the newest runs of level l, which holds runs too
// big to merge before the flush, in tiers: the newest runs of one size
// class (sizeClass) merge once there are Fanout of them and they stay under
// limit together, and the merged run may complete the class above. Each
// entry is copied about once per class, not once per Fanout publishes:
// merging every newest run under the limit into one made each merge copy
// one growing run again, and one-at-a-time tag puts after a bulk load cost
// 1.4 times as much as before it.
func (s *Store) mergeTailLocked(l, limit int) {
	runs := s.w.mem[l]
	for len(runs) >= s.opt.Fanout {
		n := len(runs)
		c := sizeClass(len(runs[n-1].data), s.opt.Fanout)
		j, sum := n-1, len(runs[n-1].data)
		for j > 0 && sizeClass(len(runs[j-1].data), s.opt.Fanout) <= c && sum+len(runs[j-1].data) < limit {
			j--
			sum += len(runs[j].data)
		}
		if n-j < s.opt.Fanout {
			break
		}
		m := mergeRuns(runs[j:], true)
		s.w.memBytes += len(m.data) - sum
		s.w.merged += int64(len(m.data))
		runs = append(runs[:j:j], m)
	}
	s.w.mem[l] = runs
}

// sizeClass is the tier of a run of n bytes: 0 under 4 KiB, then one more
// for each factor of fanout.
func sizeClass(n, fanout int) int {
	c := 0
	for n /= 4 << 10; n > 0; n /= fanout {
		c++
	}
	return c
}

// freezeLocked hands every run in memory to the flusher.
func (s *Store) freezeLocked() {
	for _, l := range s.w.mem {
		s.w.imm = append(s.w.imm, l...)
	}
	s.w.mem, s.w.memBytes = nil, 0
	s.cond.Broadcast()
}

// install publishes the runs for readers. The caller holds wmu.
func (s *Store) install() {
	v := s.versionLocked()
	s.mu.Lock()
	s.cur = v
	s.mu.Unlock()
}

func (s *Store) versionLocked() *version {
	v := &version{}
	for _, l := range s.w.mem {
		v.mem = append(v.mem, l...)
	}
	v.mem = append(v.mem, s.w.imm...)
	for _, l := range s.w.disk {
		v.disk = append(v.disk, l...)
	}
	return v
}

// Flush writes every run in memory to disk and waits until it is there,
// returning that flush's error.
func (s *Store) Flush() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	// Runs frozen before: wait for their next try; if it fails, so
	// does this Flush.
	for s.w.imm != nil && !s.w.closed {
		n := s.w.flushed
		for s.w.flushed == n && !s.w.closed {
			s.cond.Wait()
		}
		if s.w.imm != nil && s.w.flushErr != nil {
			return s.w.flushErr
		}
	}
	if s.w.closed {
		return fmt.Errorf("index store: %w", pdc.ErrClosed)
	}
	s.freezeLocked()
	if s.w.imm == nil {
		return nil // nothing in memory
	}
	n := s.w.flushed
	for s.w.flushed == n && !s.w.closed {
		s.cond.Wait()
	}
	if s.w.flushed == n {
		return fmt.Errorf("index store: %w", pdc.ErrClosed)
	}
	return s.w.flushErr
}

// Range calls fn for every entry with lo <= key < hi in key order (a nil
// hi: to the end). The slices are valid only during the call.
func (s *Store) Range(lo, hi []byte, fn func(k, v []byte) error) error {
	s.mu.Lock()
	v := s.cur
	var snap *pebble.Snapshot
	if len(v.disk) > 0 {
		snap = s.db.NewSnapshot()
	}
	s.mu.Unlock()
	if snap != nil {
		defer snap.Close()
	}
	cs := make([]cursor, 0, len(v.mem)+len(v.disk))
	for _, r := range v.mem {
		cs = append(cs, newMemCursor(r, lo, hi))
	}
	for _, r := range v.disk {
		if !r.overlaps(lo, hi) {
			continue
		}
		c, err := s.newDiskCursor(snap, r, lo, hi)
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	return newMerger(cs).each(func(k, v []byte, del bool, _ []byte) error {
		if del {
			return nil
		}
		return fn(k, v)
	})
}

// Reset deletes every entry. The caller makes sure no change is staged
// or applied meanwhile. It waits for a flush or merge under way, not for
// one that keeps failing: what it would write goes too.
func (s *Store) Reset() error {
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange([]byte{s.logP}, []byte{s.logP + 1}, nil)
	_ = b.DeleteRange([]byte{s.runP}, []byte{s.runP + 1}, nil)
	s.wmu.Lock()
	for (s.w.flushing || s.w.merging) && !s.w.closed {
		s.cond.Wait()
	}
	wait, err := s.commitLocked(b, func() {
		s.w.mem, s.w.memBytes, s.w.imm, s.w.disk = nil, 0, nil, nil
	})
	s.cond.Broadcast()
	s.wmu.Unlock()
	if err != nil {
		return err
	}
	return wait()
}

// Stats describes the store, for tests and logs.
type Stats struct {
	MemRuns, DiskRuns int
	MemBytes          int
	// MergedBytes counts the bytes written by merges of runs in memory
	// since Open: their work.
	MergedBytes int64
}

// Stats returns the store's current shape.
func (s *Store) Stats() Stats {
	s.wmu.Lock()
	merged := s.w.merged
	s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{MemRuns: len(s.cur.mem), DiskRuns: len(s.cur.disk), MergedBytes: merged}
	for _, r := range s.cur.mem {
		st.MemBytes += len(r.data)
	}
	return st
}
