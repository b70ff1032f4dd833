package postings

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pdcgo/pdc"
)

// The store's two goroutines: the flusher writes runs frozen in memory to
// disk, the merger merges full levels of runs on disk. Both commit their
// runs with commitRun, which publishes the new runs to readers together
// with the commit.

// flusher writes frozen runs to disk, until Close. A failure is logged and
// tried again after a pause.
func (s *Store) flusher() {
	defer s.wg.Done()
	var pause time.Duration
	for {
		s.wmu.Lock()
		for s.w.imm == nil && !s.w.closed {
			s.cond.Wait()
		}
		if s.w.closed {
			s.wmu.Unlock()
			return
		}
		imm := s.w.imm
		s.w.nextID++
		id := s.w.nextID
		older := false
		for _, l := range s.w.disk {
			older = older || len(l) > 0
		}
		s.w.flushing = true
		s.wmu.Unlock()

		err := s.flush(imm, id, older)
		s.wmu.Lock()
		s.w.flushing = false
		s.w.flushed++
		s.w.flushErr = err
		s.cond.Broadcast()
		s.wmu.Unlock()
		if !s.afterTry(err, &pause, "could not write tag index entries to disk; they stay in memory and in the log, and are tried again") {
			return
		}
	}
}

// merger merges the runs of a full disk level into one run of the next,
// until Close: on a goroutine of its own, so that flushes, which writers
// may wait for, never wait behind a merge.
func (s *Store) merger() {
	defer s.wg.Done()
	var pause time.Duration
	for {
		s.wmu.Lock()
		l := -1
		for !s.w.closed {
			if l = s.fullLevelLocked(); l >= 0 {
				break
			}
			s.cond.Wait()
		}
		if s.w.closed {
			s.wmu.Unlock()
			return
		}
		olds := slices.Clone(s.w.disk[l])
		older := false
		for _, rs := range s.w.disk[l+1:] {
			older = older || len(rs) > 0
		}
		s.w.nextID++
		id := s.w.nextID
		s.w.merging = true
		s.wmu.Unlock()

		err := s.mergeLevel(l, olds, id, older)
		s.wmu.Lock()
		s.w.merging = false
		s.cond.Broadcast()
		s.wmu.Unlock()
		if !s.afterTry(err, &pause, "could not merge tag index runs on disk; tried again") {
			return
		}
	}
}

// afterTry follows a flush or merge: after a failure it logs msg and
// waits a pause that grows with each failure in a row. It returns false
// once the store is closing.
func (s *Store) afterTry(err error, pause *time.Duration, msg string) bool {
	if err == nil {
		*pause = 0
		return true
	}
	if s.closing.Load() {
		return false
	}
	s.opt.Logger.Warn(msg, "err", err)
	*pause = min(max(2**pause, 100*time.Millisecond), 10*time.Second)
	return s.sleep(*pause)
}

// fullLevelLocked returns the lowest disk level with Fanout runs, or -1.
func (s *Store) fullLevelLocked() int {
	for l, rs := range s.w.disk {
		if len(rs) >= s.opt.Fanout {
			return l
		}
	}
	return -1
}

// sleep waits d or until Close; it returns false on Close.
func (s *Store) sleep(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		s.wmu.Lock()
		s.cond.Broadcast()
		s.wmu.Unlock()
	})
	defer stop()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for ctx.Err() == nil && !s.w.closed {
		s.cond.Wait()
	}
	return !s.w.closed
}

// flush writes runs as disk run id, deleting the log records they hold in
// the batch that commits it, then drops them from memory.
func (s *Store) flush(runs []*run, id uint64, older bool) error {
	var cs []cursor
	var age uint64
	for _, r := range runs {
		cs = append(cs, newMemCursor(r, nil, nil))
		age = max(age, r.age)
	}
	w := s.newRunWriter(id, 0, age)
	b, err := s.writeRun(w, cs, older)
	if err != nil {
		return err
	}
	defer b.Close()
	for _, r := range runs {
		for _, seq := range r.logs {
			_ = b.Delete(s.logKey(seq), nil)
		}
	}
	return s.commitRun(w, b, func() {
		s.w.imm = nil
		s.addDisk(w.r)
	})
}

// mergeLevel merges olds, the oldest runs of disk level l, into run id of
// level l+1. Flushes may add runs to level l meanwhile, newer than olds.
func (s *Store) mergeLevel(l int, olds []*diskRun, id uint64, older bool) error {
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
	w := s.newRunWriter(id, l+1, age)
	b, err := s.writeRun(w, cs, older)
	if err != nil {
		return err
	}
	defer b.Close()
	for _, r := range olds {
		_ = b.DeleteRange(s.runKey(r.id, 0), s.runKey(r.id+1, 0), nil)
	}
	return s.commitRun(w, b, func() {
		s.w.disk[l] = s.w.disk[l][len(olds):]
		s.addDisk(w.r)
	})
}

// commitRun commits b, which finishes w's run, changing the state with
// change. If the commit failed it drops the run's blocks.
func (s *Store) commitRun(w *runWriter, b *pebble.Batch, change func()) error {
	s.wmu.Lock()
	wait, err := s.commitLocked(b, change)
	s.cond.Broadcast()
	s.wmu.Unlock()
	if err != nil {
		w.drop()
		return err
	}
	return wait()
}

// commitLocked commits b, changes the state with change, and publishes
// it, readers seeing both at once. It returns the wait for durability,
// which the caller calls after unlocking wmu. The caller holds wmu.
func (s *Store) commitLocked(b *pebble.Batch, change func()) (wait func() error, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wait, err = s.commit(b); err != nil {
		return nil, err
	}
	change()
	s.cur = s.versionLocked()
	return wait, nil
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

// errClosing stops a flush or merge when the store closes.
var errClosing = fmt.Errorf("index store is closing: %w", pdc.ErrClosed)

// writeRun writes the merge of cs as w's run and returns the batch that
// commits it. On failure it removes the blocks it committed already.
func (s *Store) writeRun(w *runWriter, cs []cursor, keepDeletes bool) (*pebble.Batch, error) {
	n := 0
	err := newMerger(cs).each(func(k, _ []byte, del bool, raw []byte) error {
		if n++; n%4096 == 0 && s.closing.Load() {
			return errClosing
		}
		if del && !keepDeletes {
			return nil
		}
		return w.add(k, raw)
	})
	var b *pebble.Batch
	if err == nil {
		b, err = w.finish()
	} else {
		w.b.Close()
	}
	if err != nil {
		w.drop()
		return nil, err
	}
	return b, nil
}
