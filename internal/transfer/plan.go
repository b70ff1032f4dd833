package transfer

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// plan splits the transfer into parts per data server and lays out their
// bytes. Region-partitioned objects consult the metadata server.
func (t *Transfer) plan(ctx context.Context) error {
	o := t.obj
	elem := uint64(o.elem())
	// A run that fails to plan must not keep the parts of the run before:
	// all done, they would pass for this one's, and its wait succeed
	// with nothing sent (TestStartAgainPlanFails).
	t.parts = t.parts[:0]
	// The elements in remote's row-major order: the buffer itself when the
	// local region is contiguous in it.
	t.linear, t.packed = nil, false
	runs := 0
	var first region.Run
	region.Runs(t.shape, t.local, func(r region.Run) bool {
		runs++
		first = r
		return runs < 2
	})
	if runs == 1 {
		t.linear = t.buf[first.Off*elem : (first.Off+first.Len)*elem]
	} else {
		t.linear = make([]byte, t.local.Volume()*elem)
		t.packed = true
		if t.access == Write {
			if err := region.Copy(t.linear, t.local, t.buf, t.shape, t.local, int(elem)); err != nil {
				return err
			}
		}
	}
	var pieces []Piece
	var err error
	switch {
	case t.isLocated:
		pieces = t.located
		t.located, t.isLocated = nil, false
	case o.Meta().Partition == ObjectStatic:
		// One piece, kept off the heap: a start_all of 64k small
		// regions made one allocation per region for it.
		var one [1]Piece
		if one[0], err = o.homePiece(t.remote); err != nil {
			return err
		}
		pieces = one[:]
	default:
		if pieces, err = o.pieces(ctx, t.access, t.remote); err != nil {
			return err
		}
	}
	if t.access == Read && !t.packed {
		covered := uint64(0)
		for _, pc := range pieces {
			covered += pc.Box.Volume()
		}
		if covered < t.remote.Volume() {
			clear(t.linear) // parts never written read as zeros
		}
	}
	t.parts = t.parts[:0]
	if t.parts == nil && len(pieces) == 1 {
		t.parts = t.onePart[:0]
	}
	for _, pc := range pieces {
		p := part{server: pc.Server, slot: pc.Slot, box: pc.Box}
		if pc.Box.Equal(t.remote) {
			p.data, p.direct = t.linear, true
		} else if r, ok := oneRun(t.remote, pc.Box); ok {
			p.data, p.direct = t.linear[r.Off*elem:(r.Off+r.Len)*elem], true
		} else {
			p.data = make([]byte, pc.Box.Volume()*elem)
			if t.access == Write {
				if err := region.Copy(p.data, rel(pc.Box, t.remote), t.linear, region.Shape(t.remote.Size...), rel(pc.Box, t.remote), int(elem)); err != nil {
					return err
				}
			}
		}
		t.parts = append(t.parts, p)
	}
	return nil
}

// rel returns b relative to outer's origin.
func rel(b, outer region.Box) region.Box {
	r := b.Clone()
	for i := range r.Off {
		r.Off[i] -= outer.Off[i]
	}
	return r
}

// oneRun reports whether sub is one contiguous run of outer's row-major
// layout, and which.
func oneRun(outer, sub region.Box) (region.Run, bool) {
	n := 0
	var run region.Run
	region.Runs(region.Shape(outer.Size...), rel(sub, outer), func(r region.Run) bool {
		n++
		run = r
		return n < 2
	})
	return run, n == 1
}

// Piece is the part of a region held by one data server.
type Piece struct {
	Server int // rank
	Slot   int // data slot, held by Server (placement.SlotHost)
	Box    region.Box
}

// slotHost returns the rank of the data server that holds data slot slot.
func (e *Engine) slotHost(slot int) (int, error) {
	ds := e.cl.DataServers()
	if len(ds) == 0 {
		return 0, fmt.Errorf("the cluster has no data server: %w", pdc.ErrUnavailable)
	}
	if slot < 0 {
		return 0, fmt.Errorf("data slot %d: %w", slot, pdc.ErrProtocol)
	}
	return ds[placement.SlotHost(slot, len(ds))], nil
}

// slotPieces gives pieces located by a metadata server (whose Server is
// a data slot) the ranks of the data servers that hold them.
func (e *Engine) slotPieces(ps []wire.RegionPiece) ([]Piece, error) {
	out := make([]Piece, 0, len(ps))
	for _, p := range ps {
		server, err := e.slotHost(int(p.Server))
		if err != nil {
			return nil, err
		}
		out = append(out, Piece{Server: server, Slot: int(p.Server), Box: region.Box{Off: p.Off, Size: p.Size}})
	}
	return out, nil
}

// ReadPieces splits a region of the object among the data servers that
// hold it, asking its metadata server where a region-dynamic or
// region-local object's pieces are.
func (o *Object) ReadPieces(ctx context.Context, box region.Box) ([]Piece, error) {
	return o.pieces(ctx, Read, box)
}

// pieces splits a region of the object among the data servers that hold
// (read) or will hold (write) it, by the object's partition strategy.
func (o *Object) pieces(ctx context.Context, a Access, box region.Box) ([]Piece, error) {
	e := o.e
	ds := e.cl.DataServers()
	if len(ds) == 0 {
		return nil, fmt.Errorf("object %q: the cluster has no data server: %w", o.Meta().Name, pdc.ErrUnavailable)
	}
	sp := o.Meta().Spread
	over := int(sp.Over)
	if over == 0 {
		over = len(ds)
	}
	switch o.Meta().Partition {
	case ObjectStatic:
		p, err := o.homePiece(box)
		if err != nil {
			return nil, err
		}
		return []Piece{p}, nil
	case RegionStatic:
		return staticPieces(box, max(sp.Block, 1), over, ds), nil
	case RegionDynamic, RegionLocal:
		if a == Write {
			req := wire.RegionBatch{Items: []wire.RegionReq{e.assignItem(o, box)}}
			res, err := e.calls().RegionPlace(ctx, o.Meta().Server, &req)
			if err != nil {
				return nil, fmt.Errorf("object %q region %v: place: %w", o.Meta().Name, box, err)
			}
			if len(res.Items) != 1 {
				return nil, fmt.Errorf("object %q: place: %d answers for 1 region: %w", o.Meta().Name, len(res.Items), pdc.ErrProtocol)
			}
			ps, err := e.slotPieces(res.Items[0].Pieces)
			if err != nil {
				return nil, fmt.Errorf("object %q region %v: place: %w", o.Meta().Name, box, err)
			}
			return ps, nil
		}
		res, err := e.calls().RegionQuery(ctx, o.Meta().Server, &wire.RegionReq{Obj: o.Meta().ID, Off: box.Off, Size: box.Size})
		if err != nil {
			return nil, fmt.Errorf("object %q region %v: look up: %w", o.Meta().Name, box, err)
		}
		out, err := e.slotPieces(res.Items)
		if err != nil {
			return nil, fmt.Errorf("object %q region %v: look up: %w", o.Meta().Name, box, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("object %q: unknown partition strategy %d: %w", o.Meta().Name, o.Meta().Partition, pdc.ErrInvalid)
}

// homePiece is box of an object-static object: all on its home slot.
func (o *Object) homePiece(box region.Box) (Piece, error) {
	ds := o.e.cl.DataServers()
	if len(ds) == 0 {
		return Piece{}, fmt.Errorf("object %q: the cluster has no data server: %w", o.Meta().Name, pdc.ErrUnavailable)
	}
	slot := int(o.Meta().Spread.Home)
	return Piece{Server: ds[placement.SlotHost(slot, len(ds))], Slot: slot, Box: box}, nil
}

// staticPieces cuts box into the blocks of rows of the first dim that
// region static places round-robin over the data slots of the cluster
// the object was created in (placement.StaticPieces).
func staticPieces(box region.Box, block uint64, over int, ds []int) []Piece {
	var out []Piece
	placement.StaticPieces(box, block, over, func(slot int, b region.Box) {
		out = append(out, Piece{Server: ds[placement.SlotHost(slot, len(ds))], Slot: slot, Box: b})
	})
	return out
}

// candidates are the data slots a dynamic or local region may go to:
// those of the data servers of this cluster, each its own (slot i is the
// i-th data server's). Ties go to the first, so each client starts the
// list at a different place.
func (e *Engine) candidates(p Partition) []uint64 {
	ds := e.cl.DataServers()
	if p == RegionLocal {
		local := e.localData()
		if len(local) > 0 {
			return []uint64{uint64(slices.Index(ds, local[os.Getpid()%len(local)]))}
		}
		// No data server on this host: the least loaded of all.
	}
	return placement.Candidates(len(ds), os.Getpid())
}

// localData returns the data servers on this client's host.
func (e *Engine) localData() []int {
	host := cluster.HostName()
	var out []int
	for _, r := range e.cl.DataServers() {
		_, h, err := e.cl.Addr(r)
		if err == nil && h == host {
			out = append(out, r)
		}
	}
	return out
}
