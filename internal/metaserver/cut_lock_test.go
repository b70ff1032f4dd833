package metaserver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/wire"
)

// blackholed is fakeCuts whose rank 1 takes calls and never answers, as a
// data server that is stopped or cut off by a firewall does: a call ends
// only with its context.
type blackholed struct {
	*fakeCuts
	calls atomic.Int64
}

func (f *blackholed) CallData(ctx context.Context, rank int, m wire.Method, hdr []byte) error {
	if rank == 1 && m == wire.MethodDataCut {
		f.calls.Add(1)
		<-ctx.Done()
		return fmt.Errorf("rank 1: %w", ctx.Err())
	}
	return f.fakeCuts.CallData(ctx, rank, m, hdr)
}

// Two shrinks of one object at once, with a data server blackholed: the
// second finds the first's cut committed once it has the object lock. It
// must not push it holding lifeMu, which every create, delete and region
// map of the server waits for: they would all stall for the push's whole
// bound (cutWait) on one data server that does not answer.
func TestConcurrentShrinksDoNotPushUnderLifeMu(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	data := &blackholed{fakeCuts: newFakeCuts()}
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	a := createOne(t, s, "a", []uint64{4})
	if _, err := s.objSetDims(ctx, setDimsReq(a, 27)); err != nil {
		t.Fatal(err)
	}
	// Both shrinks find no pending cut before the lock, then queue on it.
	_ = s.lifeMu.Lock(ctx)
	var wg sync.WaitGroup
	for _, n := range []uint64{8, 4} {
		wg.Go(func() { _, _ = s.objSetDims(ctx, setDimsReq(a, n)) })
	}
	time.Sleep(200 * time.Millisecond)
	s.lifeMu.Unlock()
	defer wg.Wait()
	// Both have pushed to the blackholed server, or one holds the lock.
	for deadline := time.Now().Add(2 * time.Second); data.calls.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	_ = s.lifeMu.Lock(ctx)
	d := time.Since(start)
	s.lifeMu.Unlock()
	if d > time.Second {
		t.Fatalf("the object lock was held %v while a cut was pushed to a data server that does not answer", d.Round(time.Millisecond))
	}
}
