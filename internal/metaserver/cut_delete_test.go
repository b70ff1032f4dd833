package metaserver

import (
	"context"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// A delete drops the object's pending cut with its record: the object has
// no dims left to cut, and a cut left behind would be pushed to the data
// servers (after the tombstone, by the retrier, at every start) until
// every one of them applied it, and counted as pending meanwhile.
func TestDeleteDropsPendingCut(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	ctx := context.Background()
	data := newFakeCuts(1)
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	a := createOne(t, s, "a", []uint64{27})
	if _, err := s.objSetDims(ctx, setDimsReq(a, 8)); err != nil {
		t.Fatalf("shrink with a data server down: %v", err)
	}
	if c, err := s.pendingCut(a); err != nil || c == nil {
		t.Fatalf("pending cut after a shrink rank 1 missed: %v, %v", c, err)
	}
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := s.objDelete(dctx, &rpc.Request{Header: (&wire.ObjKey{ID: a}).Marshal(nil)}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.pendingCut(a); err != nil || c != nil {
		t.Fatalf("the deleted object's pending cut is still in the store: %v, %v", c, err)
	}
	if n := s.PendingCuts(); n != 0 {
		t.Fatalf("%d pending cuts counted after the delete", n)
	}
	// Nor is it found at the next start.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir)
	defer s.Close()
	ids, err := s.loadCuts()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 0 {
		t.Fatalf("pending cuts of objects %v after a restart; object %d was deleted", ids, a)
	}
}
