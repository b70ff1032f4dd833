package metaserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// The region map answers every query with the server that took the
// newest write of each cell, across a reopen too. Writes go in place: a
// cell written once keeps its server; a batch of writes is placed as if
// one after the other.
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
			resp, err := s.regionPlace(ctx, &rpc.Request{Header: batch.Marshal(nil), Client: "c"})
			if err != nil {
				t.Fatal(err)
			}
			var out wire.RegionLocatedAll
			if err := out.Unmarshal(resp.Header); err != nil {
				t.Fatal(err)
			}
			for i, b := range boxes {
				seen := map[uint64]bool{}
				for _, p := range out.Items[i].Pieces {
					srv := int(p.Server)
					cells(region.Box{Off: p.Off, Size: p.Size}, func(c uint64) {
						if seen[c] {
							t.Fatalf("step %d: cell %d placed twice", step, c)
						}
						seen[c] = true
						if owner[c] >= 0 && owner[c] != srv {
							t.Fatalf("step %d: cell %d, held by server %d, placed on %d", step, c, owner[c], srv)
						}
						owner[c] = srv
					})
				}
				cells(b, func(c uint64) {
					if !seen[c] {
						t.Fatalf("step %d: cell %d of %v not placed", step, c, b)
					}
				})
				if int(b.Volume()) != len(seen) {
					t.Fatalf("step %d: %d cells placed for a region of %d", step, len(seen), b.Volume())
				}
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
	// Rewriting the same box again and again does not grow the map; where
	// its cells are all on one server, one record replaces those it holds.
	s.regions.mu.Lock()
	before := len(s.regions.state.maps[obj].recs)
	s.regions.mu.Unlock()
	for range 50 {
		batch := wire.RegionBatch{Items: []wire.RegionReq{{Obj: obj, Off: []uint64{0, 0}, Size: dims, Candidates: []uint64{0}, Elem: 4}}}
		if _, err := s.regionPlace(ctx, &rpc.Request{Header: batch.Marshal(nil), Client: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	s.regions.mu.Lock()
	after := len(s.regions.state.maps[obj].recs)
	s.regions.mu.Unlock()
	if after > before+1 {
		t.Fatalf("after 50 whole-object writes the map holds %d records, %d before", after, before)
	}
	s.Close()

	one := wire.ObjBatch{Creates: []wire.ObjCreate{{ContID: 1, Name: "one", Props: wire.ObjectProps{Dims: dims, Type: 1}}}}
	s = open()
	if resp, err = s.objCreate(ctx, &rpc.Request{Header: one.Marshal(nil), Client: "c"}); err != nil {
		t.Fatal(err)
	}
	if err := cr.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	obj = cr.Items[0].Meta.ID
	for y := range dims[0] {
		batch := wire.RegionBatch{Items: []wire.RegionReq{{Obj: obj, Off: []uint64{y, 0}, Size: []uint64{1, dims[1]}, Candidates: []uint64{2}, Elem: 4}}}
		if _, err := s.regionPlace(ctx, &rpc.Request{Header: batch.Marshal(nil), Client: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		batch := wire.RegionBatch{Items: []wire.RegionReq{{Obj: obj, Off: []uint64{0, 0}, Size: dims, Candidates: []uint64{0}, Elem: 4}}}
		if _, err := s.regionPlace(ctx, &rpc.Request{Header: batch.Marshal(nil), Client: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = open()
	defer s.Close()
	s.regions.mu.Lock()
	m, err := s.regionMapLocked(obj)
	s.regions.mu.Unlock()
	if err != nil || len(m.recs) != 1 || m.recs[0].server != 2 {
		t.Fatalf("after row writes and whole rewrites, and a reopen: %d records (%+v), %v; want one, on server 2", len(m.recs), m.recs, err)
	}
}

// An overwrite goes where the data it replaces is, whatever the
// candidates: a placement made and never followed by its bytes (the
// client died) leaves reads finding the old data, not a server that never
// got the new. Only the part never written goes to a candidate. A client
// of the one-piece method gets a region on one server, and an error
// naming the version for one across several.
func TestOverwritePlacedInPlace(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), CheckpointDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetPlacement(0, 1)
	s.SetReady()
	ctx := context.Background()
	cb := wire.ObjBatch{Creates: []wire.ObjCreate{{ContID: 1, Name: "o", Props: wire.ObjectProps{Dims: []uint64{100}, Type: 1}}}}
	resp, err := s.objCreate(ctx, &rpc.Request{Header: cb.Marshal(nil), Client: "c"})
	if err != nil {
		t.Fatal(err)
	}
	var cr wire.ObjResults
	if err := cr.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	obj := cr.Items[0].Meta.ID
	place := func(off, size uint64, cand uint64) []wire.RegionPiece {
		t.Helper()
		b := wire.RegionBatch{Items: []wire.RegionReq{{Obj: obj, Off: []uint64{off}, Size: []uint64{size}, Candidates: []uint64{cand}, Elem: 4}}}
		resp, err := s.regionPlace(ctx, &rpc.Request{Header: b.Marshal(nil), Client: "c"})
		if err != nil {
			t.Fatal(err)
		}
		var out wire.RegionLocatedAll
		if err := out.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		return out.Items[0].Pieces
	}
	query := func(off, size uint64) []wire.RegionPiece {
		t.Helper()
		req := wire.RegionReq{Obj: obj, Off: []uint64{off}, Size: []uint64{size}}
		resp, err := s.regionQuery(ctx, &rpc.Request{Header: req.Marshal(nil), Client: "c"})
		if err != nil {
			t.Fatal(err)
		}
		var out wire.RegionPieces
		if err := out.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		return out.Items
	}
	str := func(ps []wire.RegionPiece) string {
		slices.SortFunc(ps, func(a, b wire.RegionPiece) int {
			return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Off[0], b.Off[0]))
		})
		var b strings.Builder
		for _, p := range ps {
			fmt.Fprintf(&b, "[%d+%d]@%d ", p.Off[0], p.Size[0], p.Server)
		}
		return b.String()
	}
	if got := str(place(10, 20, 0)); got != "[10+20]@0 " {
		t.Fatalf("first write placed %s", got)
	}
	// Candidates say server 1, but [10, 30) is on 0: it goes there.
	if got := str(place(15, 10, 1)); got != "[15+10]@0 " {
		t.Fatalf("overwrite inside placed %s, want on server 0", got)
	}
	if got := str(place(0, 50, 1)); got != "[10+20]@0 [0+10]@1 [30+20]@1 " {
		t.Fatalf("overwrite across placed %s", got)
	}
	// Nothing written yet: reads still find [10, 30) on 0.
	if got := str(query(0, 50)); got != "[10+20]@0 [0+10]@1 [30+20]@1 " {
		t.Fatalf("query after placements found %s", got)
	}

	old := func(off, size uint64) (*rpc.Response, error) {
		b := wire.RegionBatch{Items: []wire.RegionReq{{Obj: obj, Off: []uint64{off}, Size: []uint64{size}, Candidates: []uint64{1}, Elem: 4}}}
		return s.regionAssign(ctx, &rpc.Request{Header: b.Marshal(nil), Client: "c"})
	}
	resp, err = old(12, 5)
	if err != nil {
		t.Fatal(err)
	}
	var one wire.RegionPieces
	if err := one.Unmarshal(resp.Header); err != nil || len(one.Items) != 1 || one.Items[0].Server != 0 {
		t.Fatalf("one-piece placement inside server 0's region: %+v, %v", one.Items, err)
	}
	if _, err := old(5, 20); !errors.Is(err, pdc.ErrVersion) {
		t.Fatalf("one-piece placement across two servers: %v, want ErrVersion", err)
	}
	if got := str(query(0, 100)); got != "[10+20]@0 [0+10]@1 [30+20]@1 " {
		t.Fatalf("a refused placement changed the map: %s", got)
	}
}
