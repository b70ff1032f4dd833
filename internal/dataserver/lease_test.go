package dataserver

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// A write is taken only while its object's dims were confirmed with its
// metadata server less than the lease ago: the first touch confirms them,
// writes within the lease ask nothing more, and a write after it asks
// again. A shrink whose cut did not reach this server is learned so, and
// the write at the older dims refused as stale; a metadata server that
// cannot be asked refuses the write as unavailable, naming it. Before,
// such a write was acknowledged, and its rows were cut once the cut came
// (TestStaleWriteAcrossCut in internal/e2e/hosts).
func TestWriteLease(t *testing.T) {
	objs := newLivesObjects()
	objs.set(1, 1, 8, 16)
	// A lease no run of this test outlasts; its end is set by hand.
	e := newEnv(t, Config{Objects: objs, lease: time.Hour})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{8, 16}
	write := func(version uint64, k byte) error {
		it := item(1, true, dims, []uint64{4, 0}, []uint64{4, 16})
		it.DimsVersion = version
		_, _, err := startWait(ctx, c, []wire.DataItem{it}, pattern(nbytes([]uint64{4, 16}), k))
		return err
	}
	end := func() {
		e.svc.mu.Lock()
		e.svc.mu.confirmed[1] = e.svc.now() - time.Hour
		e.svc.mu.Unlock()
	}
	for k := range byte(3) {
		if err := write(1, k); err != nil {
			t.Fatal(err)
		}
	}
	if n := objs.questionsAsked(); n != 1 {
		t.Fatalf("%d questions for 3 writes within the lease, want 1 (the first touch's)", n)
	}

	// Shrunk on the metadata server, the cut not delivered here.
	objs.set(1, 2, 4, 16)
	end()
	err := write(1, 4)
	if !errors.Is(err, pdc.ErrStale) || !strings.Contains(err.Error(), "dims version 1 is older than version 2") {
		t.Fatalf("a write at dims the metadata server replaced, after the lease: %v, want ErrStale", err)
	}
	if n := objs.questionsAsked(); n != 2 {
		t.Fatalf("%d questions, want 2: the write after the lease asks", n)
	}
	// What the question told holds for later writes too.
	if err := write(1, 5); !errors.Is(err, pdc.ErrStale) {
		t.Fatalf("a second write at the replaced dims: %v, want ErrStale", err)
	}

	// A metadata server that cannot be asked.
	end()
	objs.mu.Lock()
	objs.err = fmt.Errorf("metadata server 0 of 1: connection lost: %w", pdc.ErrUnavailable)
	objs.mu.Unlock()
	err = write(2, 6)
	if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "metadata server 0") {
		t.Fatalf("a write after the lease, its metadata server unreachable: %v, want ErrUnavailable naming it", err)
	}
	objs.mu.Lock()
	objs.err = nil
	objs.mu.Unlock()
	if err := write(2, 7); err != nil {
		t.Fatalf("a write once the metadata server answers again: %v", err)
	}
}
