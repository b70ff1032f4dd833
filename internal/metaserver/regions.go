package metaserver

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/regionstore"
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

// regionState is the in-memory view of the region map, loaded lazily from
// the store. Guarded by Service.regionMu.
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
func (s *Service) regionMapLocked(obj uint64) (*regionMap, error) {
	if m := s.regions.maps[obj]; m != nil {
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
	if s.regions.maps == nil {
		s.regions.maps = map[uint64]*regionMap{}
	}
	s.regions.maps[obj] = m
	return m, nil
}

func (s *Service) lastSeqLocked(obj uint64) (uint64, error) {
	if seq, ok := s.regions.lastSeq[obj]; ok {
		return seq, nil
	}
	p := regionPrefix(obj)
	it, err := s.st.db.NewIter(nil)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var seq uint64
	if it.SeekLT(prefixEnd(p)) && len(it.Key()) == len(p)+8 && string(it.Key()[:len(p)]) == string(p) {
		seq = binary.BigEndian.Uint64(it.Key()[len(p):])
	}
	s.regions.lastSeq[obj] = seq
	return seq, nil
}

func (s *Service) loadLocked(slot uint32) (uint64, error) {
	if v, ok := s.regions.loads[slot]; ok {
		return v, nil
	}
	v, ok, err := s.st.get(keyLoad(slot))
	if err != nil {
		return 0, err
	}
	var n uint64
	if ok && len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	s.regions.loads[slot] = n
	return n, nil
}

// objectBox loads an object and checks that a region lies inside it.
func (s *Service) objectRegion(obj uint64, off, size []uint64) (*wire.ObjectMeta, region.Box, error) {
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

// regionAssign places each region on the candidate data server that holds
// the fewest bytes placed by this metadata server, and records it.
func (s *Service) regionAssign(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var in wire.RegionBatch
	if err := decode(req, &in); err != nil {
		return nil, err
	}
	if len(in.Items) > MaxBatch {
		return nil, fmt.Errorf("%d regions in one request, at most %d: %w", len(in.Items), MaxBatch, pdc.ErrTooLarge)
	}
	// Checked under the read lock so that a delete cannot slip between
	// the check and the commit.
	s.updateMu.RLock()
	defer s.updateMu.RUnlock()
	out := wire.RegionPieces{Items: make([]wire.RegionPiece, len(in.Items))}
	boxes := make([]region.Box, len(in.Items))
	seen := map[uint64]bool{}
	for i, it := range in.Items {
		if len(it.Candidates) == 0 {
			return nil, fmt.Errorf("region %d of %d: no data server to choose from: %w", i+1, len(in.Items), pdc.ErrInvalid)
		}
		if !seen[it.Obj] {
			if _, _, err := s.objectRegion(it.Obj, it.Off, it.Size); err != nil {
				return nil, fmt.Errorf("region %d of %d: %w", i+1, len(in.Items), err)
			}
			seen[it.Obj] = true
		}
		boxes[i] = region.Box{Off: it.Off, Size: it.Size}
		if err := boxes[i].Check(); err != nil {
			return nil, fmt.Errorf("region %d of %d (object %d): %w", i+1, len(in.Items), it.Obj, err)
		}
	}
	s.regionMu.Lock()
	defer s.regionMu.Unlock()
	b := s.st.db.NewBatch()
	defer b.Close()
	loads := map[uint32]uint64{}
	seqs := map[uint64]uint64{}
	type added struct {
		obj uint64
		rec regionRec
	}
	var adds []added
	shadowed := map[uint64]map[uint64]bool{} // per object, seqs a newer record covers
	for i, it := range in.Items {
		best, bestLoad := uint32(0), uint64(0)
		for j, c := range it.Candidates {
			r := uint32(c)
			l, ok := loads[r]
			if !ok {
				var err error
				if l, err = s.loadLocked(r); err != nil {
					return nil, err
				}
			}
			if j == 0 || l < bestLoad {
				best, bestLoad = r, l
			}
		}
		loads[best] = bestLoad + boxes[i].Volume()*uint64(max(it.Elem, 1))
		seq, ok := seqs[it.Obj]
		if !ok {
			var err error
			if seq, err = s.lastSeqLocked(it.Obj); err != nil {
				return nil, err
			}
		}
		seq++
		seqs[it.Obj] = seq
		p := wire.RegionPiece{Off: it.Off, Size: it.Size, Server: best}
		out.Items[i] = p
		_ = b.Set(keyRegion(it.Obj, seq), p.Marshal(nil), nil)
		// Records the new one covers whole can never be read again: drop
		// them, so that rewriting the same regions does not grow the map.
		m, err := s.regionMapLocked(it.Obj)
		if err != nil {
			return nil, err
		}
		m.window(boxes[i], func(j int) {
			if r := m.recs[j]; r.box.Ndim() == boxes[i].Ndim() && boxes[i].Contains(r.box) {
				if shadowed[it.Obj] == nil {
					shadowed[it.Obj] = map[uint64]bool{}
				}
				if !shadowed[it.Obj][r.seq] {
					shadowed[it.Obj][r.seq] = true
					_ = b.Delete(keyRegion(it.Obj, r.seq), nil)
				}
			}
		})
		adds = append(adds, added{it.Obj, regionRec{box: boxes[i].Clone(), seq: seq, server: best}})
	}
	for r, l := range loads {
		_ = b.Set(keyLoad(r), binary.BigEndian.AppendUint64(nil, l), nil)
	}
	if err := s.st.commit(b); err != nil {
		return nil, fmt.Errorf("record %d regions: %w", len(in.Items), err)
	}
	for r, l := range loads {
		s.regions.loads[r] = l
	}
	for o, seq := range seqs {
		s.regions.lastSeq[o] = seq
	}
	for o, gone := range shadowed {
		m := s.regions.maps[o]
		m.recs = slices.DeleteFunc(m.recs, func(r regionRec) bool { return gone[r.seq] })
	}
	for _, a := range adds {
		m := s.regions.maps[a.obj]
		m.insert(a.rec)
	}
	return rpc.Respond(&out), nil
}

// regionQuery answers which data servers hold the parts of a region: the
// newest write of every element, as disjoint pieces; parts never written
// are left out (they read as zeros).
func (s *Service) regionQuery(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var in wire.RegionReq
	if err := decode(req, &in); err != nil {
		return nil, err
	}
	out, err := s.locate(&in)
	if err != nil {
		return nil, err
	}
	return rpc.Respond(&wire.RegionPieces{Items: out}), nil
}

// regionQueryAll is regionQuery for many regions in one request; each
// region is answered alone, with its own error.
func (s *Service) regionQueryAll(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var in wire.RegionBatch
	if err := decode(req, &in); err != nil {
		return nil, err
	}
	if len(in.Items) > MaxBatch {
		return nil, fmt.Errorf("%d regions in one request, at most %d: %w", len(in.Items), MaxBatch, pdc.ErrTooLarge)
	}
	out := wire.RegionLocatedAll{Items: make([]wire.RegionLocated, len(in.Items))}
	for i := range in.Items {
		pieces, err := s.locate(&in.Items[i])
		if err != nil {
			out.Items[i] = wire.RegionLocated{Code: wire.CodeOf(err), Message: err.Error()}
			continue
		}
		out.Items[i].Pieces = pieces
	}
	return rpc.Respond(&out), nil
}

// locate returns the disjoint parts of a region that data servers hold,
// each with its server, the newest write winning where writes overlap.
func (s *Service) locate(in *wire.RegionReq) ([]wire.RegionPiece, error) {
	_, box, err := s.objectRegion(in.Obj, in.Off, in.Size)
	if err != nil {
		return nil, err
	}
	var pieces []regionstore.Piece
	var servers []uint32
	s.regionMu.Lock()
	m, err := s.regionMapLocked(in.Obj)
	if err != nil {
		s.regionMu.Unlock()
		return nil, err
	}
	m.window(box, func(i int) {
		r := m.recs[i]
		if r.box.Ndim() != box.Ndim() {
			return
		}
		if _, ok := region.Intersect(r.box, box); ok {
			pieces = append(pieces, regionstore.Piece{Box: r.box, Seq: r.seq})
			servers = append(servers, r.server)
		}
	})
	s.regionMu.Unlock()
	frags, _ := regionstore.Resolve(box, pieces)
	out := make([]wire.RegionPiece, len(frags))
	for i, f := range frags {
		out[i] = wire.RegionPiece{Off: f.Box.Off, Size: f.Box.Size, Server: servers[f.Piece]}
	}
	slices.SortFunc(out, func(a, b wire.RegionPiece) int { return int(a.Server) - int(b.Server) })
	return out, nil
}
