package metaserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// createOne creates object name with dims on s and returns its id.
func createOne(t *testing.T, s *Service, name string, dims []uint64) uint64 {
	t.Helper()
	cb := wire.ObjBatch{Creates: []wire.ObjCreate{{ContID: 1, Name: name, Props: wire.ObjectProps{Dims: dims, Type: 1}}}}
	resp, err := s.objCreate(context.Background(), &rpc.Request{Header: cb.Marshal(nil), Client: "c"})
	if err != nil {
		t.Fatal(err)
	}
	var cr wire.ObjResults
	if err := cr.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	return cr.Items[0].Meta.ID
}

// placeAll places one write of box (off, size) of obj on s, one of cands.
func placeAll(t *testing.T, s *Service, obj uint64, off, size, cands []uint64) []wire.RegionPiece {
	t.Helper()
	return placeBatch(t, s, obj, []region.Box{{Off: off, Size: size}}, cands)[0]
}

// placeBatch places a batch of writes of boxes of obj on s, each on one of
// cands, and returns each one's pieces.
func placeBatch(t *testing.T, s *Service, obj uint64, boxes []region.Box, cands []uint64) [][]wire.RegionPiece {
	t.Helper()
	var batch wire.RegionBatch
	for _, b := range boxes {
		batch.Items = append(batch.Items, wire.RegionReq{Obj: obj, Off: b.Off, Size: b.Size, Candidates: cands, Elem: 4})
	}
	resp, err := s.regionPlace(context.Background(), &rpc.Request{Header: batch.Marshal(nil), Client: "c"})
	if err != nil {
		t.Fatal(err)
	}
	var out wire.RegionLocatedAll
	if err := out.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	pieces := make([][]wire.RegionPiece, len(out.Items))
	for i := range out.Items {
		pieces[i] = out.Items[i].Pieces
	}
	return pieces
}

// queryBox answers where the cells of box q of obj lie.
func queryBox(t *testing.T, s *Service, obj uint64, q region.Box) []wire.RegionPiece {
	t.Helper()
	req := wire.RegionReq{Obj: obj, Off: q.Off, Size: q.Size}
	resp, err := s.regionQuery(context.Background(), &rpc.Request{Header: req.Marshal(nil), Client: "c"})
	if err != nil {
		t.Fatal(err)
	}
	var out wire.RegionPieces
	if err := out.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	return out.Items
}

// regionModel is what the region map of a 2-d object must answer: the
// server of the newest write of each cell, -1 for a cell never written.
type regionModel struct {
	t     *testing.T
	r     *rand.Rand
	dims  []uint64
	owner []int
}

func newRegionModel(t *testing.T, dims []uint64) *regionModel {
	m := &regionModel{t: t, r: rand.New(rand.NewPCG(7, 7)), dims: dims, owner: make([]int, dims[0]*dims[1])}
	for i := range m.owner {
		m.owner[i] = -1
	}
	return m
}

func (m *regionModel) randBox() region.Box {
	b := region.Box{Off: make([]uint64, 2), Size: make([]uint64, 2)}
	for d := range 2 {
		b.Off[d] = m.r.Uint64N(m.dims[d])
		b.Size[d] = 1 + m.r.Uint64N(min(m.dims[d]-b.Off[d], 20))
	}
	return b
}

func (m *regionModel) cells(b region.Box, fn func(i uint64)) {
	for y := b.Off[0]; y < b.End(0); y++ {
		for x := b.Off[1]; x < b.End(1); x++ {
			fn(y*m.dims[1] + x)
		}
	}
}

// place places a random batch of writes and checks that each is covered
// once, with the cells already written staying on their servers.
func (m *regionModel) place(step int, s *Service, obj uint64) {
	var boxes []region.Box
	for range 1 + m.r.IntN(4) {
		b := m.randBox()
		if m.r.IntN(4) == 0 {
			b = region.Box{Off: []uint64{b.Off[0], 0}, Size: []uint64{b.Size[0], m.dims[1]}} // whole rows
		}
		boxes = append(boxes, b)
	}
	for i, ps := range placeBatch(m.t, s, obj, boxes, []uint64{0, 1, 2}) {
		seen := map[uint64]bool{}
		for _, p := range ps {
			srv := int(p.Server)
			m.cells(region.Box{Off: p.Off, Size: p.Size}, func(c uint64) {
				if seen[c] {
					m.t.Fatalf("step %d: cell %d placed twice", step, c)
				}
				seen[c] = true
				if m.owner[c] >= 0 && m.owner[c] != srv {
					m.t.Fatalf("step %d: cell %d, held by server %d, placed on %d", step, c, m.owner[c], srv)
				}
				m.owner[c] = srv
			})
		}
		m.cells(boxes[i], func(c uint64) {
			if !seen[c] {
				m.t.Fatalf("step %d: cell %d of %v not placed", step, c, boxes[i])
			}
		})
		if int(boxes[i].Volume()) != len(seen) {
			m.t.Fatalf("step %d: %d cells placed for a region of %d", step, len(seen), boxes[i].Volume())
		}
	}
}

// query checks the answer of a random query against the model.
func (m *regionModel) query(step int, s *Service, obj uint64) {
	q := m.randBox()
	got := map[uint64]int{}
	for _, p := range queryBox(m.t, s, obj, q) {
		m.cells(region.Box{Off: p.Off, Size: p.Size}, func(c uint64) {
			if _, dup := got[c]; dup {
				m.t.Fatalf("step %d: cell %d in two pieces", step, c)
			}
			got[c] = int(p.Server)
		})
	}
	m.cells(q, func(c uint64) {
		want := m.owner[c]
		g, has := got[c]
		ok := !has
		if want >= 0 {
			ok = has && g == want
		}
		if !ok {
			m.t.Fatalf("step %d: query %v: cell %d answered server %d (present %v), want %d", step, q, c, g, has, want)
		}
	})
}

// recordsOf is how many records the region map of obj holds in memory.
func recordsOf(s *Service, obj uint64) int {
	s.regions.mu.Lock()
	defer s.regions.mu.Unlock()
	return len(s.regions.state.maps[obj].recs)
}

// The region map answers every query with the server that took the
// newest write of each cell, across a reopen too. Writes go in place: a
// cell written once keeps its server; a batch of writes is placed as if
// one after the other.
func TestRegionMapMatchesEveryRecord(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	dims := []uint64{64, 12}
	obj := createOne(t, s, "map", dims)
	m := newRegionModel(t, dims)
	for step := range 400 {
		if step == 200 {
			s.Close()
			s = openAt(t, dir)
		}
		if m.r.IntN(3) > 0 {
			m.place(step, s, obj)
		} else {
			m.query(step, s, obj)
		}
	}
	// Rewriting the same box again and again does not grow the map; where
	// its cells are all on one server, one record replaces those it holds.
	before := recordsOf(s, obj)
	for range 50 {
		placeAll(t, s, obj, []uint64{0, 0}, dims, []uint64{0})
	}
	if after := recordsOf(s, obj); after > before+1 {
		t.Fatalf("after 50 whole-object writes the map holds %d records, %d before", after, before)
	}
	s.Close()

	s = openAt(t, dir)
	obj = createOne(t, s, "one", dims)
	for y := range dims[0] {
		placeAll(t, s, obj, []uint64{y, 0}, []uint64{1, dims[1]}, []uint64{2})
	}
	for range 3 {
		placeAll(t, s, obj, []uint64{0, 0}, dims, []uint64{0})
	}
	s.Close()
	s = openAt(t, dir)
	defer s.Close()
	s.regions.mu.Lock()
	rm, err := s.regionMapLocked(obj)
	s.regions.mu.Unlock()
	if err != nil || len(rm.recs) != 1 || rm.recs[0].server != 2 {
		t.Fatalf("after row writes and whole rewrites, and a reopen: %d records (%+v), %v; want one, on server 2", len(rm.recs), rm.recs, err)
	}
}

// piecesString sorts ps by server and offset and shows them as
// [off+size]@server.
func piecesString(ps []wire.RegionPiece) string {
	slices.SortFunc(ps, func(a, b wire.RegionPiece) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Off[0], b.Off[0]))
	})
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "[%d+%d]@%d ", p.Off[0], p.Size[0], p.Server)
	}
	return b.String()
}

// An overwrite goes where the data it replaces is, whatever the
// candidates: a placement made and never followed by its bytes (the
// client died) leaves reads finding the old data, not a server that never
// got the new. Only the part never written goes to a candidate. A client
// of the one-piece method gets a region on one server, and an error
// naming the version for one across several.
func TestOverwritePlacedInPlace(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	obj := createOne(t, s, "o", []uint64{100})
	place := func(off, size uint64, cand uint64) []wire.RegionPiece {
		t.Helper()
		return placeAll(t, s, obj, []uint64{off}, []uint64{size}, []uint64{cand})
	}
	query := func(off, size uint64) []wire.RegionPiece {
		t.Helper()
		return queryBox(t, s, obj, region.Box{Off: []uint64{off}, Size: []uint64{size}})
	}
	str := piecesString
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
	resp, err := old(12, 5)
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

// Every region of a placement batch is checked against its object's
// dims, not only the first of each object: a later one past the object's
// end, or of another number of dims, refuses the batch whole and records
// nothing.
func TestPlaceChecksEveryRegionOfAnObject(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	obj := createOne(t, s, "o", []uint64{100})
	for _, bad := range []wire.RegionReq{
		{Obj: obj, Off: []uint64{90}, Size: []uint64{1000}, Candidates: []uint64{1}, Elem: 4},
		{Obj: obj, Off: []uint64{0, 0}, Size: []uint64{10, 10}, Candidates: []uint64{1}, Elem: 4},
	} {
		b := wire.RegionBatch{Items: []wire.RegionReq{
			{Obj: obj, Off: []uint64{0}, Size: []uint64{10}, Candidates: []uint64{0}, Elem: 4},
			bad,
		}}
		_, err := s.regionPlace(context.Background(), &rpc.Request{Header: b.Marshal(nil), Client: "c"})
		if err == nil {
			t.Fatalf("a batch whose second region %v+%v lies outside the object's dims [100] was placed", bad.Off, bad.Size)
		}
		n := 0
		if err := s.scan(regionPrefix(obj), func(_, _ []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if got := queryBox(t, s, obj, region.Box{Off: []uint64{0}, Size: []uint64{100}}); n != 0 || len(got) != 0 {
			t.Fatalf("a refused batch left %d region records, and a query finds %s", n, piecesString(got))
		}
	}
}

// A placement whose commit applied but whose fsync failed is in the store
// all the same: the region map in memory follows it, so that the next
// placement does not take its sequence numbers again and overwrite its
// records. Before, the map dropped the merged record of [0, 20) while the
// store kept it (and had deleted the two it replaced); the next placement
// wrote its own record under the same key, and after a reopen the bytes
// of [0, 20), acknowledged on server 0, had no record: they read as zeros.
func TestPlacementWithFailedSyncKeepsTheMap(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	obj := createOne(t, s, "o", []uint64{100})
	place := func(off, size, cand uint64) ([]wire.RegionPiece, error) {
		b := wire.RegionBatch{Items: []wire.RegionReq{{Obj: obj, Off: []uint64{off}, Size: []uint64{size}, Candidates: []uint64{cand}, Elem: 4}}}
		resp, err := s.regionPlace(context.Background(), &rpc.Request{Header: b.Marshal(nil), Client: "c"})
		if err != nil {
			return nil, err
		}
		var out wire.RegionLocatedAll
		if err := out.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		return out.Items[0].Pieces, nil
	}
	for _, off := range []uint64{0, 10} {
		if _, err := place(off, 10, 0); err != nil {
			t.Fatal(err)
		}
	}
	// All of [0, 20) is on server 0: one record replaces the two.
	restore := failSyncs(s)
	if _, err := place(0, 20, 1); err == nil {
		t.Fatal("a placement whose fsync failed succeeded")
	}
	restore()
	if _, err := place(50, 10, 1); err != nil {
		t.Fatal(err)
	}
	want := "[0+20]@0 [50+10]@1 "
	if got := piecesString(queryBox(t, s, obj, region.Box{Off: []uint64{0}, Size: []uint64{100}})); got != want {
		t.Fatalf("before a reopen the map holds %s, want %s", got, want)
	}
	s.Close()
	s = openAt(t, dir)
	defer s.Close()
	got := piecesString(queryBox(t, s, obj, region.Box{Off: []uint64{0}, Size: []uint64{100}}))
	if got != want {
		t.Fatalf("after a reopen the map holds %s, want %s", got, want)
	}
}

// A region query racing the delete of its object answers with the
// object's pieces or not found, never with none: a client reads a region
// without pieces as zeros, without asking any data server, so an answer
// read from the map after the delete emptied it turned every acknowledged
// write into zeros (the crash loop saw it).
func TestRegionQueryRacingDelete(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	whole := region.Box{Off: []uint64{0}, Size: []uint64{64}}
	empty := 0
	for round := range 300 {
		obj := createOne(t, s, fmt.Sprint("o", round), []uint64{64})
		placeAll(t, s, obj, whole.Off, whole.Size, []uint64{0})
		deleted := make(chan error, 1)
		go func() {
			_, err := s.objDelete(ctx, &rpc.Request{Header: (&wire.ObjKey{ID: obj}).Marshal(nil)})
			deleted <- err
		}()
		for {
			req := wire.RegionReq{Obj: obj, Off: whole.Off, Size: whole.Size}
			resp, err := s.regionQuery(ctx, &rpc.Request{Header: req.Marshal(nil), Client: "c"})
			if errors.Is(err, pdc.ErrNotFound) {
				break
			}
			if err != nil {
				t.Fatalf("round %d: query: %v", round, err)
			}
			var out wire.RegionPieces
			if err := out.Unmarshal(resp.Header); err != nil {
				t.Fatal(err)
			}
			if len(out.Items) == 0 {
				empty++
			}
		}
		if err := <-deleted; err != nil {
			t.Fatal(err)
		}
	}
	if empty > 0 {
		t.Fatalf("%d queries racing a delete answered no pieces for an object written whole", empty)
	}
}
