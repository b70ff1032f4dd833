package dataserver

import (
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// startHere waits at most firstTouchHere for the question about an object
// seen for the first time; the question is the service's, so a request
// that joined it, with a deadline of its own far off, gets the answer
// however slow, not the error of startHere giving up. (Asked under
// startHere's context, it failed every request that had joined it.)
func TestSlowFirstTouchFailsNoWaiter(t *testing.T) {
	objs := newFakeObjects()
	objs.hold = make(chan struct{})
	e := newEnv(t, Config{Objects: objs})
	ctx := testCtx(t)
	dims := []uint64{8, 8}
	whole := region.Shape(dims...)

	ca, cb := e.dial("a"), e.dial("b")
	// A: a plain write of a new object: startHere asks, for 200 ms.
	resA := make(chan error, 1)
	go func() {
		_, err := start(ctx, ca, []wire.DataItem{item(7, true, dims, whole.Off, whole.Size)}, pattern(nbytes(dims), 1))
		resA <- err
	}()
	select {
	case <-objs.in:
	case <-ctx.Done():
		t.Fatal("the write never asked about its object")
	}
	// B: another client's write-and-read-back of the same object, which
	// startHere declines (it has a read): start's admit joins A's question.
	resB := make(chan error, 1)
	began := time.Now()
	var tookB time.Duration
	go func() {
		items := []wire.DataItem{item(7, true, dims, whole.Off, whole.Size), item(7, false, dims, whole.Off, whole.Size)}
		_, err := start(ctx, cb, items, pattern(nbytes(dims), 2))
		tookB = time.Since(began)
		resB <- err
	}()
	// The metadata server answers after startHere gave up: the object
	// exists.
	time.Sleep(firstTouchHere + 300*time.Millisecond)
	close(objs.hold)
	if err := <-resA; err != nil {
		t.Errorf("A: %v", err)
	}
	if err := <-resB; err != nil {
		t.Fatalf("B, with a 10 s deadline, failed after %v: %v", tookB.Round(time.Millisecond), err)
	}
}
