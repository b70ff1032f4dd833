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

// QueryNode is one node of a predicate in postfix order.
type QueryNode struct {
	Op    uint32 // 1: QueryGT..QueryOR
	Value []byte // 2: leaves: the value, little-endian, in the element type
}

func (m *QueryNode) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Op))
	return putBytes(b, 2, m.Value)
}

func (m *QueryNode) Unmarshal(b []byte) error {
	*m = QueryNode{}
	f := fields{b: b, msg: "QueryNode"}
	for f.next() {
		switch f.num {
		case 1:
			m.Op = f.uint32()
		case 2:
			m.Value = f.bytes()
		}
	}
	return f.err
}

// QueryBox is a region of an object.
type QueryBox struct {
	Off  []uint64 // 1
	Size []uint64 // 2
}

func (m *QueryBox) Marshal(b []byte) []byte {
	b = putPackedUints(b, 1, m.Off)
	return putPackedUints(b, 2, m.Size)
}

func (m *QueryBox) Unmarshal(b []byte) error {
	*m = QueryBox{}
	f := fields{b: b, msg: "QueryBox"}
	for f.next() {
		switch f.num {
		case 1:
			m.Off = f.packedUints(m.Off)
		case 2:
			m.Size = f.packedUints(m.Size)
		}
	}
	return f.err
}

// DataQuery asks a data server which elements of the parts of an object
// it holds satisfy a predicate (MethodDataQuery). The answer is a
// DataQueryResult; with QuerySelection its payload holds each hit's
// linear index in the object (8 bytes little-endian), and with
// QueryValues then each hit's value (Elem bytes), in the same order.
type DataQuery struct {
	Version uint32 // 1: QueryVersion
	Obj     uint64 // 2
	// The object as the client knows it, as DataItem carries it.
	Dims        []uint64    // 3
	DimsVersion uint64      // 4
	Type        uint32      // 5: region.Type of the elements
	Storage     uint32      // 6: regionstore.Mode
	Nodes       []QueryNode // 7: the predicate, postfix
	// Boxes are the parts of the object this server holds that the query
	// covers (the client splits as for a read).
	Boxes []QueryBox // 8
	// Within, when set, restricts the query to a region of the object.
	Within *QueryBox // 9
	Return uint32    // 10: QueryCount, QuerySelection or QueryValues
	// Slot is the data slot the boxes are in, plus one, as in DataItem.
	Slot uint32 // 11
}

func (m *DataQuery) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Version))
	b = putUint(b, 2, m.Obj)
	b = putPackedUints(b, 3, m.Dims)
	b = putUint(b, 4, m.DimsVersion)
	b = putUint(b, 5, uint64(m.Type))
	b = putUint(b, 6, uint64(m.Storage))
	for i := range m.Nodes {
		b = putMsg(b, 7, &m.Nodes[i])
	}
	for i := range m.Boxes {
		b = putMsg(b, 8, &m.Boxes[i])
	}
	if m.Within != nil {
		b = putMsg(b, 9, m.Within)
	}
	b = putUint(b, 10, uint64(m.Return))
	return putUint(b, 11, uint64(m.Slot))
}

func (m *DataQuery) Unmarshal(b []byte) error {
	*m = DataQuery{}
	f := fields{b: b, msg: "DataQuery"}
	for f.next() {
		switch f.num {
		case 1:
			m.Version = f.uint32()
		case 2:
			m.Obj = f.uint64()
		case 3:
			m.Dims = f.packedUints(m.Dims)
		case 4:
			m.DimsVersion = f.uint64()
		case 5:
			m.Type = f.uint32()
		case 6:
			m.Storage = f.uint32()
		case 7:
			var x QueryNode
			f.sub(&x)
			m.Nodes = append(m.Nodes, x)
		case 8:
			var x QueryBox
			f.sub(&x)
			m.Boxes = append(m.Boxes, x)
		case 9:
			var x QueryBox
			f.sub(&x)
			m.Within = &x
		case 10:
			m.Return = f.uint32()
		case 11:
			m.Slot = f.uint32()
		}
	}
	return f.err
}

// DataQueryResult answers a DataQuery.
type DataQueryResult struct {
	Hits      uint64 // 1: elements that satisfy the predicate
	Selection bool   // 2: the payload starts with the hits' linear indices
	ValueSize uint32 // 3: bytes per value after the indices; 0 for none
}

func (m *DataQueryResult) Marshal(b []byte) []byte {
	b = putUint(b, 1, m.Hits)
	b = putBool(b, 2, m.Selection)
	return putUint(b, 3, uint64(m.ValueSize))
}

func (m *DataQueryResult) Unmarshal(b []byte) error {
	*m = DataQueryResult{}
	f := fields{b: b, msg: "DataQueryResult"}
	for f.next() {
		switch f.num {
		case 1:
			m.Hits = f.uint64()
		case 2:
			m.Selection = f.bool()
		case 3:
			m.ValueSize = f.uint32()
		}
	}
	return f.err
}

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
