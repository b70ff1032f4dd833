package cli

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
)

// A paced context that gets no pace ends with a cause naming the stall
// and wrapping pdc.ErrTimeout; stalled reports it in place of the error
// it caused. Stopped, it ends with no stall.
func TestPacedEndsWithoutProgress(t *testing.T) {
	ctx, _, stop := paced(context.Background(), time.Millisecond)
	defer stop()
	<-ctx.Done()
	err := stalled(ctx, ctx.Err())
	if !errors.Is(err, errStalled) || !errors.Is(err, pdc.ErrTimeout) {
		t.Fatalf("stalled: %v", err)
	}
	ctx, pace, stop := paced(context.Background(), time.Hour)
	pace()
	stop()
	<-ctx.Done()
	if err := stalled(ctx, ctx.Err()); errors.Is(err, errStalled) {
		t.Fatalf("stopped, stalled says %v", err)
	}
}
