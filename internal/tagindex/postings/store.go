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
)

// Options tune a Store; zero fields take their defaults.
type Options struct {
	// FlushBytes is how many bytes of records the runs in memory hold
	// before they go to disk as one run (default 32 MiB).
	FlushBytes int
	// Fanout is how many runs of a level are merged into one of the next
	// (default 16). More makes fewer merges for writers and more runs for
	// readers to look in.
	Fanout int
	// BlockBytes is the size of a block of a run on disk (default 32 KiB).
	BlockBytes int
	// Logger reports flushes that failed (they are retried at the next
	// change); nil discards.
	Logger *slog.Logger
}

func (o *Options) ensureDefaults() {
	if o.FlushBytes <= 0 {
		o.FlushBytes = 32 << 20
	}
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

// Store is the set of index entries of one server. Its methods are safe
// for concurrent use. Changes take effect in the order of Publish (and
// Apply) calls.
type Store struct {
	db         *pebble.DB
	commit     func(*pebble.Batch) error
	logP, runP byte
	opt        Options

	seq atomic.Uint64 // the last log sequence number taken

	// wmu serializes publishing, merging and flushing.
	wmu sync.Mutex
	w   struct {
		age, nextID uint64
		mem         [][]*run // by level, oldest first in each
		memBytes    int
		disk        [][]*diskRun // by level, oldest first in each
	}

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
// disk, then the log, replayed. commit commits a batch as durably as the
// caller's store promises.
func Open(db *pebble.DB, commit func(*pebble.Batch) error, logPrefix, runPrefix byte, opt Options) (*Store, error) {
	opt.ensureDefaults()
	s := &Store{db: db, commit: commit, logP: logPrefix, runP: runPrefix, opt: opt, cur: &version{}}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.loadRuns(); err != nil {
		return nil, err
	}
	if err := s.replay(); err != nil {
		return nil, err
	}
	s.install()
	return s, nil
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
			return fmt.Errorf("index store: unexpected key %x", k)
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
		if err := s.commit(b); err != nil {
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
		for len(s.w.disk) <= r.level {
			s.w.disk = append(s.w.disk, nil)
		}
		s.w.disk[r.level] = append(s.w.disk[r.level], r)
	}
	return nil
}

func (s *Store) replay() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{s.logP}, UpperBound: []byte{s.logP + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 9 {
			return fmt.Errorf("index store: unexpected key %x", k)
		}
		seq := binary.BigEndian.Uint64(k[1:])
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		ops, err := ParseOps(slices.Clone(v))
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

// Stage adds ops to b as one log record and returns it to Publish after b
// commits; nil if ops is empty. The caller orders Publish calls.
func (s *Store) Stage(b *pebble.Batch, ops *Ops) *Staged {
	if ops.Len() == 0 {
		return nil
	}
	seq := s.seq.Add(1)
	_ = b.Set(s.logKey(seq), ops.Bytes(), nil)
	r := buildRun(ops)
	r.logs = []uint64{seq}
	return &Staged{r: r}
}

// Publish makes committed staged changes visible; a nil p does nothing.
func (s *Store) Publish(p *Staged) {
	if p == nil {
		return
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.publishLocked(p.r)
	s.install()
}

// Apply commits ops and publishes them.
func (s *Store) Apply(ops *Ops) error {
	b := s.db.NewBatch()
	defer b.Close()
	p := s.Stage(b, ops)
	if p == nil {
		return nil
	}
	if err := s.commit(b); err != nil {
		return err
	}
	s.Publish(p)
	return nil
}

// publishLocked adds r as the newest run, then merges full levels and
// flushes when memory is full.
func (s *Store) publishLocked(r *run) {
	s.w.age++
	r.age = s.w.age
	if len(s.w.mem) == 0 {
		s.w.mem = append(s.w.mem, nil)
	}
	s.w.mem[0] = append(s.w.mem[0], r)
	s.w.memBytes += len(r.data)
	for l := 0; l < len(s.w.mem) && len(s.w.mem[l]) >= s.opt.Fanout; l++ {
		m := mergeRuns(s.w.mem[l], true)
		for _, x := range s.w.mem[l] {
			s.w.memBytes -= len(x.data)
		}
		s.w.memBytes += len(m.data)
		s.w.mem[l] = nil
		if l+1 == len(s.w.mem) {
			s.w.mem = append(s.w.mem, nil)
		}
		s.w.mem[l+1] = append(s.w.mem[l+1], m)
	}
	if s.w.memBytes >= s.opt.FlushBytes {
		if err := s.flushLocked(); err != nil {
			s.opt.Logger.Warn("could not move tag index entries to disk; they stay in memory and the log", "err", err)
		}
	}
}

// install publishes the runs for readers.
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
	for _, l := range s.w.disk {
		v.disk = append(v.disk, l...)
	}
	return v
}

// flushLocked merges every run in memory into a run on disk, deleting the
// log records they hold in the same batch, then merges full disk levels.
func (s *Store) flushLocked() error {
	var runs []*run
	var cs []cursor
	var age uint64
	for _, l := range s.w.mem {
		for _, r := range l {
			runs = append(runs, r)
			cs = append(cs, newMemCursor(r, nil, nil))
			age = max(age, r.age)
		}
	}
	if len(runs) == 0 {
		return nil
	}
	w := s.newRunWriter(0, age)
	b, err := s.writeRun(w, cs, len(s.w.disk) > 0)
	if err != nil {
		return err
	}
	defer b.Close()
	for _, r := range runs {
		for _, seq := range r.logs {
			_ = b.Delete(s.logKey(seq), nil)
		}
	}
	if err := s.commitVersionWith(b, func() {
		s.w.mem, s.w.memBytes = nil, 0
		s.addDisk(w.r)
	}); err != nil {
		return err
	}
	return s.mergeDiskLocked()
}

// commitVersionWith commits b, then changes the state with change and
// publishes it, readers seeing both at once.
func (s *Store) commitVersionWith(b *pebble.Batch, change func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.commit(b); err != nil {
		return err
	}
	change()
	s.cur = s.versionLocked()
	return nil
}

func (s *Store) addDisk(r *diskRun) {
	if r.count == 0 {
		return
	}
	for len(s.w.disk) <= r.level {
		s.w.disk = append(s.w.disk, nil)
	}
	s.w.disk[r.level] = append(s.w.disk[r.level], r)
}

// writeRun writes the merge of cs as w's run and returns the batch that
// commits it.
func (s *Store) writeRun(w *runWriter, cs []cursor, keepDeletes bool) (*pebble.Batch, error) {
	err := newMerger(cs).each(func(k, _ []byte, del bool, raw []byte) error {
		if del && !keepDeletes {
			return nil
		}
		return w.add(k, raw)
	})
	if err != nil {
		w.b.Close()
		return nil, err
	}
	return w.finish()
}

// mergeDiskLocked merges the runs of every full disk level into one run of
// the next level.
func (s *Store) mergeDiskLocked() error {
	for l := 0; l < len(s.w.disk) && len(s.w.disk[l]) >= s.opt.Fanout; l++ {
		olds := s.w.disk[l]
		var cs []cursor
		var age uint64
		for _, r := range olds {
			c, err := s.newDiskCursor(s.db, r, nil, nil)
			if err != nil {
				return err
			}
			cs = append(cs, c)
			age = max(age, r.age)
		}
		older := false
		for _, rs := range s.w.disk[l+1:] {
			older = older || len(rs) > 0
		}
		w := s.newRunWriter(l+1, age)
		b, err := s.writeRun(w, cs, older)
		if err != nil {
			return err
		}
		for _, r := range olds {
			_ = b.DeleteRange(s.runKey(r.id, 0), s.runKey(r.id+1, 0), nil)
		}
		err = s.commitVersionWith(b, func() {
			s.w.disk[l] = nil
			s.addDisk(w.r)
		})
		b.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Flush moves every run in memory to disk now.
func (s *Store) Flush() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.flushLocked()
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

// Reset deletes every entry.
func (s *Store) Reset() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange([]byte{s.logP}, []byte{s.logP + 1}, nil)
	_ = b.DeleteRange([]byte{s.runP}, []byte{s.runP + 1}, nil)
	return s.commitVersionWith(b, func() {
		s.w.mem, s.w.memBytes, s.w.disk = nil, 0, nil
	})
}

// Stats describes the store, for tests and logs.
type Stats struct {
	MemRuns, DiskRuns int
	MemBytes          int
}

// Stats returns the store's current shape.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{MemRuns: len(s.cur.mem), DiskRuns: len(s.cur.disk)}
	for _, r := range s.cur.mem {
		st.MemBytes += len(r.data)
	}
	return st
}
