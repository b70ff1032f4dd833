package client

import (
	"context"
	"fmt"
	"testing"

	"github.com/pdcgo/pdc/region"
)

// TestUnsentStartFreesItsSpans: a start whose request never went out (its
// context had ended) gives its lane spans back: the server cannot be
// reading them, and spans kept would shrink the lane for good.
func TestUnsentStartFreesItsSpans(t *testing.T) {
	ctx, c := shmClient(t)
	defer c.Close()
	ct, _, err := c.CreateContainer(ctx, "unsent", Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	buf := make([]byte, n)
	half := func(i uint64) region.Box { return region.Box{Off: []uint64{i * n / 2}, Size: []uint64{n / 2}} }
	for _, cons := range []Consistency{ConsistencyDefault, ConsistencyPOSIX} {
		o, err := ct.CreateObject(ctx, fmt.Sprint("o", cons), ObjectProps{Dims: []uint64{n}, Type: region.Uint8, Consistency: cons})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Write(ctx, region.Shape(n), buf); err != nil { // makes the lane
			t.Fatal(err)
		}
		var ts []*Transfer
		for i := range uint64(2) {
			tr, err := o.NewTransfer(ctx, buf[i*n/2:(i+1)*n/2], Write, region.Shape(n/2), half(i))
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, tr)
		}
		gone, end := context.WithCancel(ctx)
		end()
		if err := c.StartAll(gone, ts); err == nil {
			t.Fatal("start_all under an ended context succeeded")
		}
		for _, tr := range ts {
			if tr.Wait(ctx) == nil && tr.Err() == nil {
				t.Fatal("a transfer never sent succeeded")
			}
		}
	}
	c.lanes.mu.Lock()
	var l *clientLane
	for _, slot := range c.lanes.by {
		l = slot.l
	}
	c.lanes.mu.Unlock()
	if l == nil {
		t.Fatal("no lane after a write through it")
	}
	if used := l.arena.Used(); used != 0 {
		t.Fatalf("%d bytes of the lane still taken by a start that never went out", used)
	}
}
