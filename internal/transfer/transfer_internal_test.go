package transfer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// fakeCluster is a Cluster of data servers that nothing may be sent to:
// for the engine's parts that ask nothing of servers.
type fakeCluster struct {
	Cluster
	ds []int
}

func (f *fakeCluster) DataServers() []int { return f.ds }

// object is an object of bytes of dims, of an engine that must not send
// anything.
func object(dims []uint64, p Partition) *Object {
	o := &Object{}
	o.Init(NewEngine(&fakeCluster{ds: []int{0}}, Config{}), noRefresh{}, &Meta{Name: "o", Dims: dims, Elem: 1, Partition: p})
	return o
}

// A local region whose buffer (up to its end in each dim) has more than
// 2^64 elements is refused at New, not taken as needing none.
func TestNewTransferLocalBufferOverflows(t *testing.T) {
	o := object([]uint64{4, 4}, ObjectStatic)
	dot := region.Box{Off: []uint64{0, 0}, Size: []uint64{1, 1}}
	for _, off := range [][]uint64{{1 << 40, 1 << 40}, {1 << 32, 1<<32 - 1}} {
		local := region.Box{Off: off, Size: []uint64{1, 1}}
		_, err := New(context.Background(), o, nil, Read, local, dot)
		if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "more than 2^64") {
			t.Errorf("local %v: %v, want a buffer of more than 2^64 bytes refused", local, err)
		}
	}
}

// Status of a transfer the placer still holds says pending at once, even
// under an ended context: it does not wait for the transfers queued
// before it. Once dropped by Close, the placer no longer holds it.
func TestStatusOfAQueuedTransfer(t *testing.T) {
	o := object([]uint64{16}, ObjectStatic)
	e := o.e
	box := region.Box{Off: []uint64{0}, Size: []uint64{16}}
	queued, err := New(context.Background(), o, make([]byte, 16), Write, box, box)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := New(context.Background(), o, make([]byte, 16), Write, box, box)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []*Transfer{queued, sent} {
		tr.state = stateStarted
	}
	e.placing.queued = []*Transfer{queued}
	e.placing.sent = []*placeBatch{{ts: []*Transfer{sent}, n: 1}}
	e.placing.queuedN = 2
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for name, tr := range map[string]*Transfer{"queued": queued, "sent": sent} {
		if st, err := tr.Status(gone); err != nil || st != Pending {
			t.Errorf("status of a %s transfer: %v, %v; want pending at once", name, st, err)
		}
	}
	if !e.unqueue(queued, context.Canceled) || e.placing.holds(queued) {
		t.Error("a queued transfer was not dropped")
	}
	if e.unqueue(sent, context.Canceled) || !e.placing.holds(sent) {
		t.Error("a transfer with its placement on the wire was dropped")
	}
}

// Describing and planning a small region of an object-static object
// allocates the transfer and its boxes, nothing per piece or part: a
// start_all of 64k regions of 4 KiB made two allocations more per region.
func TestPlanObjectStaticAllocs(t *testing.T) {
	o := object([]uint64{1 << 20}, ObjectStatic)
	buf := make([]byte, 4096)
	box := region.Box{Off: []uint64{4096}, Size: []uint64{4096}}
	local := region.Box{Off: []uint64{0}, Size: []uint64{4096}}
	ctx := context.Background()
	var tr *Transfer
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if tr, err = New(ctx, o, buf, Write, local, box); err != nil {
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
		t.Fatalf("New and plan made %.0f allocations, want at most 2 (the transfer and its boxes)", allocs)
	}
}
