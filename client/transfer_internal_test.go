package client

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// A local region whose buffer (up to its end in each dim) has more than
// 2^64 elements is refused at NewTransfer, not taken as needing none.
func TestNewTransferLocalBufferOverflows(t *testing.T) {
	o := newObject(nil, ObjectInfo{Name: "o", Props: ObjectProps{Dims: []uint64{4, 4}, Type: region.Int}})
	dot := region.Box{Off: []uint64{0, 0}, Size: []uint64{1, 1}}
	for _, off := range [][]uint64{{1 << 40, 1 << 40}, {1 << 32, 1<<32 - 1}} {
		local := region.Box{Off: off, Size: []uint64{1, 1}}
		_, err := o.NewTransfer(context.Background(), nil, Read, local, dot)
		if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "more than 2^64") {
			t.Errorf("local %v: %v, want a buffer of more than 2^64 bytes refused", local, err)
		}
	}
}

// Status of a transfer the placer still holds says pending at once, even
// under an ended context: it does not wait for the transfers queued
// before it. Once dropped by Close, the placer no longer holds it.
func TestStatusOfAQueuedTransfer(t *testing.T) {
	c := &Client{}
	o := newObject(c, ObjectInfo{Name: "o", Props: ObjectProps{Dims: []uint64{16}, Type: region.Uint8}})
	box := region.Box{Off: []uint64{0}, Size: []uint64{16}}
	queued, err := o.NewTransfer(context.Background(), make([]byte, 16), Write, box, box)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := o.NewTransfer(context.Background(), make([]byte, 16), Write, box, box)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []*Transfer{queued, sent} {
		tr.state = stateStarted
	}
	c.placing.queued = []*Transfer{queued}
	c.placing.sent = []*placeBatch{{ts: []*Transfer{sent}, n: 1}}
	c.placing.queuedN = 2
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for name, tr := range map[string]*Transfer{"queued": queued, "sent": sent} {
		if st, err := tr.Status(gone); err != nil || st != TransferPending {
			t.Errorf("status of a %s transfer: %v, %v; want pending at once", name, st, err)
		}
	}
	if !c.unqueue(queued, context.Canceled) || c.placing.holds(queued) {
		t.Error("a queued transfer was not dropped")
	}
	if c.unqueue(sent, context.Canceled) || !c.placing.holds(sent) {
		t.Error("a transfer with its placement on the wire was dropped")
	}
}

// Describing and planning a small region of an object-static object
// allocates the transfer and its boxes, nothing per piece or part: a
// start_all of 64k regions of 4 KiB made two allocations more per region.
func TestPlanObjectStaticAllocs(t *testing.T) {
	c := &Client{}
	c.dataOnce.Do(func() { c.data = []int{0} })
	o := newObject(c, ObjectInfo{Name: "o", Props: ObjectProps{Dims: []uint64{1 << 20}, Type: region.Uint8, Partition: ObjectStatic}})
	buf := make([]byte, 4096)
	box := region.Box{Off: []uint64{4096}, Size: []uint64{4096}}
	local := region.Box{Off: []uint64{0}, Size: []uint64{4096}}
	ctx := context.Background()
	var tr *Transfer
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if tr, err = o.NewTransfer(ctx, buf, Write, local, box); err != nil {
			t.Fatal(err)
		}
		if err := tr.plan(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if len(tr.parts) != 1 || tr.parts[0].server != 0 || !tr.parts[0].box.Equal(box) || len(tr.parts[0].data) != 4096 {
		t.Fatalf("planned %+v, want one part of %v on server 0", tr.parts, box)
	}
	if allocs > 2 {
		t.Fatalf("NewTransfer and plan made %.0f allocations, want at most 2 (the transfer and its boxes)", allocs)
	}
}
