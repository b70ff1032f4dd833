package metaserver

import (
	"errors"
	"fmt"

	"github.com/pdcgo/pdc"
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

// readDurably returns err, the outcome of a read of the store (nil, or
// pdc.ErrNotFound for something the read did not find), once what the
// read saw is durable. Under sync durability a commit is applied, so
// visible, before its fsync, and one whose fsync failed stays applied: a
// tag value, an object, a member or a listing it made, answered at once,
// was gone after a power loss (or, after a delete, came back), and its
// reader had taken it as fact. Store.Settle makes such a change durable
// with a commit of its own, and costs one atomic load when no sync failed.
// If the store cannot make it durable, the read answers that error (what
// wraps metastore.ErrUnsynced), never what it saw. Other errors are
// returned as they are.
func (s *core) readDurably(what string, err error) error {
	if err != nil {
		return s.notFoundDurably(err)
	}
	if serr := s.st.Settle(); serr != nil {
		return fmt.Errorf("%s: the store cannot make what it holds durable, so it answers nothing of it: %w", what, serr)
	}
	return nil
}
