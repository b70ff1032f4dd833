package metaserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/metastore"
)

// notFoundDurably returns err, an answer of a change that found nothing to
// change because what it names does not exist (pdc.ErrNotFound), once that
// absence is durable. A delete sent again after its first copy's commit
// was applied but its fsync failed finds the thing gone, and "not found"
// tells its client the delete is made: answered at once, a power loss
// before the store's next commit brought the thing back. Store.Settle
// costs one atomic load unless a sync failed and nothing made up for it
// since. If the store cannot make it durable, the answer is that error
// instead, without pdc.ErrNotFound: the thing may still come back.
func (s *core) notFoundDurably(err error) error {
	if !errors.Is(err, pdc.ErrNotFound) {
		return err
	}
	if serr := s.st.Settle(); serr != nil {
		return fmt.Errorf("%v, but that may not outlive a crash: %w", err, serr)
	}
	return err
}

// readDurably returns err, the outcome of a read of the store about
// subjects (nil, or pdc.ErrNotFound for something the read did not find),
// once what the read saw is durable. Under sync durability a commit is
// applied, so visible, before its fsync, and one whose fsync failed stays
// applied: a tag value, a membership or a region's server it made,
// answered at once, was gone after a power loss (or, after a delete, came
// back), and its reader had taken it as fact. So the read waits for the
// commits touching its subjects that are still in their fsync (touching),
// then Store.SettleContext makes a change whose fsync failed durable with
// a commit of its own. Both cost one atomic load when no such commit is
// under way and no sync failed. If the store cannot make it durable, the
// read answers that error (wrapping metastore.ErrUnsynced), never what it
// saw; ctx's if it ends first (a stalled disk holds the commit that
// settles), each named by what (called only then).
// Other errors are returned as they are.
func (s *core) readDurably(ctx context.Context, what func() string, err error, subjects ...uint64) error {
	if err != nil && !errors.Is(err, pdc.ErrNotFound) {
		return err
	}
	if werr := s.touches.wait(ctx, subjects...); werr != nil {
		return fmt.Errorf("%s: wait for the changes read to be durable: %w", what(), werr)
	}
	// Within ctx: after a failed sync, settling is a commit, which a
	// stalled disk keeps from returning.
	serr := s.st.SettleContext(ctx)
	switch {
	case serr == nil:
		return err
	case !errors.Is(serr, metastore.ErrUnsynced): // ctx ended first, or the store closed
		return fmt.Errorf("%s: %w", what(), serr)
	case err != nil: // as notFoundDurably
		return fmt.Errorf("%v, but that may not outlive a crash: %w", err, serr)
	}
	return fmt.Errorf("%s: the store cannot make what it holds durable, so it answers nothing of it: %w", what(), serr)
}

// scanDurably returns once what a read that scanned the store saw is
// durable: a listing or a query cannot tell which changes it saw (nor
// which deletes left something out), so it waits for every change applied
// before it (Store.AwaitDurable: two atomic loads when every commit has
// its fsync done and none failed). what names the read in an error.
func (s *core) scanDurably(ctx context.Context, what func() string) error {
	if err := s.st.AwaitDurable(ctx); err != nil {
		return fmt.Errorf("%s: the store cannot make what it holds durable, so it answers nothing of it: %w", what(), err)
	}
	return nil
}
