package transfer

import (
	"context"
	"fmt"
	"testing"

	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/region"
)

// TestUnsentStartFreesItsSpans: a start whose request never went out (its
// context had ended) gives its lane spans back: the server cannot be
// reading them, and spans kept would shrink the lane for good.
func TestUnsentStartFreesItsSpans(t *testing.T) {
	ctx, e, _ := testEngine(t, dtl.ModeShm)
	const n = 1 << 20
	buf := make([]byte, n)
	half := func(i uint64) region.Box { return region.Box{Off: []uint64{i * n / 2}, Size: []uint64{n / 2}} }
	for _, posix := range []bool{false, true} {
		o := testObject(ctx, t, e, fmt.Sprint("o", posix), []uint64{n}, posix)
		// Makes the lane.
		if err := startWrite(ctx, t, o, region.Shape(n), buf).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		var ts []*Transfer
		for i := range uint64(2) {
			tr, err := New(ctx, o, buf[i*n/2:(i+1)*n/2], Write, region.Shape(n/2), half(i))
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, tr)
		}
		gone, end := context.WithCancel(ctx)
		end()
		if err := e.StartAll(gone, ts); err == nil {
			t.Fatal("start_all under an ended context succeeded")
		}
		for _, tr := range ts {
			if tr.Wait(ctx) == nil && tr.Err() == nil {
				t.Fatal("a transfer never sent succeeded")
			}
		}
	}
	e.lanes.mu.Lock()
	var l *clientLane
	for _, slot := range e.lanes.by {
		l = slot.l
	}
	e.lanes.mu.Unlock()
	if l == nil {
		t.Fatal("no lane after a write through it")
	}
	if used := l.arena.Used(); used != 0 {
		t.Fatalf("%d bytes of the lane still taken by a start that never went out", used)
	}
}
