package metaserver

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/wire"
)

// blackholed is fakeCuts whose rank 1 takes calls and never answers, as a
// data server that is stopped or cut off by a firewall does: a call ends
// only with its context. Each call to it is sent on called.
type blackholed struct {
	*fakeCuts
	called chan struct{}
}

func (f *blackholed) CallData(ctx context.Context, rank int, m wire.Method, hdr []byte) error {
	if rank == 1 && m == wire.MethodDataCut {
		select {
		case f.called <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return fmt.Errorf("rank 1: %w", ctx.Err())
	}
	return f.fakeCuts.CallData(ctx, rank, m, hdr)
}

// Two shrinks of one object at once, with a data server blackholed: the
// second finds the first's cut committed once it has the object lock. It
// must not push it holding lifeMu, which every create, delete and region
// map of the server waits for: they would all stall for the push's whole
// bound on one data server that does not answer.
func TestConcurrentShrinksDoNotPushUnderLifeMu(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	// A push holds the blackholed server's calls this long; the lock
	// must come free well within it.
	s.cuts.pushWait = 4 * time.Second
	ctx := context.Background()
	data := &blackholed{fakeCuts: newFakeCuts(), called: make(chan struct{}, 8)}
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	a := createOne(t, s, "a", []uint64{4})
	if _, err := s.objSetDims(ctx, setDimsReq(a, 27)); err != nil {
		t.Fatal(err)
	}
	// Both shrinks find no pending cut before the lock, then queue on it.
	queued := make(chan lockKind, 8)
	hook := func(k lockKind) { queued <- k }
	s.lifeMu.waitHook.Store(&hook)
	_ = s.lifeMu.Lock(ctx)
	var wg sync.WaitGroup
	for _, n := range []uint64{8, 4} {
		wg.Go(func() { _, _ = s.objSetDims(ctx, setDimsReq(a, n)) })
	}
	for range 2 {
		<-queued
	}
	s.lifeMu.waitHook.Store(nil)
	s.lifeMu.Unlock()
	defer wg.Wait()
	// Once a push to the blackholed server is under way, the lock must
	// be free within half the push's bound: held through the push, it
	// is not free until the push gives up.
	<-data.called
	lctx, cancel := context.WithTimeout(ctx, s.cuts.pushWait/2)
	defer cancel()
	if err := s.lifeMu.Lock(lctx); err != nil {
		t.Fatalf("the object lock was held while a cut was pushed to a data server that does not answer: %v", err)
	}
	s.lifeMu.Unlock()
}
