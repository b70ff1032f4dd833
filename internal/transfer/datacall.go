package transfer

import (
	"context"
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// dataPending is a data call sent whose answer is still to be received.
type dataPending struct {
	e       *Engine
	server  int
	results bool
	items   []*part
	p       *rpc.Pending
	lane    *laneUse // where the reads with a lane offset go
}

// dataSendOn sends a data call on conn, a connection to server: its
// answer, received by recv (which must be called once), is, when results
// is set, a DataResults with one result per item and the bytes of the
// reads that succeeded in its payload, in order; items holds each item's
// part for a read, nil for a write. Without results the answer is
// DataIDs.
func (e *Engine) dataSendOn(ctx context.Context, conn *rpc.Conn, server int, m wire.Method, req wire.Message, payload [][]byte, results bool, items []*part, use *laneUse) (*dataPending, error) {
	// The reads' bytes go straight into their places when all of them
	// came; otherwise they come in one buffer and are copied apart. Not
	// when some reads go through the lane: a server that no longer has
	// it answers those in the payload, and with one of the others failed
	// the sizes could add up all the same, which would scatter bytes into
	// the wrong buffers before the results are read.
	var into [][]byte
	if results && use == nil {
		for _, p := range items {
			if p != nil {
				into = append(into, p.data)
			}
		}
	}
	p, err := conn.Send(ctx, m, req.Marshal(nil), payload, into)
	if err != nil {
		return nil, err
	}
	return &dataPending{e: e, server: server, results: results, items: items, p: p, lane: use}, nil
}

func (d *dataPending) recv(ctx context.Context) (wire.DataResults, wire.DataIDs, error) {
	var res wire.DataResults
	var ids wire.DataIDs
	rep, err := d.p.Wait(ctx)
	defer func() { d.lane.settled(err) }()
	if err != nil {
		return res, ids, err
	}
	if !d.results {
		return res, ids, ids.Unmarshal(rep.Header)
	}
	if err := res.Unmarshal(rep.Header); err != nil {
		return res, ids, err
	}
	if len(res.Items) != len(d.items) {
		return res, ids, fmt.Errorf("%s answered %d results for %d transfers: %w", d.e.cl.Label(d.server), len(res.Items), len(d.items), pdc.ErrProtocol)
	}
	pos := uint64(0)
	for i, r := range res.Items {
		if r.InLane {
			// The bytes are in the lane, where this wait said.
			p := d.items[i]
			if p == nil || !d.lane.has(i) {
				return res, ids, fmt.Errorf("%s put a transfer's bytes in the lane where this wait asked for none: %w", d.e.cl.Label(d.server), pdc.ErrProtocol)
			}
			if uint64(len(p.data)) != r.Size {
				return res, ids, fmt.Errorf("%s put %d bytes of a %d-byte read in the lane: %w", d.e.cl.Label(d.server), r.Size, len(p.data), pdc.ErrProtocol)
			}
			off := int(d.lane.offs[i] - 1)
			copy(p.data, d.lane.l.mem[off:off+len(p.data)])
			d.e.lanes.read.Add(int64(len(p.data)))
			continue
		}
		if r.Size == 0 {
			continue
		}
		p := d.items[i]
		if p == nil || uint64(len(p.data)) != r.Size || !rep.Scattered && pos+r.Size > uint64(len(rep.Payload)) {
			return res, ids, fmt.Errorf("%s: the answer's payload does not match its results: %w", d.e.cl.Label(d.server), pdc.ErrProtocol)
		}
		if !rep.Scattered {
			copy(p.data, rep.Payload[pos:pos+r.Size])
		}
		pos += r.Size
	}
	return res, ids, nil
}
