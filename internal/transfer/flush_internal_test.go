package transfer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// flushCluster fails the data flushes it is told to, and counts those it
// passes on.
type flushCluster struct {
	Cluster
	fail    atomic.Bool
	flushes atomic.Int32
}

var errFlushRefused = errors.New("flush refused for the test")

func (c *flushCluster) Call(ctx context.Context, rank int, m wire.Method, req, resp wire.Message) error {
	if m == wire.MethodDataFlush {
		if c.fail.Load() {
			return errFlushRefused
		}
		c.flushes.Add(1)
	}
	return c.Cluster.Call(ctx, rank, m, req, resp)
}

// A Flush that fails on a data server leaves that server to flush: the
// next Flush asks it again. It forgot the servers written before asking
// them, so the retry of a failed Flush succeeded without asking anyone,
// and the writes it reported durable were not fsynced.
func TestFlushAfterAFailedFlush(t *testing.T) {
	ctx, e, _ := testEngine(t, dtl.ModeStream)
	fc := &flushCluster{Cluster: e.cl}
	e.cl = fc
	o := testObject(ctx, t, e, "flushagain", []uint64{64}, false)
	tr := startWrite(ctx, t, o, region.Shape(64), make([]byte, 64))
	if err := tr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	fc.fail.Store(true)
	if err := o.Flush(ctx); !errors.Is(err, errFlushRefused) {
		t.Fatalf("flush refused by the data server: %v, want its error", err)
	}
	fc.fail.Store(false)
	if err := o.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := fc.flushes.Load(); n != 1 {
		t.Fatalf("the flush after a failed one asked %d data servers to flush, want 1", n)
	}
	// Flushed now: nothing is left to ask.
	if err := o.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := fc.flushes.Load(); n != 1 {
		t.Fatalf("a flush with nothing written since asked again: %d flushes, want 1", n)
	}
}
