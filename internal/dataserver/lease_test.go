package dataserver

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
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

// A start whose dims lease ends while it waits here, behind the client's
// earlier starts, is confirmed again before anything of it is
// registered: it is taken whole if its dims are still its object's, and
// refused whole as stale if they are not. It was refused as stale for the
// lease alone, after the writes before the one refused were registered
// and stored; the client's next start of the same objects at the same
// dims was then confirmed and stored, and the refused one, sent again,
// stored its older bytes over it (docs/design/0006-region-io.md, "Dims
// leases").
func TestLeaseEndsWhileStartWaits(t *testing.T) {
	for _, meanwhile := range []string{"nothing", "shrink"} {
		t.Run(meanwhile, func(t *testing.T) {
			dims, held := []uint64{8, 16}, []uint64{64}
			objs := newLivesObjects()
			objs.set(1, 1, dims...)
			objs.set(2, 1, dims...)
			objs.set(9, 1, held...)
			// One worker and room for one transfer in the queue. The
			// lease outlasts any run; its end is set by hand.
			cfg := Config{Objects: objs, lease: time.Hour, Workers: 1, QueueDepth: 1}
			g := newGate(&cfg, 9)
			defer g.release()
			turns := make(chan struct{}, 8)
			cfg.beforeTurn = func() { turns <- struct{}{} }
			e := newEnv(t, cfg)
			c := e.dial("c")
			ctx := testCtx(t)
			at1 := func(it wire.DataItem) wire.DataItem {
				it.DimsVersion = 1
				return it
			}
			arrived := func(what string) {
				t.Helper()
				select {
				case <-turns:
				case <-ctx.Done():
					t.Fatalf("%s never reached its turn", what)
				}
			}
			row := func(k uint64) wire.DataItem { return at1(item(9, true, held, []uint64{k}, []uint64{1})) }

			// A held by the worker, B in the queue, and C waiting for
			// room there, holding the client's turn.
			if _, err := start(ctx, c, []wire.DataItem{row(0)}, pattern(elem, 0)); err != nil {
				t.Fatal(err)
			}
			arrived("A")
			select {
			case <-g.entered:
			case <-ctx.Done():
				t.Fatal("the first write never reached the worker")
			}
			if _, err := start(ctx, c, []wire.DataItem{row(1)}, pattern(elem, 1)); err != nil {
				t.Fatal(err)
			}
			arrived("B")
			cDone := make(chan error, 1)
			go func() {
				_, err := start(ctx, c, []wire.DataItem{row(2)}, pattern(elem, 2))
				cDone <- err
			}()
			arrived("C")

			// D writes objects 2 and 1, behind C.
			whole := region.Shape(dims...)
			d2, d1 := pattern(nbytes(dims), 0x20), pattern(nbytes(dims), 0x10)
			type result struct {
				res wire.DataResults
				err error
			}
			dDone := make(chan result, 1)
			go func() {
				res, _, err := startWait(ctx, c, []wire.DataItem{
					at1(item(2, true, dims, whole.Off, whole.Size)),
					at1(item(1, true, dims, whole.Off, whole.Size)),
				}, d2, d1)
				dDone <- result{res, err}
			}()
			arrived("D")

			// While D waits, object 1's lease ends; or a shrink
			// commits on the metadata server, whose cut does not
			// reach this server, and the lease ends.
			if meanwhile == "shrink" {
				objs.set(1, 2, 4, 16)
			}
			asked := objs.questionsAsked()
			e.svc.mu.Lock()
			e.svc.mu.confirmed[1] = e.svc.now() - time.Hour
			e.svc.mu.Unlock()
			g.release()
			if err := <-cDone; err != nil {
				t.Fatalf("C: %v", err)
			}
			var d result
			select {
			case d = <-dDone:
			case <-ctx.Done():
				t.Fatal("D never answered")
			}
			if n := objs.questionsAsked(); n != asked+1 {
				t.Errorf("%d questions once the lease ended, want 1: D confirms object 1's dims again", n-asked)
			}

			read := func(obj uint64) []byte {
				t.Helper()
				res, parts, err := startWait(ctx, c, []wire.DataItem{at1(item(obj, false, dims, whole.Off, whole.Size))})
				if err != nil {
					t.Fatal(err)
				}
				mustOK(t, res)
				return parts[0]
			}
			switch meanwhile {
			case "nothing":
				if d.err != nil {
					t.Fatalf("D, whose lease ended while it waited behind the client's earlier starts: %v, want it stored", d.err)
				}
				mustOK(t, d.res)
				if !bytes.Equal(read(2), d2) || !bytes.Equal(read(1), d1) {
					t.Fatal("D's bytes do not read back")
				}
			case "shrink":
				if !errors.Is(d.err, pdc.ErrStale) || !strings.Contains(d.err.Error(), "dims version 1 is older than version 2") {
					t.Fatalf("D, at dims replaced while it waited: %v, want ErrStale for the newer dims", d.err)
				}
				if got := read(2); !bytes.Equal(got, make([]byte, len(got))) {
					t.Fatal("object 2 holds D's bytes, although D was refused")
				}
			}
		})
	}
}

// A write whose dims lease ends between the writes of its start, after
// the start's leases were checked whole and its earlier writes were
// registered, is confirmed again there, with one question, and taken:
// on the path that stores a start's writes as they arrive (here) and on
// the workers' path. If its dims were replaced meanwhile it is refused
// as stale, and so is a later start at those dims.
func TestLeaseEndsBetweenWritesOfAStart(t *testing.T) {
	for _, path := range []string{"here", "workers"} {
		for _, meanwhile := range []string{"nothing", "shrink"} {
			t.Run(path+"/"+meanwhile, func(t *testing.T) {
				dims := []uint64{8, 16}
				objs := newLivesObjects()
				objs.set(1, 1, dims...)
				objs.set(2, 1, dims...)
				// The lease outlasts any run; its end is set by hand.
				cfg := Config{Objects: objs, lease: time.Hour}
				if path == "workers" {
					cfg.beforeIO = func(wire.DataItem) {} // keeps starts off the here path
				}
				reached, proceed := make(chan struct{}), make(chan struct{})
				var once sync.Once
				cfg.beforeEnqueue = func(it wire.DataItem) {
					if it.Obj == 1 && it.Write {
						once.Do(func() {
							close(reached)
							<-proceed
						})
					}
				}
				e := newEnv(t, cfg)
				c := e.dial("c")
				ctx := testCtx(t)
				whole := region.Shape(dims...)
				at1 := func(obj uint64, write bool) wire.DataItem {
					it := item(obj, write, dims, whole.Off, whole.Size)
					it.DimsVersion = 1
					return it
				}
				d2, d1 := pattern(nbytes(dims), 0x20), pattern(nbytes(dims), 0x10)
				type result struct {
					res wire.DataResults
					err error
				}
				done := make(chan result, 1)
				go func() {
					res, _, err := startWait(ctx, c, []wire.DataItem{at1(2, true), at1(1, true)}, d2, d1)
					done <- result{res, err}
				}()
				select {
				case <-reached:
				case <-ctx.Done():
					t.Fatal("the start's second write was never about to be registered")
				}
				// Between the two writes: object 1's lease ends (after a
				// shrink its cut never reached this server).
				if meanwhile == "shrink" {
					objs.set(1, 2, 4, 16)
				}
				asked := objs.questionsAsked()
				e.svc.mu.Lock()
				e.svc.mu.confirmed[1] = e.svc.now() - time.Hour
				e.svc.mu.Unlock()
				close(proceed)
				var d result
				select {
				case d = <-done:
				case <-ctx.Done():
					t.Fatal("the start never answered")
				}
				if n := objs.questionsAsked(); n != asked+1 {
					t.Errorf("%d questions once the lease ended, want 1", n-asked)
				}
				read := func(obj uint64) ([]byte, error) {
					t.Helper()
					res, parts, err := startWait(ctx, c, []wire.DataItem{at1(obj, false)})
					if err == nil {
						mustOK(t, res)
						return parts[0], nil
					}
					return nil, err
				}
				switch meanwhile {
				case "nothing":
					if d.err != nil {
						t.Fatalf("a start whose second write's lease ended after its first was registered: %v, want it stored", d.err)
					}
					mustOK(t, d.res)
					for obj, want := range map[uint64][]byte{1: d1, 2: d2} {
						if got, err := read(obj); err != nil || !bytes.Equal(got, want) {
							t.Fatalf("object %d: %v; the start's bytes do not read back", obj, err)
						}
					}
				case "shrink":
					if !errors.Is(d.err, pdc.ErrStale) || !strings.Contains(d.err.Error(), "dims version 1 is older than version 2") {
						t.Fatalf("a start whose second write's dims were replaced after its first was registered: %v, want ErrStale for the newer dims", d.err)
					}
					_, _, err := startWait(ctx, c, []wire.DataItem{at1(1, true)}, d1)
					if !errors.Is(err, pdc.ErrStale) {
						t.Fatalf("a later start at the replaced dims: %v, want ErrStale", err)
					}
				}
			})
		}
	}
}
