package dataserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// cut is MethodDataCut: the metadata server changed an object's dims by
// a shrink or a relayout, and pushes them here before any later dims
// version can come (docs/design/0006-region-io.md, "Dims versions"). They
// are applied as if a transfer had carried them: from now on a transfer
// with older dims is refused as stale, the writes registered before are
// stored first (cut after, they would leave rows past the shrink that a
// regrow would read back), and the object's files are cut and their dims
// version raised, durably. Without it a shrink that no transfer carried
// cut nothing: set dims 27, write every row, set dims 8, then 26, and rows
// 8-25 read their old values.
func (s *Service) cut(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.DimsCut
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	if len(m.Dims) == 0 || m.DimsVersion == 0 {
		return nil, fmt.Errorf("cut of object %d: dims %v, version %d: %w", m.Obj, m.Dims, m.DimsVersion, pdc.ErrInvalid)
	}
	var pending []*transfer
	s.mu.Lock()
	if seen, ok := s.mu.layouts[m.Obj]; !ok || m.DimsVersion > seen.version {
		s.mu.layouts[m.Obj] = layoutSeen{version: m.DimsVersion, dims: m.Dims}
	}
	for w := range s.mu.writes[m.Obj] {
		if w.item.DimsVersion < m.DimsVersion {
			pending = append(pending, w)
		}
	}
	s.mu.Unlock()
	for _, w := range pending {
		select {
		case <-w.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("object %d: waiting for its writes under way before cutting it to dims %v: %w", m.Obj, m.Dims, ctxErr(ctx, ctx.Err()))
		}
	}
	if err := s.awaitSlots(ctx); err != nil {
		return nil, err
	}
	// A slot this server should hold and cannot reach comes back at a
	// later start with its files as they were, and an acknowledged cut
	// is forgotten by the metadata server, so a regrow would read back
	// there the rows it dropped. So the cut is kept for the slot, durably,
	// before it is acknowledged, and the start that finds the slot again
	// applies it before the slot serves (slots.Ledger). Where none can be
	// kept, the cut fails after the slots here are cut: it stays pending
	// and is pushed again, and the object's next set dims waits for it.
	// (A delete may leave such a slot alone: the object's data there is
	// found orphaned when it is back. A cut object is not orphaned.)
	stores, _ := s.allStores()
	var errs []error
	for _, st := range stores {
		if err := st.Cut(m.Obj, m.Dims, m.DimsVersion); err != nil && !errors.Is(err, pdc.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	if err := s.oweCut(m); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &rpc.Response{}, nil
}
