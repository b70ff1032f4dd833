package regionstore

import (
	"fmt"

	"github.com/pdcgo/pdc"
)

// errGone is the error of every call on a buried object.
func errGone(obj uint64) error {
	return fmt.Errorf("region store: object %d was deleted: %w", obj, pdc.ErrNotFound)
}

// fileExts are the names an object's files may have, after its id.
var fileExts = []string{".off", ".reg", ".idx", ".off.tmp", ".reg.tmp", ".idx.tmp", ".off" + unsyncedExt, ".reg" + unsyncedExt}

// Bury deletes object obj for good: it removes its files, as Delete does,
// and, if the store has used the object since it opened, refuses every
// later call on it (writes, reads, views, flushes) with an error wrapping
// pdc.ErrNotFound for as long as the store is open. Calls already holding
// the object finish first, and their files go with the rest. The caller
// must have stopped new writes to obj before (a data server refuses the
// object once it knows it is gone): of an object the store has not used,
// Bury removes the files without remembering it, and of one that had no
// files at Open it does nothing, so that tombstones of objects held
// elsewhere cost neither memory nor system calls. Object ids are never
// reused, so a buried id never needs to come back. Burying an object
// again, or one that never had files, is not an error.
func (s *Store) Bury(obj uint64) error { return s.bury(obj, false) }

// Purge is Bury of an object whose files are in the directory whether or
// not they were there at Open (put there behind the store's back): a
// scrub found them.
func (s *Store) Purge(obj uint64) error { return s.bury(obj, true) }

func (s *Store) bury(obj uint64, force bool) error {
	if force {
		s.mu.Lock()
		if s.mu.objects[obj] == nil && !s.closed.Load() {
			s.mu.onDisk[obj] = struct{}{}
		}
		s.mu.Unlock()
	}
	if err := s.delete(obj, true); err != nil {
		return err
	}
	if s.opts.Sync {
		if err := s.fs.SyncDir(s.opts.Dir); err != nil {
			return fmt.Errorf("region store: delete object %d: %w", obj, err)
		}
	}
	return nil
}

// Buried reports whether object obj was buried since the store opened
// (and used before).
func (s *Store) Buried(obj uint64) bool {
	s.mu.Lock()
	o := s.mu.objects[obj]
	s.mu.Unlock()
	if o == nil {
		return false
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.gone
}
