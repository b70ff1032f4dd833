package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/region"
)

// TestConcurrentStartWaitDoFlush: goroutines start, wait and do
// transfers of one object while another flushes it; every write that
// returned nil reads back.
func TestConcurrentStartWaitDoFlush(t *testing.T) {
	for _, mode := range []dtl.Mode{dtl.ModeStream, dtl.ModeShm} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx, e, _ := testEngine(t, mode)
			const rows, row = 8, 32 << 10
			o := testObject(ctx, t, e, "o", []uint64{rows * row}, false)
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			stop := make(chan struct{})
			for g := range rows {
				wg.Go(func() {
					box := region.Box{Off: []uint64{uint64(g * row)}, Size: []uint64{row}}
					for it := range 20 {
						want := bytes.Repeat([]byte{byte(g), byte(it)}, row/2)
						w, err := New(ctx, o, want, Write, region.Shape(row), box)
						if err != nil {
							errs <- err
							return
						}
						if it%2 == 0 {
							err = e.DoAll(ctx, []*Transfer{w})
						} else {
							if err = e.StartAll(ctx, []*Transfer{w}); err == nil {
								err = e.WaitAll(ctx, []*Transfer{w})
							}
						}
						if err != nil {
							errs <- fmt.Errorf("g%d it%d write: %w", g, it, err)
							return
						}
						got := make([]byte, row)
						r, err := New(ctx, o, got, Read, region.Shape(row), box)
						if err != nil {
							errs <- err
							return
						}
						if err := r.Do(ctx); err != nil {
							errs <- fmt.Errorf("g%d it%d read: %w", g, it, err)
							return
						}
						if !bytes.Equal(got, want) {
							errs <- fmt.Errorf("g%d it%d: read back differs", g, it)
							return
						}
					}
				})
			}
			var fwg sync.WaitGroup
			fwg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := o.Flush(ctx); err != nil {
						errs <- fmt.Errorf("flush: %w", err)
						return
					}
				}
			})
			wg.Wait()
			close(stop)
			fwg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestListedTwice: a transfer listed twice in StartAll or DoAll is
// refused, and stays usable.
func TestListedTwice(t *testing.T) {
	ctx, e, _ := testEngine(t, dtl.ModeStream)
	o := testObject(ctx, t, e, "o", []uint64{64}, false)
	buf := bytes.Repeat([]byte{7}, 32)
	w, err := New(ctx, o, buf, Write, region.Shape(32), region.Shape(32))
	if err != nil {
		t.Fatal(err)
	}
	w2, err := New(ctx, o, buf, Write, region.Shape(32), region.Box{Off: []uint64{32}, Size: []uint64{32}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.DoAll(ctx, []*Transfer{w, w2, w}); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("DoAll of one listed twice: %v", err)
	}
	if err := e.StartAll(ctx, []*Transfer{w2, w, w2}); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("StartAll of one listed twice: %v", err)
	}
	if err := e.DoAll(ctx, []*Transfer{w, w2}); err != nil {
		t.Fatal(err)
	}
	if err := e.StartAll(ctx, []*Transfer{w, w2}); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitAll(ctx, []*Transfer{w, w2, w}); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	n := o.mu.npending
	o.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d pending", n)
	}
}

// TestStatusWhileFlushing: goroutines follow their writes with Status
// while another flushes the object: neither sees an error.
func TestStatusWhileFlushing(t *testing.T) {
	ctx, e, _ := testEngine(t, dtl.ModeStream)
	const rows, row = 4, 32 << 10
	o := testObject(ctx, t, e, "o", []uint64{rows * row}, false)
	var wg, fwg sync.WaitGroup
	errs := make(chan error, 64)
	stop := make(chan struct{})
	fwg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := o.Flush(ctx); err != nil {
				errs <- fmt.Errorf("flush: %w", err)
				return
			}
		}
	})
	for g := range rows {
		wg.Go(func() {
			box := region.Box{Off: []uint64{uint64(g * row)}, Size: []uint64{row}}
			for it := range 30 {
				w, err := New(ctx, o, bytes.Repeat([]byte{byte(g), byte(it)}, row/2), Write, region.Shape(row), box)
				if err == nil {
					err = e.StartAll(ctx, []*Transfer{w})
				}
				for err == nil {
					var s Status
					if s, err = w.Status(ctx); err == nil && s == Complete {
						break
					}
				}
				if err != nil {
					errs <- fmt.Errorf("g%d it%d: %w", g, it, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	fwg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCloseCutShortForgetsTheTransfer: a transfer closed with a context
// that has ended is no longer the object's to wait for: a Flush after it
// neither waits for it nor fails with its error.
func TestCloseCutShortForgetsTheTransfer(t *testing.T) {
	ctx, e, _ := testEngine(t, dtl.ModeStream)
	o := testObject(ctx, t, e, "o", []uint64{1 << 20}, false)
	for i := range 20 {
		w := startWrite(ctx, t, o, region.Box{Off: []uint64{uint64(i) << 10}, Size: []uint64{1 << 10}}, make([]byte, 1<<10))
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := w.Close(done); err == nil {
			continue // done before it looked at its context
		}
		if !w.Closed() {
			// Still on its way: Close may be called again.
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		o.mu.Lock()
		n := o.mu.npending
		o.mu.Unlock()
		if n != 0 {
			t.Fatalf("round %d: a transfer closed is still pending on its object", i)
		}
		if err := o.Flush(ctx); err != nil {
			t.Fatalf("round %d: flush after a transfer was closed cut short: %v", i, err)
		}
	}
}

// TestDoAllAcrossObjects: one DoAll, and one StartAll and WaitAll, of
// writes and reads of two objects (one with POSIX consistency) leave
// both objects with nothing pending and read back what was written.
func TestDoAllAcrossObjects(t *testing.T) {
	ctx, e, _ := testEngine(t, dtl.ModeShm)
	const n = 64 << 10
	a := testObject(ctx, t, e, "a", []uint64{2 * n}, false)
	b := testObject(ctx, t, e, "b", []uint64{2 * n}, true)
	first := region.Box{Off: []uint64{0}, Size: []uint64{n}}
	second := region.Box{Off: []uint64{n}, Size: []uint64{n}}
	pa, pb := bytes.Repeat([]byte("a"), n), bytes.Repeat([]byte("b"), n)
	mk := func(o *Object, buf []byte, acc Access, box region.Box) *Transfer {
		tr, err := New(ctx, o, buf, acc, region.Shape(n), box)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	if err := e.DoAll(ctx, []*Transfer{mk(a, pa, Write, first), mk(b, pb, Write, first)}); err != nil {
		t.Fatal(err)
	}
	ra, rb := make([]byte, n), make([]byte, n)
	ts := []*Transfer{mk(b, pb, Write, second), mk(a, ra, Read, first), mk(a, pa, Write, second), mk(b, rb, Read, first)}
	if err := e.StartAll(ctx, ts); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitAll(ctx, ts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ra, pa) || !bytes.Equal(rb, pb) {
		t.Fatal("read back differs")
	}
	all := make([]byte, 2*n)
	ra2 := mk(a, all[:n], Read, second)
	rb2 := mk(b, all[n:], Read, second)
	if err := e.DoAll(ctx, []*Transfer{ra2, rb2}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(all[:n], pa) || !bytes.Equal(all[n:], pb) {
		t.Fatal("second halves read back differ")
	}
	for _, o := range []*Object{a, b} {
		o.mu.Lock()
		n := o.mu.npending
		o.mu.Unlock()
		if n != 0 {
			t.Fatalf("object %s: %d pending", o.Meta().Name, n)
		}
		if err := o.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDoAllCutShortThenAgain: DoAll writes and reads cut short by their
// context at random points leave the engine sound: a buffer is the
// caller's again when DoAll returns (nothing writes it after), and the
// next calls, through the same lane, move the right bytes.
func TestDoAllCutShortThenAgain(t *testing.T) {
	for _, mode := range []dtl.Mode{dtl.ModeShm, dtl.ModeStream} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx, e, _ := testEngine(t, mode)
			const n = 1 << 20
			o := testObject(ctx, t, e, "o", []uint64{4 * n}, false)
			whole := region.Shape(4 * n)
			want := make([]byte, 4*n)
			cutShort := 0
			defer func() { t.Logf("%d reads cut short", cutShort) }()
			for round := range 30 {
				for i := range want {
					want[i] = byte(round + i>>12)
				}
				w, err := New(ctx, o, want, Write, whole, whole)
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Do(ctx); err != nil {
					t.Fatal(err)
				}
				// A read cut short; its buffer must stay as DoAll left it.
				cut := make([]byte, 4*n)
				r, err := New(ctx, o, cut, Read, whole, whole)
				if err != nil {
					t.Fatal(err)
				}
				cctx, cancel := context.WithTimeout(ctx, time.Duration(round%10)*200*time.Microsecond)
				err = r.Do(cctx)
				cancel()
				if err != nil {
					cutShort++
				}
				snap := bytes.Clone(cut)
				time.Sleep(5 * time.Millisecond)
				if !bytes.Equal(snap, cut) {
					t.Fatalf("round %d: the buffer of a read cut short (%v) changed after Do returned", round, err)
				}
				if err == nil && !bytes.Equal(cut, want) {
					t.Fatalf("round %d: a read that succeeded differs", round)
				}
				got := make([]byte, 4*n)
				r2, err := New(ctx, o, got, Read, whole, whole)
				if err != nil {
					t.Fatal(err)
				}
				if err := r2.Do(ctx); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("round %d: read back after a read cut short differs", round)
				}
			}
		})
	}
}
