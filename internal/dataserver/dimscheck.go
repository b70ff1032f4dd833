package dataserver

import (
	"context"
	"fmt"
	"slices"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Lives is implemented by an Objects that can tell, with each object's
// life, its current dims and their version, as its metadata server counts
// them. A data server that has it learns them with the question it asks
// about an object it sees for the first time (admit), and refuses, as
// stale, a start older than them; and it confirms with it a start whose
// dims may cut stored data (confirmDims).
//
// Without it a data server compared a start's dims version only with the
// versions earlier starts brought it. When several set dims came with no
// transfer between them (12 rows, then 1, then 24), a write through a
// handle holding the oldest was stored, although it came after the
// regrow, and a later transfer through a handle holding the shrink, older
// than the regrow but newer than the write's, cut the rows the write had
// put there (TestStaleShrinkCutsNewerWrite in internal/e2e/region). And
// after a restart a start at dims version 0 to an object without files
// here was taken whatever its dims (TestStaleFirstTouchAfterRestart).
type Lives interface {
	// Lives tells each object's life. An error means some could not be
	// asked about.
	Lives(ctx context.Context, ids []uint64) ([]Life, error)
}

// Life is what an object's metadata server tells of it.
type Life struct {
	// Gone: the object was deleted (as Objects.Gone says).
	Gone bool
	// Never: the metadata server has never had the object: its id is
	// not handed out yet, or its create has not committed (a client
	// guessed the id). The object does not exist now and may exist
	// later, so it is refused without being remembered as deleted; the
	// next operation on it asks again. Never is not Gone.
	Never bool
	// Found: the metadata server holds the object's record, and Dims
	// and DimsVersion are its. An object neither found nor gone is one
	// whose delete is not yet durable there (a crash may bring it
	// back), or one whose record is not there yet (metadata servers
	// answer only once the records of a resize moved, so none is
	// expected): its dims are not known.
	Found       bool
	Dims        []uint64
	DimsVersion uint64
}

// mayCutLocked reports whether a start with it's layout, whose object's
// files were used with dims version floor, may cut or move stored data
// under dims newer than any seen here: dims smaller in the first dim or
// other in the rest than the newest seen, or, with none seen since this
// server started, a version newer than its files' (once per object). A
// grow, the dims of a new object, and a version already seen never may.
// The dims an object's metadata server told with its first-touch question
// (Lives) count as seen, so after a restart that question confirms them.
// s.mu is held.
func (s *Service) mayCutLocked(it wire.DataItem, floor uint64) bool {
	seen, ok := s.mu.layouts[it.Obj]
	switch {
	case it.DimsVersion == 0:
		return false
	case !ok:
		return it.DimsVersion > floor
	case it.DimsVersion <= seen.version || len(it.Dims) != len(seen.dims) || len(it.Dims) == 0:
		return false
	}
	return it.Dims[0] < seen.dims[0] || !slices.Equal(it.Dims[1:], seen.dims[1:])
}

// mustConfirm says whether confirmDims has a question to ask about a
// start of items whose files were not asked yet (startHere).
func (s *Service) mustConfirm(items []wire.DataItem) bool {
	return s.mayCut(items) || s.unleased(items)
}

// mayCut is mayCutLocked for a start whose files were not asked yet
// (startHere): with none seen, any dims changed since create may cut.
func (s *Service) mayCut(items []wire.DataItem) bool {
	if _, ok := s.cfg.Objects.(Lives); !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range items {
		if s.mayCutLocked(it, 0) {
			return true
		}
	}
	return false
}

// confirmDims refuses, as stale, a start of ts whose dims may cut stored
// data (mayCutLocked), or a write whose object's dims lease ended
// (lease.go), and are older than its object's metadata server's; the
// question renews the leases of the objects it finds. It costs a round
// trip only after a shrink newer than the dims the object's first touch
// learned, or once per object and lease while it is written. A set dims
// between the question and the start's registration is seen there if it
// can matter: one that may cut stored data is pushed here (MethodDataCut)
// before it is answered, and the push and the registration are ordered
// by s.mu (the older start is refused, or the cut waits for its write); a
// grow cuts nothing, and a write under it registered here first refuses
// the start (TestDimsChangedWhileConfirming).
func (s *Service) confirmDims(ctx context.Context, ts []*transfer) error {
	asker, ok := s.cfg.Objects.(Lives)
	if !ok {
		return nil
	}
	var ids, versions []uint64
	now := s.now()
	s.mu.Lock()
	for _, t := range ts {
		if t == nil || !s.mayCutLocked(t.item, t.floor) && (!t.item.Write || s.heldLocked(t.item.Obj, now)) {
			continue
		}
		if i := slices.Index(ids, t.item.Obj); i >= 0 {
			versions[i] = min(versions[i], t.item.DimsVersion)
			continue
		}
		ids, versions = append(ids, t.item.Obj), append(versions, t.item.DimsVersion)
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	sent := s.now()
	lives, err := asker.Lives(ctx, ids)
	if err == nil && len(lives) != len(ids) {
		err = fmt.Errorf("asked about %d objects, told about %d: %w", len(ids), len(lives), pdc.ErrInternal)
	}
	if err != nil {
		return fmt.Errorf("confirm the dims of %d objects: %w", len(ids), err)
	}
	s.mu.Lock()
	for i, id := range ids {
		if lives[i].Found {
			s.confirmedLocked(id, sent, lives[i])
		}
	}
	s.mu.Unlock()
	for i, id := range ids {
		switch l := lives[i]; {
		case l.Gone:
			return errDeleted(id)
		case l.Never:
			return errNeverCreated(id)
		case !l.Found:
			// Not known deleted, and its dims not known: a start
			// that may cut must not go on unconfirmed (it did, as if
			// the object had no newer dims). A later start may be
			// confirmed.
			return fmt.Errorf("object %d: its metadata server does not hold it and does not know it deleted (its delete is not yet durable, or it is moving between metadata servers); cannot confirm dims version %d: %w",
				id, versions[i], pdc.ErrUnavailable)
		case versions[i] < l.DimsVersion:
			return fmt.Errorf("object %d: dims version %d is older than version %d its metadata server has: %w",
				id, versions[i], l.DimsVersion, pdc.ErrStale)
		}
	}
	return nil
}
