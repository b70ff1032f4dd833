package dataserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/regionstore"
	"github.com/pdcgo/pdc/internal/wire"
)

// Slots are the stores of the data slots a data server holds (see
// placement.SlotHost and docs/design/0013-data-slots.md): its own, and
// those of servers of an earlier, larger cluster that it holds now.
type Slots struct {
	// Own is the server's own slot: the one a request naming no slot is
	// in.
	Own int
	// Stores holds each slot's store, Own's included. The Service does
	// not close them.
	Stores map[int]*regionstore.Store
	// Missing are slots this server should hold and cannot: their data is
	// on no server of this cluster. Each error says which data and why; a
	// request in one of them fails with it.
	Missing map[int]error
	// Owed keeps the dims cuts owed to the missing slots it Owes, to be
	// applied before they serve again: a cut is acknowledged though they
	// are out of reach. nil: none is kept, and a cut fails while a slot
	// is missing.
	Owed CutLedger
}

// CutLedger keeps, durably, the dims cuts owed to data slots a server
// should hold and cannot reach (slots.Ledger). Safe for concurrent use.
type CutLedger interface {
	// Owes reports whether cuts owed to slot are kept.
	Owes(slot int) bool
	// Owe records c as owed to each of slots, durably, before it
	// returns.
	Owe(slots []int, c wire.DimsCut) error
	// Count returns how many cuts owed to slot are kept.
	Count(slot int) int
}

// SlotError reports a request for a data slot that this server does not
// hold.
type SlotError struct {
	Slot int
	Rank int // this server, -1 if unknown
	Err  error
}

func (e *SlotError) Error() string {
	who := "this data server"
	if e.Rank >= 0 {
		who = fmt.Sprintf("data server of rank %d", e.Rank)
	}
	return fmt.Sprintf("data slot %d on %s: %v", e.Slot, who, e.Err)
}

func (e *SlotError) Unwrap() error { return e.Err }

// slotWait bounds how long a request waits, on the server, for the slots
// of a server that is still starting (moving data of an earlier cluster
// to it) before it is refused, as the metadata servers' requests wait.
const slotWait = 30 * time.Second

// MissingSlots describes the slots this server should hold and cannot
// ("slot 3: why"), in slot order; none before its slots are set.
func (s *Service) MissingSlots() []string {
	select {
	case <-s.slotsReady:
	default:
		return nil
	}
	keys := make([]int, 0, len(s.slots.Missing))
	for k := range s.slots.Missing {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("slot %d: %v", k, s.slots.Missing[k])
		if s.owes(k) {
			out[i] += fmt.Sprintf(" (%s owed to it kept here, applied when it is back)", plural(s.slots.Owed.Count(k), "dims cut", "dims cuts"))
		}
	}
	return out
}

// owes reports whether the dims cuts owed to missing slot are kept here.
func (s *Service) owes(slot int) bool { return s.slots.Owed != nil && s.slots.Owed.Owes(slot) }

// plural says n things.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// SetSlots gives the service the stores it serves from; requests wait
// for it (at most slotWait). Call it once; later calls are ignored.
func (s *Service) SetSlots(sl Slots) {
	s.slotsOnce.Do(func() {
		s.slots = sl
		close(s.slotsReady)
	})
}

// awaitSlots waits until SetSlots was called, under ctx and at most
// slotWait.
func (s *Service) awaitSlots(ctx context.Context) error {
	select {
	case <-s.slotsReady:
		return nil
	default:
	}
	t := time.NewTimer(slotWait)
	defer t.Stop()
	select {
	case <-s.slotsReady:
		return nil
	case <-t.C:
		return fmt.Errorf("data server still starting after %v (moving the data of an earlier cluster to its new servers): %w", slotWait, pdc.ErrUnavailable)
	case <-ctx.Done():
		return fmt.Errorf("waiting for the data server to start: %w", ctxErr(ctx, ctx.Err()))
	case <-s.quit.Done():
		return errClosing
	}
}

// slotsSet reports whether SetSlots was called.
func (s *Service) slotsSet() bool {
	select {
	case <-s.slotsReady:
		return true
	default:
		return false
	}
}

// slotStore returns the store of the slot a request names (wire
// DataItem.Slot: the slot plus one, 0 for the server's own). Call it once
// awaitSlots returned nil.
func (s *Service) slotStore(wireSlot uint32) (*regionstore.Store, error) {
	slot := s.slots.Own
	if wireSlot != 0 {
		slot = int(wireSlot - 1)
	}
	if st := s.slots.Stores[slot]; st != nil {
		return st, nil
	}
	if err := s.slots.Missing[slot]; err != nil {
		return nil, &SlotError{Slot: slot, Rank: s.cfg.Rank, Err: err}
	}
	held := make([]int, 0, len(s.slots.Stores))
	for k := range s.slots.Stores {
		held = append(held, k)
	}
	slices.Sort(held)
	return nil, &SlotError{Slot: slot, Rank: s.cfg.Rank, Err: fmt.Errorf("not held here (this server holds slots %v): the client's server list is not this cluster's: %w", held, pdc.ErrUnavailable)}
}

// oweCut keeps cut m for every slot this server should hold and cannot
// reach, durably, so that it is applied before the slot serves again. An
// error names the slots for which it could not (none is kept for them: a
// server restarted on another node, or too many already): the cut must
// not be acknowledged.
func (s *Service) oweCut(m wire.DimsCut) error {
	var owe []int
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(s.slots.Missing)) {
		if s.owes(k) {
			owe = append(owe, k)
			continue
		}
		errs = append(errs, &SlotError{Slot: k, Rank: s.cfg.Rank, Err: s.slots.Missing[k]})
	}
	if len(owe) > 0 {
		if err := s.slots.Owed.Owe(owe, m); err != nil {
			errs = append(errs, fmt.Errorf("data slots %v, out of reach: keep the cut for when they are back: %w", owe, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cut of object %d to dims %v (version %d): not applied to the data slots out of reach here: %w",
			m.Obj, m.Dims, m.DimsVersion, err)
	}
	return nil
}

// allStores returns every store the server holds, and an error naming
// the slots it should hold and cannot reach (nil if none).
func (s *Service) allStores() ([]*regionstore.Store, error) {
	out := make([]*regionstore.Store, 0, len(s.slots.Stores))
	keys := make([]int, 0, len(s.slots.Stores))
	for k := range s.slots.Stores {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, s.slots.Stores[k])
	}
	var errs []error
	for k, err := range s.slots.Missing {
		errs = append(errs, &SlotError{Slot: k, Rank: s.cfg.Rank, Err: err})
	}
	return out, errors.Join(errs...)
}
