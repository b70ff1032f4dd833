package metaserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/overlay"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// The region map of objects partitioned region by region (dynamic, local):
// which data slot (placement.SlotHost) holds each written region, in the
// order written. A slot is the index of the data server written to, in
// the cluster of that time; it stays valid when the cluster restarts with
// another number of servers.

func regionPrefix(obj uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'R'}, obj) }

func keyRegion(obj, seq uint64) []byte { return binary.BigEndian.AppendUint64(regionPrefix(obj), seq) }

// keyLoad holds the bytes this metadata server has placed in a data slot.
func keyLoad(slot uint32) []byte { return binary.BigEndian.AppendUint32([]byte{'L'}, slot) }

// regions serves the region map: where the written regions of objects
// partitioned region by region lie, and the bytes placed in each slot.
type regions struct {
	*core
	// mu guards state and orders region map records: placements of one
	// object get increasing sequence numbers in the order they commit.
	// A placement lets go of it before its commit's sync (the reads of
	// what it changed wait on touches), so that no query or placement
	// of another object waits for that fsync.
	mu    sync.Mutex
	state regionState
}

func newRegions(c *core) *regions {
	return &regions{core: c, state: regionState{lastSeq: map[uint64]uint64{}, loads: map[uint32]uint64{}}}
}

// forget drops what it holds in memory of deleted objects.
func (s *regions) forget(ids []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.state.lastSeq, id)
		delete(s.state.maps, id)
	}
}

// regionState is the in-memory view of the region map, loaded lazily from
// the store. Guarded by regions.mu.
type regionState struct {
	lastSeq map[uint64]uint64 // per object
	loads   map[uint32]uint64 // per data slot
	maps    map[uint64]*regionMap
}

// regionMap is one object's live region records, sorted by their first
// dim's offset, so that a query looks only at records that can reach its
// box: those starting within the longest record's extent before it.
type regionMap struct {
	recs    []regionRec
	maxLen0 uint64 // the largest first-dim size of any record
}

type regionRec struct {
	box    region.Box
	seq    uint64
	server uint32
}

// window calls fn for each record that may intersect box.
func (m *regionMap) window(box region.Box, fn func(i int)) {
	lo := uint64(0)
	if box.Off[0] >= m.maxLen0 {
		lo = box.Off[0] - m.maxLen0 + 1
	}
	hi := box.Off[0] + box.Size[0]
	i, _ := slices.BinarySearchFunc(m.recs, lo, func(r regionRec, t uint64) int { return cmpU64(r.box.Off[0], t) })
	for ; i < len(m.recs) && m.recs[i].box.Off[0] < hi; i++ {
		fn(i)
	}
}

func (m *regionMap) insert(r regionRec) {
	i, _ := slices.BinarySearchFunc(m.recs, r.box.Off[0], func(x regionRec, t uint64) int { return cmpU64(x.box.Off[0], t) })
	// After any record starting at the same offset: seq order within.
	for i < len(m.recs) && m.recs[i].box.Off[0] == r.box.Off[0] {
		i++
	}
	m.recs = slices.Insert(m.recs, i, r)
	m.maxLen0 = max(m.maxLen0, r.box.Size[0])
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// regionMapLocked returns obj's region map, loading it from the store the
// first time.
func (s *regions) regionMapLocked(obj uint64) (*regionMap, error) {
	if m := s.state.maps[obj]; m != nil {
		return m, nil
	}
	m := &regionMap{}
	err := s.scan(regionPrefix(obj), func(k, v []byte) error {
		var p wire.RegionPiece
		if err := p.Unmarshal(v); err != nil {
			return fmt.Errorf("object %d: stored region: %w", obj, err)
		}
		m.insert(regionRec{box: region.Box{Off: p.Off, Size: p.Size}, seq: binary.BigEndian.Uint64(k[len(k)-8:]), server: p.Server})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.state.maps == nil {
		s.state.maps = map[uint64]*regionMap{}
	}
	s.state.maps[obj] = m
	return m, nil
}

func (s *regions) lastSeqLocked(obj uint64) (uint64, error) {
	if seq, ok := s.state.lastSeq[obj]; ok {
		return seq, nil
	}
	p := regionPrefix(obj)
	it, err := s.st.NewIter(nil, nil)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var seq uint64
	if it.SeekLT(prefixEnd(p)) && len(it.Key()) == len(p)+8 && string(it.Key()[:len(p)]) == string(p) {
		seq = binary.BigEndian.Uint64(it.Key()[len(p):])
	}
	s.state.lastSeq[obj] = seq
	return seq, nil
}

func (s *regions) loadLocked(slot uint32) (uint64, error) {
	if v, ok := s.state.loads[slot]; ok {
		return v, nil
	}
	v, ok, err := s.st.Get(keyLoad(slot))
	if err != nil {
		return 0, err
	}
	var n uint64
	if ok && len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	s.state.loads[slot] = n
	return n, nil
}

// objectBox loads an object and checks that a region lies inside it.
func (s *regions) objectRegion(obj uint64, off, size []uint64) (*wire.ObjectMeta, region.Box, error) {
	m, _, err := s.loadObjByID(obj)
	if err != nil {
		return nil, region.Box{}, err
	}
	box := region.Box{Off: off, Size: size}
	if err := box.Check(); err != nil {
		return nil, box, fmt.Errorf("object %q: %w", m.Name, err)
	}
	if err := box.Within(m.Props.Dims); err != nil {
		return nil, box, fmt.Errorf("object %q: %w", m.Name, err)
	}
	return m, box, nil
}

// regionPlace answers where each region of a batch of writes goes, as
// pieces on data servers (MethodRegionPlace). A write goes in place: each
// part of it that a recorded region holds goes to that region's data
// server, which holds the bytes it replaces, and nothing is recorded for
// it. Only the parts no region holds yet get a record, on the candidate
// data server that holds the fewest bytes placed by this metadata
// server. So a record never shadows another, and a write that never
// reaches its data server (its client died, or the server) leaves every
// acknowledged byte where reads find it. Before, each write got a record
// of its own on the least-loaded server, made before the bytes were
// there: an overwrite cut short read back as zeros (issue 25).
func (s *regions) regionPlace(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var in wire.RegionBatch
	if err := decode(req, &in); err != nil {
		return nil, err
	}
	placed, err := s.place(ctx, &in, false)
	if err != nil {
		return nil, err
	}
	out := wire.RegionLocatedAll{Items: make([]wire.RegionLocated, len(placed))}
	for i, ps := range placed {
		out.Items[i].Pieces = ps
	}
	return rpc.Respond(&out), nil
}

// regionAssign is regionPlace for clients before it (MethodRegionAssign):
// one piece per region. A region whose parts are held by several data
// servers is refused: it cannot go to one without shadowing the others.
func (s *regions) regionAssign(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var in wire.RegionBatch
	if err := decode(req, &in); err != nil {
		return nil, err
	}
	placed, err := s.place(ctx, &in, true)
	if err != nil {
		return nil, err
	}
	out := wire.RegionPieces{Items: make([]wire.RegionPiece, len(placed))}
	for i, ps := range placed {
		out.Items[i] = ps[0]
	}
	return rpc.Respond(&out), nil
}

// place places a batch of writes (see regionPlace), each as disjoint
// pieces that cover it, sorted by server; with onePiece, each as one
// piece. The batch is refused whole for one bad region.
func (s *regions) place(ctx context.Context, in *wire.RegionBatch, onePiece bool) ([][]wire.RegionPiece, error) {
	if len(in.Items) > limits.MaxBatchItems {
		return nil, fmt.Errorf("%d regions in one request, at most %d: %w", len(in.Items), limits.MaxBatchItems, pdc.ErrTooLarge)
	}
	// Checked under the read lock so that a delete cannot slip between
	// the check and the commit.
	if err := s.lifeMu.RLock(ctx); err != nil {
		return nil, fmt.Errorf("place %d regions: %w", len(in.Items), err)
	}
	out, wait, tc, err := s.placeLocked(in, onePiece)
	if err == nil && wait != nil {
		// Out of the regions' lock: the placements and queries of other
		// objects go on meanwhile; those of these objects wait for tc.
		// A batch that recorded regions is acknowledged once its commit
		// is durable, and with it every record it read: the log is
		// synced in order, and a commit after a failed sync first makes
		// everything applied durable.
		err = wait()
	}
	s.lifeMu.RUnlock()
	s.touches.end(tc)
	if errors.Is(err, pdc.ErrNotFound) {
		// An object deleted perhaps by a delete whose sync failed, which
		// a power loss would bring back: "not found" once that is
		// durable, as a region query answers it.
		objs := make([]uint64, len(in.Items))
		for i := range in.Items {
			objs[i] = in.Items[i].Obj
		}
		return nil, s.readDurably(ctx, func() string { return fmt.Sprintf("place %d regions", len(in.Items)) }, err, objs...)
	}
	if err != nil {
		return nil, err
	}
	if wait != nil {
		return out, nil
	}
	// Answered from the region map alone: every write goes in place,
	// to the server of a record that may be a placement's still in its
	// fsync, or whose sync failed. A power loss would take that record
	// back, and the bytes written in place would have no record naming
	// them (read as zeros, or the region placed afresh elsewhere).
	objs := make([]uint64, len(in.Items))
	for i := range in.Items {
		objs[i] = in.Items[i].Obj
	}
	if err := s.readDurably(ctx, func() string { return fmt.Sprintf("place %d regions", len(in.Items)) }, nil, objs...); err != nil {
		return nil, err
	}
	return out, nil
}

// placeLocked places the batch under the regions' lock. If it records
// regions, it applies their commit and returns the wait for its sync,
// which the caller calls out of the lock, and the touch that holds back
// the reads of the objects it changed until then, which the caller ends
// once the wait returned (with an error too); wait is nil if it recorded
// nothing. The caller holds lifeMu for reading.
func (s *regions) placeLocked(in *wire.RegionBatch, onePiece bool) (_ [][]wire.RegionPiece, wait func() error, tc *touch, _ error) {
	boxes := make([]region.Box, len(in.Items))
	// Each object is loaded once; each region is checked against its dims.
	objs := map[uint64]*wire.ObjectMeta{}
	for i, it := range in.Items {
		if len(it.Candidates) == 0 {
			return nil, nil, nil, fmt.Errorf("region %d of %d: no data server to choose from: %w", i+1, len(in.Items), pdc.ErrInvalid)
		}
		m := objs[it.Obj]
		if m == nil {
			var err error
			if m, _, err = s.loadObjByID(it.Obj); err != nil {
				return nil, nil, nil, fmt.Errorf("region %d of %d: %w", i+1, len(in.Items), err)
			}
			objs[it.Obj] = m
		}
		boxes[i] = region.Box{Off: it.Off, Size: it.Size}
		if err := boxes[i].Within(m.Props.Dims); err != nil {
			return nil, nil, nil, fmt.Errorf("region %d of %d: object %q: %w", i+1, len(in.Items), m.Name, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := placing{s: s, b: s.st.NewBatch(), loads: map[uint32]uint64{}, seqs: map[uint64]uint64{}, gone: map[uint64]map[uint64]bool{}}
	defer p.b.Close()
	out := make([][]wire.RegionPiece, len(in.Items))
	for i := range in.Items {
		ps, err := p.one(&in.Items[i], boxes[i])
		if err == nil && onePiece && len(ps) != 1 {
			err = fmt.Errorf("region %v of object %d lies on %d data servers; a client of this version writes it in place: %w", boxes[i], in.Items[i].Obj, len(ps), pdc.ErrVersion)
		}
		if err != nil {
			p.undo()
			return nil, nil, nil, err
		}
		out[i] = ps
	}
	if len(p.adds) == 0 {
		return out, nil, nil, nil
	}
	for r, l := range p.loads {
		p.b.Set(keyLoad(r), binary.BigEndian.AppendUint64(nil, l))
	}
	// The new records are in the maps, which readers see once the lock
	// is let go, before the commit's sync: until it returns, the reads
	// of these objects (queries, writes placed over them) wait for it
	// (touching), and those of other objects do not.
	if s.touches.on {
		changed := make([]uint64, len(p.adds))
		for i, a := range p.adds {
			changed[i] = a.obj
		}
		tc = s.touches.begin(changed...)
	}
	n := len(p.adds)
	synced, err := s.st.CommitApply(p.b)
	if err != nil {
		p.undo()
		return nil, nil, tc, fmt.Errorf("record %d regions: %w", n, err)
	}
	// The batch is applied: the state follows the store even if the sync
	// fails, or the next placement would take the same sequence numbers
	// and overwrite records the store holds.
	for r, l := range p.loads {
		s.state.loads[r] = l
	}
	for o, seq := range p.seqs {
		s.state.lastSeq[o] = seq
	}
	for o, gone := range p.gone {
		m := s.state.maps[o]
		m.recs = slices.DeleteFunc(m.recs, func(r regionRec) bool { return gone[r.seq] })
	}
	return out, func() error {
		if err := synced(); err != nil {
			return fmt.Errorf("record %d regions: %w", n, err)
		}
		return nil
	}, tc, nil
}

// placing is one batch of placements under way. Its new records are in
// the region maps as they are made, so that a later region of the batch
// writes in place over an earlier one; undo takes them out again if the
// batch fails.
type placing struct {
	s     *regions
	b     metastore.Batch
	loads map[uint32]uint64 // per data server, with this batch's bytes
	seqs  map[uint64]uint64 // per object, the last seq used
	adds  []placed
	gone  map[uint64]map[uint64]bool // per object, the seqs a merged record replaces
}

type placed struct {
	obj uint64
	seq uint64
}

// one places the write of box (it) and records what it must.
// Requires s.mu held.
func (p *placing) one(it *wire.RegionReq, box region.Box) ([]wire.RegionPiece, error) {
	m, err := p.s.regionMapLocked(it.Obj)
	if err != nil {
		return nil, err
	}
	var pieces []overlay.Piece
	var servers []uint32
	var inside []uint64 // seqs of the records box holds whole
	m.window(box, func(i int) {
		r := m.recs[i]
		if r.box.Ndim() != box.Ndim() || !overlaps(r.box, box) {
			return
		}
		pieces = append(pieces, overlay.Piece{Box: r.box, Seq: r.seq})
		servers = append(servers, r.server)
		if box.Contains(r.box) {
			inside = append(inside, r.seq)
		}
	})
	frags, holes := overlay.Resolve(box, pieces)
	var out []wire.RegionPiece
	one := len(holes) == 0 && len(frags) > 0
	for _, f := range frags {
		one = one && servers[f.Piece] == servers[frags[0].Piece]
		out = append(out, wire.RegionPiece{Off: f.Box.Off, Size: f.Box.Size, Server: servers[f.Piece]})
	}
	if one {
		// All of it on one server: one piece. If it holds several
		// records whole, one record replaces them, which changes no
		// element's server, so that rewriting the same box after many
		// small writes does not keep the map fragmented.
		srv := servers[frags[0].Piece]
		if len(inside) > 1 {
			if err := p.record(it.Obj, box, srv); err != nil {
				return nil, err
			}
			g := p.gone[it.Obj]
			if g == nil {
				g = map[uint64]bool{}
				p.gone[it.Obj] = g
			}
			for _, seq := range inside {
				if !g[seq] {
					g[seq] = true
					p.b.Delete(keyRegion(it.Obj, seq))
				}
			}
		}
		return []wire.RegionPiece{{Off: box.Off, Size: box.Size, Server: srv}}, nil
	}
	if len(holes) > 0 {
		best, err := p.leastLoaded(it.Candidates)
		if err != nil {
			return nil, err
		}
		for _, h := range holes {
			if err := p.record(it.Obj, h, best); err != nil {
				return nil, err
			}
			p.loads[best] += h.Volume() * uint64(max(it.Elem, 1))
			out = append(out, wire.RegionPiece{Off: h.Off, Size: h.Size, Server: best})
		}
	}
	slices.SortStableFunc(out, func(a, b wire.RegionPiece) int { return cmpU64(uint64(a.Server), uint64(b.Server)) })
	return out, nil
}

// leastLoaded is the candidate holding the fewest bytes placed by this
// metadata server (ties to the first).
func (p *placing) leastLoaded(cands []uint64) (uint32, error) {
	return placement.LeastLoaded(cands, func(r uint32) (uint64, error) {
		l, ok := p.loads[r]
		if !ok {
			var err error
			if l, err = p.s.loadLocked(r); err != nil {
				return 0, err
			}
			p.loads[r] = l
		}
		return l, nil
	})
}

// record adds a record of box on server to the batch and to the map.
func (p *placing) record(obj uint64, box region.Box, server uint32) error {
	seq, ok := p.seqs[obj]
	if !ok {
		var err error
		if seq, err = p.s.lastSeqLocked(obj); err != nil {
			return err
		}
	}
	seq++
	p.seqs[obj] = seq
	rp := wire.RegionPiece{Off: box.Off, Size: box.Size, Server: server}
	p.b.Set(keyRegion(obj, seq), rp.Marshal(nil))
	p.s.state.maps[obj].insert(regionRec{box: box.Clone(), seq: seq, server: server})
	p.adds = append(p.adds, placed{obj, seq})
	return nil
}

// undo takes the batch's records out of the maps.
func (p *placing) undo() {
	added := map[uint64]map[uint64]bool{}
	for _, a := range p.adds {
		if added[a.obj] == nil {
			added[a.obj] = map[uint64]bool{}
		}
		added[a.obj][a.seq] = true
	}
	for o, seqs := range added {
		m := p.s.state.maps[o]
		m.recs = slices.DeleteFunc(m.recs, func(r regionRec) bool { return seqs[r.seq] })
	}
	p.adds = nil
}

// overlaps reports whether a and b, of the same dimensionality, share an
// element.
func overlaps(a, b region.Box) bool {
	for i := range a.Size {
		if a.Off[i] >= b.End(i) || b.Off[i] >= a.End(i) {
			return false
		}
	}
	return true
}

// regionQuery answers which data servers hold the parts of a region: the
// newest write of every element, as disjoint pieces; parts never written
// are left out (they read as zeros).
func (s *regions) regionQuery(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var in wire.RegionReq
	if err := decode(req, &in); err != nil {
		return nil, err
	}
	out, err := s.locate(ctx, &in)
	// The map, or the object's absence, may be a change whose fsync
	// failed (a placement, a delete): a reader sent to a server by a
	// placement a power loss takes back reads what no map names after it.
	if err := s.readDurably(ctx, func() string { return fmt.Sprintf("object %d: locate a region", in.Obj) }, err, in.Obj); err != nil {
		return nil, err
	}
	return rpc.Respond(&wire.RegionPieces{Items: out}), nil
}

// regionQueryAll is regionQuery for many regions in one request; each
// region is answered alone, with its own error.
func (s *regions) regionQueryAll(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var in wire.RegionBatch
	if err := decode(req, &in); err != nil {
		return nil, err
	}
	if len(in.Items) > limits.MaxBatchItems {
		return nil, fmt.Errorf("%d regions in one request, at most %d: %w", len(in.Items), limits.MaxBatchItems, pdc.ErrTooLarge)
	}
	out := wire.RegionLocatedAll{Items: make([]wire.RegionLocated, len(in.Items))}
	for i := range in.Items {
		pieces, err := s.locate(ctx, &in.Items[i])
		if err != nil && ctx.Err() != nil {
			// The request's deadline passed waiting for the lock: no
			// item's answer, not a failure of this one.
			return nil, err
		}
		if err != nil {
			out.Items[i] = wire.RegionLocated{Code: wire.CodeOf(err), Message: err.Error()}
			continue
		}
		out.Items[i].Pieces = pieces
	}
	objs := make([]uint64, len(in.Items))
	for i := range in.Items {
		objs[i] = in.Items[i].Obj
	}
	if err := s.readDurably(ctx, func() string { return fmt.Sprintf("locate %d regions", len(in.Items)) }, nil, objs...); err != nil { // as regionQuery
		return nil, err
	}
	return rpc.Respond(&out), nil
}

// locate returns the disjoint parts of a region that data servers hold,
// each with its server, the newest write winning where writes overlap.
func (s *regions) locate(ctx context.Context, in *wire.RegionReq) ([]wire.RegionPiece, error) {
	// Under the read lock, as placements are: a delete committed between
	// the check and the look would leave an empty map, which a client
	// reads as zeros without asking any data server.
	if err := s.lifeMu.ReadLock(ctx); err != nil {
		return nil, fmt.Errorf("locate a region of object %d: %w", in.Obj, err)
	}
	defer s.lifeMu.ReadUnlock()
	_, box, err := s.objectRegion(in.Obj, in.Off, in.Size)
	if err != nil {
		return nil, err
	}
	var pieces []overlay.Piece
	var servers []uint32
	s.mu.Lock()
	m, err := s.regionMapLocked(in.Obj)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	m.window(box, func(i int) {
		r := m.recs[i]
		if r.box.Ndim() != box.Ndim() {
			return
		}
		if _, ok := region.Intersect(r.box, box); ok {
			pieces = append(pieces, overlay.Piece{Box: r.box, Seq: r.seq})
			servers = append(servers, r.server)
		}
	})
	s.mu.Unlock()
	frags, _ := overlay.Resolve(box, pieces)
	out := make([]wire.RegionPiece, len(frags))
	for i, f := range frags {
		out[i] = wire.RegionPiece{Off: f.Box.Off, Size: f.Box.Size, Server: servers[f.Piece]}
	}
	slices.SortFunc(out, func(a, b wire.RegionPiece) int { return int(a.Server) - int(b.Server) })
	return out, nil
}
