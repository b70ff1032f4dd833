package dataserver

import (
	"context"
	"fmt"
	"slices"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// DimsVersions is implemented by an Objects that can tell objects'
// current dims versions, as their metadata servers count them. A data
// server that has it refuses, as stale, a start whose dims may cut stored
// data and are older than the metadata server's.
//
// Without it a data server compared a start's dims version only with the
// versions earlier starts brought it. When several set dims came with no
// transfer between them (12 rows, then 1, then 24), a write through a
// handle holding the oldest was stored, although it came after the
// regrow, and a later transfer through a handle holding the shrink, older
// than the regrow but newer than the write's, cut the rows the write had
// put there (TestStaleShrinkCutsNewerWrite in internal/e2e/region).
type DimsVersions interface {
	// DimsVersions returns each object's current dims version; 0 for
	// one that no longer exists. An error means some could not be asked
	// about.
	DimsVersions(ctx context.Context, ids []uint64) ([]uint64, error)
}

// mayCutLocked reports whether a start with it's layout, whose object's
// files were used with dims version floor, may cut or move stored data
// under dims newer than any seen here: dims smaller in the first dim or
// other in the rest than the newest seen, or, with none seen since this
// server started, a version newer than its files' (once per object). A
// grow, the dims of a new object, and a version already seen never may.
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

// mayCut is mayCutLocked for a start whose files were not asked yet
// (startHere): with none seen, any dims changed since create may cut.
func (s *Service) mayCut(items []wire.DataItem) bool {
	if _, ok := s.cfg.Objects.(DimsVersions); !ok {
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
// data (mayCutLocked) and are older than its object's metadata server's.
// The question costs a round trip only after a shrink, or once per object
// after a restart. A set dims between the question and the start's
// registration is not seen: its version reaches this server with the
// next transfer that carries it.
func (s *Service) confirmDims(ctx context.Context, ts []*transfer) error {
	asker, ok := s.cfg.Objects.(DimsVersions)
	if !ok {
		return nil
	}
	var ids, versions []uint64
	s.mu.Lock()
	for _, t := range ts {
		if t == nil || !s.mayCutLocked(t.item, t.floor) {
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
	now, err := asker.DimsVersions(ctx, ids)
	if err == nil && len(now) != len(ids) {
		err = fmt.Errorf("asked about %d objects, told about %d: %w", len(ids), len(now), pdc.ErrInternal)
	}
	if err != nil {
		return fmt.Errorf("confirm the dims of %d objects: %w", len(ids), err)
	}
	for i, id := range ids {
		if versions[i] < now[i] {
			return fmt.Errorf("object %d: dims version %d is older than version %d its metadata server has: %w",
				id, versions[i], now[i], pdc.ErrStale)
		}
	}
	return nil
}
