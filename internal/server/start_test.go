package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestIndexStartFatal(t *testing.T) {
	for _, c := range []struct {
		err   error
		fatal bool
	}{
		{nil, false},
		{fmt.Errorf("tag index update: %w", context.DeadlineExceeded), false},
		{fmt.Errorf("tag index update: %w", context.Canceled), false},
		{fmt.Errorf("tag index outbox: %w", errors.New("apply this server's part of outbox record 7: metadata store is closed")), true},
	} {
		if got := indexStartFatal(c.err); got != c.fatal {
			t.Errorf("indexStartFatal(%v) = %v, want %v", c.err, got, c.fatal)
		}
	}
}
