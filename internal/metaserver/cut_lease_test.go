package metaserver

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
)

// A shrink whose cut some data server did not apply is answered only once
// the dims leases that data server may hold on the older dims have ended
// (wire.DimsLeaseWait after the commit): until then it could acknowledge
// a write at them, and the cut, delivered later, would drop it
// (TestStaleWriteAcrossCut in internal/e2e/hosts). A shrink every data
// server applied is answered at once.
func TestShrinkWaitsOutLeases(t *testing.T) {
	s := openAt(t, t.TempDir())
	t.Cleanup(func() { _ = s.Close() })
	data := newFakeCuts()
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	// Longer than any run of this test: a set dims that waited for it
	// would not answer.
	s.cuts.leaseWait = time.Hour
	a := createOne(t, s, "a", []uint64{27})
	ctx := context.Background()
	if _, err := s.objSetDims(ctx, setDimsReq(a, 20)); err != nil {
		t.Fatalf("a shrink every data server applied: %v", err)
	}

	data.setDown(1, true)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.objSetDims(sctx, setDimsReq(a, 8))
		done <- err
	}()
	// Committed and pushed (rank 0 applied it), then waiting.
	waitUntil(t, "the shrink's push to rank 0", func() bool { return slices.Contains(data.versions(0), 2) })
	select {
	case err := <-done:
		t.Fatalf("a shrink rank 1 did not apply answered (%v) before the leases on the older dims ended", err)
	default:
	}
	cancel()
	err := <-done
	if !errors.Is(err, pdc.ErrCanceled) {
		t.Fatalf("a shrink whose wait for the leases was cut short: %v, want ErrCanceled saying so", err)
	}
}

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}
