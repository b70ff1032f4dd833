package dataserver

import (
	"errors"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// The dims a first-touch question learns are recorded only if newer than
// those seen meanwhile: a shrink's cut pushed here while the question is
// out (its answer older than the cut) must still refuse a start at the
// older dims, which would put rows past the shrink that a regrow reads
// back.
func TestFirstTouchAnswerOlderThanCut(t *testing.T) {
	objs := newLivesObjects()
	objs.set(1, 1, 8, 16)
	e := newEnv(t, Config{Objects: objs})
	c, other := e.dial("c"), e.dial("other")
	ctx := testCtx(t)
	cutErr := make(chan error, 1)
	objs.mu.Lock()
	objs.onAsk = func([]uint64) {
		objs.mu.Lock()
		objs.onAsk = nil
		objs.mu.Unlock()
		objs.set(1, 2, 2, 16)
		cut := wire.DimsCut{Obj: 1, DimsVersion: 2, Dims: []uint64{2, 16}}
		_, err := other.Call(ctx, wire.MethodDataCut, cut.Marshal(nil), nil, nil)
		cutErr <- err
	}
	objs.mu.Unlock()
	dims := []uint64{8, 16}
	it := item(1, true, dims, []uint64{0, 0}, dims)
	it.DimsVersion = 1
	_, _, err := startWait(ctx, c, []wire.DataItem{it}, pattern(nbytes(dims), 1))
	if err := <-cutErr; err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, pdc.ErrStale) || !strings.Contains(err.Error(), "dims version 1 is older than version 2") {
		t.Fatalf("a write at dims version 1 after a cut to version 2 came during its first-touch question: %v, want ErrStale", err)
	}
	// Still refused later: what the answer said did not replace the cut.
	_, err = start(ctx, c, []wire.DataItem{it}, pattern(nbytes(dims), 1))
	if !errors.Is(err, pdc.ErrStale) {
		t.Fatalf("a later write at dims version 1: %v, want ErrStale", err)
	}
}
