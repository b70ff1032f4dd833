package dataserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Deleted objects (docs/design/0016-deleted-objects.md). A data server
// refuses every operation on an object whose metadata is gone, so that a
// handle opened before a delete, in any process, cannot write a file that
// no metadata names. It learns that an object lives by asking the
// object's metadata server the first time it sees it (admit), then
// remembers; it learns that one is gone from the tombstone the metadata
// server pushes when it deletes it (MethodDataGone, bury), or from that
// first question. Object ids are never reused, so what it learns never
// changes back.

// Objects tells a data server which objects still exist: the metadata
// servers holding them are asked.
type Objects interface {
	// Gone reports, for each id, whether the object does not exist: it
	// was deleted (ids are never reused), or, without Lives to tell them
	// apart, it was never created. An error means some of them could not
	// be asked about (a metadata server is down or starting).
	Gone(ctx context.Context, ids []uint64) ([]bool, error)
}

// life is what this server knows of an object's life.
type life uint8

const (
	lifeUnknown life = iota
	lifeAlive
	lifeDead
)

// lifeCheck is a question about an object's life under way: admits of
// the same object wait for it instead of asking again.
type lifeCheck struct {
	done chan struct{}
	err  error // set before done is closed
	// buried: a tombstone came while the question was out; the answer
	// must not make the object alive. Guarded by Service.mu.
	buried bool
	// never: the answer was that the object was never created; err says
	// so. Set before done is closed.
	never bool
}

// errDeleted is the error of an operation on a deleted object.
func errDeleted(obj uint64) error {
	return fmt.Errorf("object %d was deleted: %w", obj, pdc.ErrNotFound)
}

// errNeverCreated is the error of an operation on an object its metadata
// server has not created (yet).
func errNeverCreated(obj uint64) error {
	return fmt.Errorf("object %d does not exist: its metadata server has not created it: %w", obj, pdc.ErrNotFound)
}

// admitNow is admit without waiting: it reports whether every object of
// items is known alive here; an error names one known to be deleted.
func (s *Service) admitNow(items []wire.DataItem) (bool, error) {
	if s.cfg.Objects == nil {
		return true, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var last uint64
	for i, it := range items {
		if i > 0 && it.Obj == last {
			continue
		}
		last = it.Obj
		switch s.mu.lives[it.Obj] {
		case lifeAlive:
		case lifeDead:
			return false, errDeleted(it.Obj)
		default:
			return false, nil
		}
	}
	return true, nil
}

// admit returns once every object of items is known alive here, asking
// their metadata servers about those seen for the first time; an error
// names an object that is deleted, or one whose metadata server could
// not say.
func (s *Service) admit(ctx context.Context, items []wire.DataItem) error {
	// Objects known alive, nearly every call, cost one look under the
	// lock: no list of ids, no second pass.
	if known, err := s.admitNow(items); known || err != nil {
		return err
	}
	ids := make([]uint64, 0, 1)
	for i, it := range items {
		if i == 0 || it.Obj != items[i-1].Obj {
			ids = append(ids, it.Obj)
		}
	}
	return s.admitIDs(ctx, ids)
}

// lifeAskWait bounds a question about objects' lives, whoever waits
// for it.
const lifeAskWait = 30 * time.Second

// ask asks the metadata servers whether the objects ids (their checks
// mine) still exist, records the answer and ends the checks.
func (s *Service) ask(ids []uint64, mine []*lifeCheck) {
	ctx, cancel := context.WithTimeout(s.quit, lifeAskWait)
	defer cancel()
	sent := s.now()
	lives, err := s.lives(ctx, ids)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, id := range ids {
		c := mine[i]
		delete(s.mu.checks, id)
		switch {
		case c.buried || err == nil && lives[i].Gone:
			s.mu.lives[id] = lifeDead
		case err == nil && lives[i].Never:
			// Not remembered: the object may be created later, and
			// ids are predictable, so an operation on one that does not
			// exist yet must not refuse it once it does.
			c.never, c.err = true, errNeverCreated(id)
		case err == nil:
			s.mu.lives[id] = lifeAlive
			if l := lives[i]; l.Found {
				// The dims its metadata server has: a start older than
				// them is stale, whether or not a transfer brought them
				// (after a restart, none has). Their lease begins.
				s.confirmedLocked(id, sent, l)
			}
		default:
			c.err = err
		}
		close(c.done)
	}
}

// lives asks the metadata servers about the objects ids: with their dims
// if Objects can tell them (Lives), else only whether they are gone.
func (s *Service) lives(ctx context.Context, ids []uint64) ([]Life, error) {
	var out []Life
	if asker, ok := s.cfg.Objects.(Lives); ok {
		var err error
		if out, err = asker.Lives(ctx, ids); err != nil {
			return nil, err
		}
	} else {
		gone, err := s.cfg.Objects.Gone(ctx, ids)
		if err != nil {
			return nil, err
		}
		out = make([]Life, len(gone))
		for i, g := range gone {
			out[i].Gone = g
		}
	}
	if len(out) != len(ids) {
		return nil, fmt.Errorf("asked about %d objects, told about %d: %w", len(ids), len(out), pdc.ErrInternal)
	}
	return out, nil
}

func (s *Service) admitIDs(ctx context.Context, ids []uint64) error {
	if s.cfg.Objects == nil {
		return nil
	}
	var ask []uint64
	var mine, theirs []*lifeCheck
	var theirIDs []uint64
	s.mu.Lock()
	// Refused whole before any question is opened: a question opened
	// and then left without its asker would hold its waiters.
	for _, id := range ids {
		if s.mu.lives[id] == lifeDead {
			s.mu.Unlock()
			return errDeleted(id)
		}
	}
	if len(ids) > 0 && s.mu.closed {
		s.mu.Unlock()
		return errClosing
	}
	for _, id := range ids {
		if s.mu.lives[id] == lifeAlive {
			continue
		}
		if c := s.mu.checks[id]; c == nil {
			c = &lifeCheck{done: make(chan struct{})}
			s.mu.checks[id] = c
			ask, mine = append(ask, id), append(mine, c)
		}
		theirs, theirIDs = append(theirs, s.mu.checks[id]), append(theirIDs, id)
	}
	if len(ask) > 0 {
		// The question is the service's, not this caller's: others
		// wait for its answer under their own deadlines, which a
		// short one of the asker's (startHere's) must not cut.
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			s.ask(ask, mine)
		}()
	}
	s.mu.Unlock()
	for i, c := range theirs {
		select {
		case <-c.done:
		case <-ctx.Done():
			return fmt.Errorf("object %d: waiting to learn whether it still exists: %w", theirIDs[i], ctxErr(ctx, ctx.Err()))
		}
		if c.never {
			return c.err
		}
		if c.err != nil {
			return fmt.Errorf("object %d: cannot tell whether it still exists: %w", theirIDs[i], c.err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if s.mu.lives[id] == lifeDead {
			return errDeleted(id)
		}
	}
	return nil
}

// deadLocked refuses an object known to be deleted. s.mu is held: a
// transfer registered under it after bury marked the object dead would
// bring a file back.
func (s *Service) deadLocked(obj uint64) error {
	if s.mu.lives[obj] == lifeDead {
		return errDeleted(obj)
	}
	return nil
}

// maxGone bounds the ids of one MethodDataGone request.
const maxGone = 1 << 16

// gone is MethodDataGone: the metadata server deleted these objects.
func (s *Service) gone(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.IDList
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	if len(m.IDs) > maxGone {
		return nil, fmt.Errorf("tombstones of %d objects in one request, over the limit of %d: %w", len(m.IDs), maxGone, pdc.ErrTooLarge)
	}
	if err := s.bury(ctx, m.IDs, false); err != nil {
		return nil, err
	}
	return &rpc.Response{}, nil
}

// bury refuses every later operation on the objects and removes their
// files, once the writes registered before are done (they would bring
// the files back). purge removes files the store did not see at start
// too (a scrub found them).
func (s *Service) bury(ctx context.Context, ids []uint64, purge bool) error {
	var pending []*transfer
	s.mu.Lock()
	for _, id := range ids {
		c := s.mu.checks[id]
		if c != nil {
			c.buried = true
		}
		// An object never admitted here has no transfer registered and
		// none between its admit and its registration: it needs no
		// entry (a later admit asks, and is told it is gone). Not
		// keeping one bounds the memory to the objects used here.
		if c != nil || s.mu.lives[id] != lifeUnknown || s.cfg.Objects == nil {
			s.mu.lives[id] = lifeDead
		}
		for w := range s.mu.writes[id] {
			pending = append(pending, w)
		}
	}
	s.mu.Unlock()
	for _, w := range pending {
		select {
		case <-w.done:
		case <-ctx.Done():
			return fmt.Errorf("object %d: waiting for its writes under way before removing its data: %w", w.item.Obj, ctxErr(ctx, ctx.Err()))
		}
	}
	if err := s.awaitSlots(ctx); err != nil {
		return err
	}
	// Slots this server cannot reach are left alone: the objects' data
	// there, if any, is found as orphaned when they come back.
	stores, _ := s.allStores()
	var errs []error
	for _, st := range stores {
		for _, id := range ids {
			bury := st.Bury
			if purge {
				bury = st.Purge
			}
			if err := bury(id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	s.mu.Lock()
	for _, id := range ids {
		delete(s.mu.layouts, id)
		delete(s.mu.confirmed, id)
	}
	s.mu.Unlock()
	return errors.Join(errs...)
}
