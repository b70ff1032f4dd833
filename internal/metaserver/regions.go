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
// which data server holds each written region, in the order written.

func regionPrefix(obj uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'R'}, obj) }

func keyRegion(obj, seq uint64) []byte { return binary.BigEndian.AppendUint64(regionPrefix(obj), seq) }

// keyLoad holds the bytes this metadata server has placed on a data server.
func keyLoad(rank uint32) []byte { return binary.BigEndian.AppendUint32([]byte{'L'}, rank) }

// regionState is the in-memory view of the region map's counters, loaded
// lazily from the store. Guarded by Service.regionMu.
type regionState struct {
	lastSeq map[uint64]uint64 // per object
	loads   map[uint32]uint64 // per data server rank
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

func (s *Service) loadLocked(rank uint32) (uint64, error) {
	if v, ok := s.regions.loads[rank]; ok {
		return v, nil
	}
	v, ok, err := s.st.get(keyLoad(rank))
	if err != nil {
		return 0, err
	}
	var n uint64
	if ok && len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	s.regions.loads[rank] = n
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
	_, box, err := s.objectRegion(in.Obj, in.Off, in.Size)
	if err != nil {
		return nil, err
	}
	var pieces []regionstore.Piece
	var servers []uint32
	err = s.scan(regionPrefix(in.Obj), func(k, v []byte) error {
		var p wire.RegionPiece
		if err := p.Unmarshal(v); err != nil {
			return fmt.Errorf("object %d: stored region: %w", in.Obj, err)
		}
		pb := region.Box{Off: p.Off, Size: p.Size}
		if _, ok := region.Intersect(pb, box); ok {
			pieces = append(pieces, regionstore.Piece{Box: pb, Seq: binary.BigEndian.Uint64(k[len(k)-8:])})
			servers = append(servers, p.Server)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	frags, _ := regionstore.Resolve(box, pieces)
	out := wire.RegionPieces{Items: make([]wire.RegionPiece, len(frags))}
	for i, f := range frags {
		out.Items[i] = wire.RegionPiece{Off: f.Box.Off, Size: f.Box.Size, Server: servers[f.Piece]}
	}
	slices.SortFunc(out.Items, func(a, b wire.RegionPiece) int { return int(a.Server) - int(b.Server) })
	return rpc.Respond(&out), nil
}
