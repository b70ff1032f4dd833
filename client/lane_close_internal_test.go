package client

import (
	"testing"

	"github.com/pdcgo/pdc/region"
)

// TestCloseLetsGoOfLanes: a client closed with starts it never waited
// for unmaps its lanes: the starts end, and their spans with them.
func TestCloseLetsGoOfLanes(t *testing.T) {
	ctx, c := shmClient(t)
	ct, _, err := c.CreateContainer(ctx, "close", Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	o, err := ct.CreateObject(ctx, "o", ObjectProps{Dims: []uint64{n}, Type: region.Uint8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.StartWrite(ctx, region.Shape(n), make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if err := c.settle(ctx); err != nil { // started on the data server
		t.Fatal(err)
	}
	c.lanes.mu.Lock()
	var l *clientLane
	for _, slot := range c.lanes.by {
		l = slot.l
	}
	c.lanes.mu.Unlock()
	if l == nil || l.refs.Load() < 2 {
		t.Fatalf("no lane in use after a start through it")
	}
	c.Close()
	if got := l.refs.Load(); got != 0 {
		t.Fatalf("%d references to the lane after Close: it stays mapped", got)
	}
}
