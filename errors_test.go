package pdc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
)

// pastDeadline is a context whose deadline has passed but whose timer has
// not fired yet: Err is still nil.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

func TestCtxErr(t *testing.T) {
	if err := pdc.CtxErr(context.Background()); err != nil {
		t.Fatalf("live context: %v; want nil", err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := pdc.CtxErr(canceled); !errors.Is(err, pdc.ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: %v; want ErrCanceled", err)
	}
	expired, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	if err := pdc.CtxErr(expired); !errors.Is(err, pdc.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired context: %v; want ErrTimeout", err)
	}
	if err := pdc.CtxErr(pastDeadline{context.Background()}); !errors.Is(err, pdc.ErrTimeout) {
		t.Fatalf("context past its deadline before its timer fired: %v; want ErrTimeout", err)
	}
}
