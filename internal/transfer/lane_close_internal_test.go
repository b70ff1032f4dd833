package transfer

import (
	"testing"

	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/region"
)

// TestCloseLetsGoOfLanes: a client closed with starts it never waited
// for unmaps its lanes: the starts end, and their spans with them.
func TestCloseLetsGoOfLanes(t *testing.T) {
	ctx, e, shut := testEngine(t, dtl.ModeShm)
	const n = 1 << 20
	o := testObject(ctx, t, e, "o", []uint64{n}, false)
	startWrite(ctx, t, o, region.Shape(n), make([]byte, n))
	if err := e.Settle(ctx); err != nil { // started on the data server
		t.Fatal(err)
	}
	e.lanes.mu.Lock()
	var l *clientLane
	for _, slot := range e.lanes.by {
		l = slot.l
	}
	e.lanes.mu.Unlock()
	if l == nil || l.refs.Load() < 2 {
		t.Fatalf("no lane in use after a start through it")
	}
	shut()
	if got := l.refs.Load(); got != 0 {
		t.Fatalf("%d references to the lane after Close: it stays mapped", got)
	}
}
