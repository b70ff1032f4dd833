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
// costs one lock unless a sync failed and nothing made up for it since.
// If the store cannot make it durable, the answer is that error instead,
// without pdc.ErrNotFound: the thing may still come back.
func (s *core) notFoundDurably(err error) error {
	if !errors.Is(err, pdc.ErrNotFound) {
		return err
	}
	if serr := s.st.Settle(); serr != nil {
		return fmt.Errorf("%v, but that may not outlive a crash: %w", err, serr)
	}
	return err
}
