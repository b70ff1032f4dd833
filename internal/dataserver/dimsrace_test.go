package dataserver

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// A set dims that commits while a start's dims are being confirmed is
// seen when the start is registered, if it can matter: a shrink is pushed
// here before it is answered, and a write under a grow is registered
// here before it is acknowledged; either refuses the older start, which
// would otherwise cut rows under newer dims. The metadata server answers
// the version it has as the question reaches it, and the set dims
// commits while the answer is on its way.
func TestDimsChangedWhileConfirming(t *testing.T) {
	for _, change := range []string{"pushed cut", "grow and write"} {
		objs := newLivesObjects()
		objs.set(1, 1, 8, 16)
		e := newEnv(t, Config{Objects: objs})
		c, other := e.dial("c"), e.dial("other")
		ctx := testCtx(t)
		dims := []uint64{8, 16}
		mk := func(write bool, version uint64, dims []uint64, box region.Box) wire.DataItem {
			it := item(1, write, dims, box.Off, box.Size)
			it.DimsVersion = version
			return it
		}
		data := pattern(nbytes(dims), 1)
		for i := range data {
			data[i] |= 1 // no zero byte, so a cut row shows
		}
		res, _, err := startWait(ctx, c, []wire.DataItem{mk(true, 1, dims, region.Shape(dims...))}, data)
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, res)

		// c's read carries a shrink to 2 rows (version 2), newer than
		// any seen here: it is confirmed, and version 2 is current as
		// the question reaches the metadata server.
		objs.set(1, 2, 2, 16)
		grown := []uint64{16, 16}
		tail := region.Box{Off: []uint64{8, 0}, Size: []uint64{8, 16}}
		tailData := pattern(nbytes(tail.Size), 2)
		changed := make(chan error, 1)
		objs.mu.Lock()
		objs.onAsk = func([]uint64) {
			switch change {
			case "pushed cut":
				// Another client shrinks to 1 row (version 3): the
				// cut is pushed here before its set dims answers.
				objs.set(1, 3, 1, 16)
				cut := wire.DimsCut{Obj: 1, DimsVersion: 3, Dims: []uint64{1, 16}}
				_, err := other.Call(ctx, wire.MethodDataCut, cut.Marshal(nil), nil, nil)
				changed <- err
			case "grow and write":
				// Another client grows to 16 rows (version 3), which
				// pushes nothing, and writes rows 8-15.
				objs.set(1, 3, grown...)
				res, _, err := startWait(ctx, other, []wire.DataItem{mk(true, 3, grown, tail)}, tailData)
				if err == nil && res.Items[0].Code != wire.CodeOK {
					err = res.Items[0].Code.Err()
				}
				changed <- err
			}
		}
		objs.mu.Unlock()
		shrunk := []uint64{2, 16}
		_, err = start(ctx, c, []wire.DataItem{mk(false, 2, shrunk, region.Shape(shrunk...))})
		select {
		case err := <-changed:
			if err != nil {
				t.Fatalf("%s: %v", change, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s: the shrink's dims were not confirmed (start: %v)", change, err)
		}
		if !errors.Is(err, pdc.ErrStale) || !strings.Contains(err.Error(), "dims version 2 is older than version 3") {
			t.Fatalf("%s while a shrink's dims were confirmed: the shrink's start: %v, want ErrStale", change, err)
		}
		if change == "grow and write" {
			res, parts, err := startWait(ctx, c, []wire.DataItem{mk(false, 3, grown, region.Shape(grown...))})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, res)
			if want := append(append([]byte(nil), data...), tailData...); !bytes.Equal(parts[0], want) {
				t.Fatalf("%s: the rows read back differ from those written", change)
			}
		}
	}
}
