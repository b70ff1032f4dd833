package metaserver

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// The region map answers every query as if it kept every record ever
// written (newest first), though it drops records a newer one covers and
// looks only at a window of them; across a reopen too.
func TestRegionMapMatchesEveryRecord(t *testing.T) {
	dir, cp := t.TempDir(), t.TempDir()
	open := func() *Service {
		s, err := Open(Config{Dir: dir, CheckpointDir: cp, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		s.SetPlacement(0, 1)
		s.SetReady()
		return s
	}
	s := open()
	ctx := context.Background()
	dims := []uint64{64, 12}
	var cb wire.ObjBatch
	cb.Creates = append(cb.Creates, wire.ObjCreate{ContID: 1, Name: "map", Props: wire.ObjectProps{Dims: dims, Type: 1}})
	resp, err := s.objCreate(ctx, &rpc.Request{Header: cb.Marshal(nil), Client: "c"})
	if err != nil {
		t.Fatal(err)
	}
	var cr wire.ObjResults
	if err := cr.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	obj := cr.Items[0].Meta.ID

	// The model: the server of the newest write of each cell.
	owner := make([]int, dims[0]*dims[1])
	for i := range owner {
		owner[i] = -1
	}
	r := rand.New(rand.NewPCG(7, 7))
	randBox := func() region.Box {
		b := region.Box{Off: make([]uint64, 2), Size: make([]uint64, 2)}
		for d := range 2 {
			b.Off[d] = r.Uint64N(dims[d])
			b.Size[d] = 1 + r.Uint64N(min(dims[d]-b.Off[d], 20))
		}
		return b
	}
	cells := func(b region.Box, fn func(i uint64)) {
		for y := b.Off[0]; y < b.End(0); y++ {
			for x := b.Off[1]; x < b.End(1); x++ {
				fn(y*dims[1] + x)
			}
		}
	}
	for step := range 400 {
		if step == 200 {
			s.Close()
			s = open()
		}
		if r.IntN(3) > 0 {
			var batch wire.RegionBatch
			var boxes []region.Box
			for range 1 + r.IntN(4) {
				b := randBox()
				if r.IntN(4) == 0 {
					b = region.Box{Off: []uint64{b.Off[0], 0}, Size: []uint64{b.Size[0], dims[1]}} // whole rows
				}
				boxes = append(boxes, b)
				batch.Items = append(batch.Items, wire.RegionReq{Obj: obj, Off: b.Off, Size: b.Size, Candidates: []uint64{0, 1, 2}, Elem: 4})
			}
			resp, err := s.regionAssign(ctx, &rpc.Request{Header: batch.Marshal(nil), Client: "c"})
			if err != nil {
				t.Fatal(err)
			}
			var out wire.RegionPieces
			if err := out.Unmarshal(resp.Header); err != nil {
				t.Fatal(err)
			}
			for i, b := range boxes {
				srv := int(out.Items[i].Server)
				cells(b, func(c uint64) { owner[c] = srv })
			}
			continue
		}
		q := randBox()
		req := wire.RegionReq{Obj: obj, Off: q.Off, Size: q.Size}
		resp, err := s.regionQuery(ctx, &rpc.Request{Header: req.Marshal(nil), Client: "c"})
		if err != nil {
			t.Fatal(err)
		}
		var out wire.RegionPieces
		if err := out.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		got := map[uint64]int{}
		for _, p := range out.Items {
			cells(region.Box{Off: p.Off, Size: p.Size}, func(c uint64) {
				if _, dup := got[c]; dup {
					t.Fatalf("step %d: cell %d in two pieces", step, c)
				}
				got[c] = int(p.Server)
			})
		}
		cells(q, func(c uint64) {
			want, ok := owner[c], true
			g, has := got[c]
			if want < 0 {
				ok = !has
			} else {
				ok = has && g == want
			}
			if !ok {
				t.Fatalf("step %d: query %v: cell %d answered server %d (present %v), want %d", step, q, c, g, has, want)
			}
		})
	}
	// Rewriting the same rows again and again does not grow the map.
	s.regionMu.Lock()
	before := len(s.regions.maps[obj].recs)
	s.regionMu.Unlock()
	for range 50 {
		batch := wire.RegionBatch{Items: []wire.RegionReq{{Obj: obj, Off: []uint64{0, 0}, Size: dims, Candidates: []uint64{0}, Elem: 4}}}
		if _, err := s.regionAssign(ctx, &rpc.Request{Header: batch.Marshal(nil), Client: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	s.regionMu.Lock()
	after := len(s.regions.maps[obj].recs)
	s.regionMu.Unlock()
	if after != 1 {
		t.Fatalf("after 50 whole-object writes the map holds %d records (%d before), want 1", after, before)
	}
	s.Close()
	s = open()
	defer s.Close()
	s.regionMu.Lock()
	m, err := s.regionMapLocked(obj)
	s.regionMu.Unlock()
	if err != nil || len(m.recs) != 1 {
		t.Fatalf("after reopen: %d records, %v; the shadowed ones were not deleted from the store", len(m.recs), err)
	}
}
