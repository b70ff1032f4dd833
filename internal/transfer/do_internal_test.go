package transfer

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/region"
)

// TestDoAll: transfers done in one waited request per server are done
// when DoAll returns (a write then reads it back, by TCP and through a
// lane, which the read's bytes take too), untracked by their object, and
// may run again; one under way is refused.
func TestDoAll(t *testing.T) {
	for _, mode := range []dtl.Mode{dtl.ModeStream, dtl.ModeShm} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx, e, _ := testEngine(t, mode)
			const n = 256 << 10
			o := testObject(ctx, t, e, "o", []uint64{2 * n}, false)
			want := bytes.Repeat([]byte("do all"), 2*n/6+1)[:2*n]
			halves := []region.Box{{Off: []uint64{0}, Size: []uint64{n}}, {Off: []uint64{n}, Size: []uint64{n}}}
			var ws []*Transfer
			for i, b := range halves {
				w, err := New(ctx, o, want[i*n:(i+1)*n], Write, region.Shape(n), b)
				if err != nil {
					t.Fatal(err)
				}
				ws = append(ws, w)
			}
			if err := e.DoAll(ctx, ws); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 2*n)
			r, err := New(ctx, o, got, Read, region.Shape(2*n), region.Shape(2*n))
			if err != nil {
				t.Fatal(err)
			}
			before := e.lanes.read.Load()
			if err := r.Do(ctx); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("read back differs from what DoAll wrote")
			}
			// With a lane, the read came through it, in the start's answer.
			if got, want := e.lanes.read.Load()-before, map[dtl.Mode]int64{dtl.ModeShm: 2 * n}[mode]; got != want {
				t.Fatalf("%d bytes read through the lane, want %d", got, want)
			}
			if s, err := r.Status(ctx); err != nil || s != Complete {
				t.Fatalf("status after Do: %v, %v; want Complete", s, err)
			}
			o.mu.Lock()
			pending := o.mu.npending
			o.mu.Unlock()
			if pending != 0 {
				t.Fatalf("%d transfers still tracked after Do", pending)
			}
			// Done transfers run again; one started and not waited is refused.
			if err := ws[0].Do(ctx); err != nil {
				t.Fatalf("Do again: %v", err)
			}
			if err := ws[1].Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := ws[1].Do(ctx); !errors.Is(err, pdc.ErrInvalid) {
				t.Fatalf("Do of a transfer under way: %v, want ErrInvalid", err)
			}
			if err := ws[1].Wait(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
