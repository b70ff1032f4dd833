package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/pdcgo/pdc"
)

// QueryVersion is the DataQuery version this build speaks. A data server
// refuses a request of a version it does not know.
const QueryVersion = 1

// Predicate node operators (QueryNode.Op). Leaves compare an element with
// the node's value; AND and OR combine the two nodes before them.
const (
	QueryGT  uint32 = 1
	QueryLT  uint32 = 2
	QueryGTE uint32 = 3
	QueryLTE uint32 = 4
	QueryEQ  uint32 = 5
	QueryAND uint32 = 6
	QueryOR  uint32 = 7
)

// What a DataQuery returns (DataQuery.Return).
const (
	QueryCount     uint32 = 0 // the number of hits only
	QuerySelection uint32 = 1 // and the hits' linear indices
	QueryValues    uint32 = 2 // and the hits' values
)

// ParseQueryResult splits a DataQueryResult's payload into the hits'
// linear indices (nil without a selection) and their values (nil
// without values). values aliases p. Errors wrap pdc.ErrProtocol.
func ParseQueryResult(r *DataQueryResult, p []byte) (idx []uint64, values []byte, err error) {
	per := uint64(r.ValueSize)
	if r.Selection {
		per += 8
	} else if r.ValueSize != 0 {
		return nil, nil, fmt.Errorf("query result: values without a selection: %w", pdc.ErrProtocol)
	}
	if per == 0 {
		if len(p) != 0 {
			return nil, nil, fmt.Errorf("query result: %d payload bytes for a count: %w", len(p), pdc.ErrProtocol)
		}
		return nil, nil, nil
	}
	if r.Hits > uint64(len(p)) || r.Hits*per != uint64(len(p)) {
		return nil, nil, fmt.Errorf("query result: %d hits of %d bytes, payload %d bytes: %w", r.Hits, per, len(p), pdc.ErrProtocol)
	}
	idx = make([]uint64, r.Hits)
	for i := range idx {
		idx[i] = binary.LittleEndian.Uint64(p[8*i:])
	}
	if r.ValueSize != 0 {
		values = p[8*r.Hits:]
	}
	return idx, values, nil
}
