package wire_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/wire"
)

// Regression: a caller whose deadline lies beyond 1<<62 ns (e.g.
// context.WithTimeout(ctx, math.MaxInt64)) made Append write a timeout
// that DecodeFrame refuses, so the server closed the connection.
func TestFrameAppendFarTimeoutDecodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), math.MaxInt64)
	defer cancel()
	d, _ := ctx.Deadline()
	for _, timeout := range []time.Duration{time.Until(d), 1<<62 + 1, math.MaxInt64} {
		f := wire.Frame{Version: 1, Method: wire.MethodPing, ID: 1, Timeout: timeout}
		got, err := wire.DecodeFrame(f.Append(nil))
		if err != nil {
			t.Fatalf("timeout %d: %v", timeout, err)
		}
		if got.Timeout != 1<<62 {
			t.Fatalf("timeout %d decoded as %d, want %d", timeout, got.Timeout, time.Duration(1<<62))
		}
	}
}
