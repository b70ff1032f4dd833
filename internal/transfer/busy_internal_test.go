package transfer

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/region"
)

// TestCloseCutShortWhileFlushCollects: a Flush is collecting a started
// read (its wait's answer held back) when Close of the read is cut short
// by its context. The read is still another call's: its buffer is still
// being read into. Close must leave it started (it returns its error and
// may be called again), not report it closed while the Flush's wait
// still writes the buffer.
func TestCloseCutShortWhileFlushCollects(t *testing.T) {
	var p *testProxy
	ctx, e, _ := testEngineVia(t, dtl.ModeStream, func(addr string) string {
		p = startTestProxy(t, addr)
		return p.ln.Addr().String()
	})
	const n = 64 << 10
	o := testObject(ctx, t, e, "o", []uint64{n}, false)
	whole := region.Shape(n)
	want := bytes.Repeat([]byte{9}, n)
	w, err := New(ctx, o, want, Write, whole, whole)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Do(ctx); err != nil {
		t.Fatal(err)
	}

	buf := make([]byte, n)
	r, err := New(ctx, o, buf, Read, whole, whole)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.CollectStarts(ctx); err != nil {
		t.Fatal(err)
	}

	p.gate.Lock() // the Flush's wait gets no answer until let go
	held := true
	defer func() {
		if held {
			p.gate.Unlock()
		}
	}()
	flushed := make(chan error, 1)
	go func() { flushed <- o.Flush(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		busy := r.busy
		r.mu.Unlock()
		if busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Flush never took the read")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // its wait is on the wire

	done, cancel := context.WithCancel(ctx)
	cancel()
	cerr := r.Close(done)
	closed := r.Closed()
	snap := bytes.Clone(buf)
	p.gate.Unlock()
	held = false
	if err := <-flushed; err != nil {
		t.Fatalf("flush: %v", err)
	}
	if cerr == nil {
		t.Fatal("Close cut short while a Flush held the read returned nil")
	}
	if closed {
		changed := !bytes.Equal(snap, buf)
		t.Fatalf("Close (%v) reported the read closed while a Flush was still collecting it; buffer written after Close returned: %v", cerr, changed)
	}
	// Still started: Close again, and the bytes are there.
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, want) {
		t.Fatal("read back differs")
	}
	o.mu.Lock()
	np := o.mu.npending
	o.mu.Unlock()
	if np != 0 {
		t.Fatalf("%d pending", np)
	}
}

// TestWaitWhileFlushFinishes: a Flush is finishing a started read whose
// local region is not contiguous in its buffer (its bytes are copied
// into the buffer after the transfer is marked done) when the goroutine
// that started it waits for it. The wait returns only once the bytes are
// in the buffer: the transfer is still the Flush's until it is released.
func TestWaitWhileFlushFinishes(t *testing.T) {
	whileFlushFinishes(t, func(ctx context.Context, r *Transfer) error { return r.Wait(ctx) })
}

// TestStatusWhileFlushFinishes: as TestWaitWhileFlushFinishes, with
// Status: it reports the read complete only once its bytes are in the
// buffer.
func TestStatusWhileFlushFinishes(t *testing.T) {
	whileFlushFinishes(t, func(ctx context.Context, r *Transfer) error {
		for {
			s, err := r.Status(ctx)
			if err != nil || s == Complete {
				return err
			}
		}
	})
}

// TestCloseWhileFlushFinishes: as TestWaitWhileFlushFinishes, with
// Close: the buffer is the caller's again only once the bytes are in it.
func TestCloseWhileFlushFinishes(t *testing.T) {
	whileFlushFinishes(t, func(ctx context.Context, r *Transfer) error { return r.Close(ctx) })
}

// whileFlushFinishes has a Flush finish a packed read and calls done(r)
// as soon as the read is marked done; once done returns nil the read's
// bytes must be in its buffer.
func whileFlushFinishes(t *testing.T, done func(context.Context, *Transfer) error) {
	var p *testProxy
	ctx, e, _ := testEngineVia(t, dtl.ModeStream, func(addr string) string {
		p = startTestProxy(t, addr)
		return p.ln.Addr().String()
	})
	const rows, cols = 4096, 1024
	o := testObject(ctx, t, e, "o", []uint64{rows * cols}, false)
	remote := region.Shape(rows * cols)
	want := make([]byte, rows*cols)
	for i := range want {
		want[i] = byte(i/cols + i)
	}
	w, err := New(ctx, o, want, Write, remote, remote)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Do(ctx); err != nil {
		t.Fatal(err)
	}

	for round := range 5 {
		// Every row of the buffer has one element more than the region
		// takes: the read's bytes are packed, and copied in by finish.
		buf := make([]byte, rows*(cols+1))
		local := region.Box{Off: []uint64{0, 1}, Size: []uint64{rows, cols}}
		r, err := New(ctx, o, buf, Read, local, remote)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.CollectStarts(ctx); err != nil {
			t.Fatal(err)
		}
		p.gate.Lock()
		flushed := make(chan error, 1)
		go func() { flushed <- o.Flush(ctx) }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r.mu.Lock()
			busy := r.busy
			r.mu.Unlock()
			if busy {
				break
			}
			if time.Now().After(deadline) {
				p.gate.Unlock()
				<-flushed
				t.Fatal("the Flush never took the read")
			}
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(10 * time.Millisecond) // its wait is on the wire
		p.gate.Unlock()
		for {
			r.mu.Lock()
			state := r.state
			r.mu.Unlock()
			if state != stateStarted {
				break
			}
		}
		werr := done(ctx, r)
		got := make([]byte, 0, rows*cols)
		for i := range rows {
			got = append(got, buf[i*(cols+1)+1:(i+1)*(cols+1)]...)
		}
		if err := <-flushed; err != nil {
			t.Fatalf("flush: %v", err)
		}
		if werr != nil {
			t.Fatal(werr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: the read was reported done before the Flush finishing it had copied its bytes into the buffer", round)
		}
	}
}

// TestCloseCutShortThenStartAgain: Close cut short while the start's
// answer is still to come leaves that start uncollected; it fails (the
// connection is lost), and the transfer is started again on a new
// connection, where it succeeds. The old start's failure is not the new
// run's: its wait succeeds and the bytes read back.
func TestCloseCutShortThenStartAgain(t *testing.T) {
	var p *testProxy
	ctx, e, _ := testEngineVia(t, dtl.ModeStream, func(addr string) string {
		p = startTestProxy(t, addr)
		return p.ln.Addr().String()
	})
	const n = 64 << 10
	o := testObject(ctx, t, e, "o", []uint64{n}, false)
	whole := region.Shape(n)
	want := bytes.Repeat([]byte{5}, n)
	w, err := New(ctx, o, want, Write, whole, whole)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Do(ctx); err != nil { // the connections are up
		t.Fatal(err)
	}
	p.gate.Lock()
	if err := w.Start(ctx); err != nil {
		p.gate.Unlock()
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	cerr := w.Close(cctx)
	cancel()
	p.dropAll()
	p.gate.Unlock()
	if cerr == nil {
		t.Fatal("Close with an ended context closed a transfer whose start the held proxy had not let be answered")
	}
	if !w.Closed() {
		// Left started: closed again, it ends as its start did.
		_ = w.Close(ctx)
		if !w.Closed() {
			t.Fatal("Close with a live context left the transfer open")
		}
	}
	// Started again, on a new connection.
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	// The new start went out, on a new connection, and is answered.
	if sc := w.parts[0].start; sc == nil || sc.collect(ctx) != nil {
		t.Fatal("the new start did not go out, or was not answered, on a new connection")
	}
	// Someone collects the starts meanwhile (a read's start, the
	// client's close): the old one among them.
	if err := e.CollectStarts(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(ctx); err != nil {
		t.Fatalf("the write started again fails with the error of the start Close gave up on: %v", err)
	}
	got := make([]byte, n)
	r, err := New(ctx, o, got, Read, whole, whole)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Do(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("read back differs")
	}
}

// TestClosedTwiceWhileQueued: a transfer closed while still queued for
// the placer, started again and closed again before the placer got to
// either run, is not sent: it stays closed, and nothing reads into its
// buffer.
func TestClosedTwiceWhileQueued(t *testing.T) {
	var p *testProxy
	ctx, e, _ := testEngineVia(t, dtl.ModeStream, func(addr string) string {
		p = startTestProxy(t, addr)
		return p.ln.Addr().String()
	})
	const n = 64 << 10
	o := testObject(ctx, t, e, "o", []uint64{2 * n}, false)
	first := region.Box{Off: []uint64{0}, Size: []uint64{n}}
	second := region.Box{Off: []uint64{n}, Size: []uint64{n}}
	want := bytes.Repeat([]byte{3}, n)
	w, err := New(ctx, o, want, Write, region.Shape(n), first)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Do(ctx); err != nil { // the connections are up
		t.Fatal(err)
	}

	p.gate.Lock()
	held := true
	defer func() {
		if held {
			p.gate.Unlock()
		}
	}()
	// The placer is held: a read started after a write waits for the
	// write's start to be answered before it is sent.
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	other := make([]byte, n)
	r0, err := New(ctx, o, other, Read, region.Shape(n), first)
	if err != nil {
		t.Fatal(err)
	}
	if err := r0.Start(ctx); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, n)
	r, err := New(ctx, o, buf, Read, region.Shape(n), second)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := r.Close(done); err == nil || !r.Closed() {
			// The placer took r into the batch it is sending before
			// Close came (a loaded machine): Close cannot take it back,
			// which is right, and the case this test is for was not
			// set up. Quiet, it is set up every time (20 of 20).
			t.Skipf("the placer took the read before Close came: Close %v, closed %v", err, r.Closed())
		}
	}
	p.gate.Unlock()
	held = false
	if err := e.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if !r.Closed() {
		t.Fatal("a transfer closed before it was sent was sent after all: it is started again")
	}
	if err := o.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []*Transfer{w, r0} {
		if err := tr.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
