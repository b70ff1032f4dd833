package dataserver

import (
	"errors"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// A cut pushed by the metadata server (MethodDataCut) is applied as if a
// transfer had carried it: the rows past the shrink read zeros after a
// regrow that no transfer came between, and a transfer with dims older
// than the cut's is refused as stale.
func TestCutBeforeRegrow(t *testing.T) {
	for _, byRegion := range []bool{false, true} {
		e := newEnv(t, Config{})
		c := e.dial("c")
		ctx := testCtx(t)
		mk := func(write bool, version uint64, dims []uint64, box region.Box) wire.DataItem {
			it := item(3, write, dims, box.Off, box.Size)
			if byRegion {
				it = regItem(3, write, dims, box.Off, box.Size)
			}
			it.DimsVersion = version
			return it
		}
		full := []uint64{27, 8}
		data := pattern(nbytes(full), 5)
		for i := range data {
			data[i] |= 1 // no zero byte, so a cut row shows
		}
		res, _, err := startWait(ctx, c, []wire.DataItem{mk(true, 1, full, region.Shape(full...))}, data)
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, res)
		cut := wire.DimsCut{Obj: 3, DimsVersion: 2, Dims: []uint64{8, 8}}
		if _, err := e.dial("meta").Call(ctx, wire.MethodDataCut, cut.Marshal(nil), nil, nil); err != nil {
			t.Fatal(err)
		}
		// A write with the dims from before the cut is refused.
		_, err = start(ctx, c, []wire.DataItem{mk(true, 1, full, region.Shape(27, 8))}, data)
		if !errors.Is(err, pdc.ErrStale) {
			t.Fatalf("byRegion %v: write with dims older than the cut: %v, want ErrStale", byRegion, err)
		}
		regrow := []uint64{26, 8}
		res, parts, err := startWait(ctx, c, []wire.DataItem{mk(false, 3, regrow, region.Shape(regrow...))})
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, res)
		got := parts[0]
		kept := nbytes([]uint64{8, 8})
		for i, b := range got {
			want := byte(0)
			if i < kept {
				want = data[i]
			}
			if b != want {
				t.Fatalf("byRegion %v: byte %d (row %d) reads %d after the cut and a regrow, want %d", byRegion, i, i/nbytes([]uint64{1, 8}), b, want)
			}
		}
	}
}
