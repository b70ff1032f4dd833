package transfer

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/region"
)

// TestWaitedStartAnswerLost: the connection fails after the data server
// has done a waited start, before its answer arrives. A read is asked
// again on a new connection and succeeds. A write is sent again only on a
// new connection that fenced the old one (the server ended it, and what
// it carried was handled or dropped, before accepting the new): without
// that, the server could still read a first copy from the old connection
// after the caller's next write to the same place, and store it over
// that write.
func TestWaitedStartAnswerLost(t *testing.T) {
	var p *testProxy
	ctx, e, _ := testEngineVia(t, dtl.ModeStream, func(addr string) string {
		p = startTestProxy(t, addr)
		return p.ln.Addr().String()
	})
	const n = 64 << 10
	o := testObject(ctx, t, e, "o", []uint64{n}, false)
	whole := region.Shape(n)
	do := func(buf []byte, a Access) error {
		tr, err := New(ctx, o, buf, a, whole, whole)
		if err != nil {
			t.Fatal(err)
		}
		return tr.Do(ctx)
	}
	first := bytes.Repeat([]byte{1}, n)
	if err := do(first, Write); err != nil {
		t.Fatal(err)
	}

	p.armCut()
	got := make([]byte, n)
	if err := do(got, Read); err != nil {
		t.Fatalf("a read whose answer was lost, asked again: %v", err)
	}
	if p.cuts() != 1 || !bytes.Equal(got, first) {
		t.Fatalf("%d answers cut; read back equal: %v", p.cuts(), bytes.Equal(got, first))
	}

	// The write is sent again only on a connection whose handshake ended
	// the old one on the server (rpc.Conn.Fences): the first copy is then
	// stored before the second, or dropped, never stored after it.
	p.armCut()
	second := bytes.Repeat([]byte{2}, n)
	if err := do(second, Write); err != nil {
		t.Fatalf("a write whose answer was lost, sent again on a connection that fenced the old one: %v", err)
	}
	if p.cuts() != 2 {
		t.Fatalf("%d answers cut, want 2", p.cuts())
	}
	third := bytes.Repeat([]byte{3}, n)
	if err := do(third, Write); err != nil {
		t.Fatal(err)
	}
	if err := do(got, Read); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, third) {
		t.Fatalf("after a write sent twice and a later one, byte 0 reads %d, want 3", got[0])
	}
}

// TestStartAgainPlanFails: a transfer done once and started again, whose
// second run cannot be planned (here: the cluster says it has no data
// server), fails its wait. The parts of the first run, all done, must not
// pass for the second's.
func TestStartAgainPlanFails(t *testing.T) {
	ctx, e, _ := testEngine(t, dtl.ModeStream)
	const n = 4096
	o := testObject(ctx, t, e, "again", []uint64{n}, false)
	whole := region.Shape(n)
	tr, err := New(ctx, o, bytes.Repeat([]byte{7}, n), Write, whole, whole)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	e.cl.(*testCluster).noData.Store(true)
	err = tr.Start(ctx) // queued for the placer, which plans it
	if err == nil {
		err = tr.Wait(ctx)
	}
	if !errors.Is(err, pdc.ErrUnavailable) {
		t.Fatalf("a second run that could not be planned: %v; want pdc.ErrUnavailable", err)
	}
}

// TestStartedTwiceAtOnce: two goroutines doing one transfer at the same
// moment: one runs it, the other is refused as already started (or runs
// it after), never both at once over the same parts.
func TestStartedTwiceAtOnce(t *testing.T) {
	ctx, e, _ := testEngine(t, dtl.ModeStream)
	const n = 4096
	o := testObject(ctx, t, e, "twice", []uint64{n}, false)
	whole := region.Shape(n)
	tr, err := New(ctx, o, bytes.Repeat([]byte{3}, n), Write, whole, whole)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		errs := make(chan error, 2)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { errs <- tr.Do(ctx) })
		}
		wg.Wait()
		close(errs)
		ok := 0
		for err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, pdc.ErrInvalid):
				t.Fatalf("a Do racing another: %v; want nil or pdc.ErrInvalid", err)
			}
		}
		if ok == 0 {
			t.Fatal("both Do calls were refused")
		}
	}
}
