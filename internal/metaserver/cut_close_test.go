package metaserver

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/wire"
)

// stoppedRank is fakeCuts with rank 1 stopped: it takes the call and
// answers nothing until the caller's context ends. It counts the calls
// that start after closed is set.
type stoppedRank struct {
	*fakeCuts
	closed atomic.Bool
	after  atomic.Int32
}

func (f *stoppedRank) CallData(ctx context.Context, rank int, m wire.Method, hdr []byte) error {
	if f.closed.Load() {
		f.after.Add(1)
	}
	if rank == 1 {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.fakeCuts.CallData(ctx, rank, m, hdr)
}

// The retrier of pending cuts, pushing to a data server that does not
// answer, does not hold up Close beyond its context, and pushes nothing
// once Close returned.
func TestCloseStopsCutRetrier(t *testing.T) {
	s := openAt(t, t.TempDir())
	ctx := context.Background()
	data := &stoppedRank{fakeCuts: newFakeCuts()}
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	// The set dims answers once its push ends: the wait for the dims
	// leases of a data server it did not reach (TestShrinkWaitsOutLeases)
	// is not what this test is about.
	s.cuts.leaseWait = 0
	a := createOne(t, s, "a", []uint64{27})
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := s.objSetDims(sctx, setDimsReq(a, 8)); err != nil {
		t.Fatalf("shrink with a data server stopped: %v", err)
	}
	if s.PendingCuts() == 0 {
		t.Fatal("no cut marked for the retrier")
	}
	// A round of the retrier is under way (it was poked), waiting on
	// rank 1.
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v with the retrier pushing to a stopped data server", d)
	}
	data.closed.Store(true)
	time.Sleep(2 * cutRetryMin)
	if n := data.after.Load(); n > 0 {
		t.Fatalf("%d pushes after Close", n)
	}
}
