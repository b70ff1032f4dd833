package wire

import "google.golang.org/protobuf/encoding/protowire"

// DataItem is one region transfer between a client and a data server.
type DataItem struct {
	Obj   uint64   // 1
	Write bool     // 2
	Off   []uint64 // 3: the region of the object (the file space)
	Size  []uint64 // 4
	// The object as the client knows it: a data server refuses a layout
	// older than one it has seen, so that no client writes with stale dims.
	Dims        []uint64 // 5
	DimsVersion uint64   // 6
	Elem        uint32   // 7: bytes per element
	Storage     uint32   // 8: regionstore.Mode
	// A write whose bytes are in the request's lane (DataStart.Lane), not
	// its payload: their offset there plus one; 0 for the payload.
	Lane uint64 // 9
	// Slot is the data slot the region is in, plus one; 0 names the
	// server's own slot. A server may hold slots of servers of an earlier,
	// larger cluster (placement.SlotHost), each in its own files.
	Slot uint32 // 10
}

func (m *DataItem) Marshal(b []byte) []byte {
	b = putUint(b, 1, m.Obj)
	b = putBool(b, 2, m.Write)
	b = putPackedUints(b, 3, m.Off)
	b = putPackedUints(b, 4, m.Size)
	b = putPackedUints(b, 5, m.Dims)
	b = putUint(b, 6, m.DimsVersion)
	b = putUint(b, 7, uint64(m.Elem))
	b = putUint(b, 8, uint64(m.Storage))
	b = putUint(b, 9, m.Lane)
	return putUint(b, 10, uint64(m.Slot))
}

func (m *DataItem) Unmarshal(b []byte) error {
	return m.unmarshal(b, nil)
}

// unmarshal decodes into m, taking Off, Size and Dims from slab while it
// has room (see DataStart.Unmarshal).
func (m *DataItem) unmarshal(b []byte, slab *uintSlab) error {
	*m = DataItem{}
	f := fields{b: b, msg: "DataItem"}
	for f.next() {
		switch f.num {
		case 1:
			m.Obj = f.uint64()
		case 2:
			m.Write = f.bool()
		case 3:
			m.Off = f.packedUints(slab.take(&f, m.Off))
		case 4:
			m.Size = f.packedUints(slab.take(&f, m.Size))
		case 5:
			m.Dims = f.packedUints(slab.take(&f, m.Dims))
		case 6:
			m.DimsVersion = f.uint64()
		case 7:
			m.Elem = f.uint32()
		case 8:
			m.Storage = f.uint32()
		case 9:
			m.Lane = f.uint64()
		case 10:
			m.Slot = f.uint32()
		}
	}
	return f.err
}

// DataStart registers transfers with a data server. The request's payload
// holds the bytes of the write items, in item order.
type DataStart struct {
	Items []DataItem // 1
	// Wait asks for the answer once every item is done (POSIX
	// consistency), with the read items' bytes in its payload.
	Wait bool // 2
	// Lane names the client's lane (MethodDataLane) that holds the bytes
	// of the items whose Lane is set; 0 for none. The server stores those
	// before it answers, so the client may reuse their space then.
	Lane uint64 // 3
}

func (m *DataStart) Marshal(b []byte) []byte {
	if b == nil {
		// An item of a 1-D region is about 28 bytes, of a 3-D one 44.
		b = make([]byte, 0, 16+len(m.Items)*(20+8*len(firstDims(m.Items))))
	}
	for i := range m.Items {
		b = putMsg(b, 1, &m.Items[i])
	}
	b = putBool(b, 2, m.Wait)
	return putUint(b, 3, m.Lane)
}

func (m *DataStart) Unmarshal(b []byte) error {
	*m = DataStart{}
	f := fields{b: b, msg: "DataStart"}
	n := f.count(1)
	if n > 0 {
		m.Items = make([]DataItem, 0, n)
	}
	// Three small slices per item were most of a data server's
	// allocations for small regions, and their GC most of its cost
	// after the syscalls: the items take them from one slab instead,
	// sized by the first item.
	var slab uintSlab
	for f.next() {
		switch f.num {
		case 1:
			var x DataItem
			raw := f.msgBytes()
			if f.err != nil {
				break
			}
			if err := x.unmarshal(raw, &slab); err != nil {
				f.err = err
				break
			}
			if len(m.Items) == 0 && n > 1 {
				slab.buf = make([]uint64, 0, (n-1)*(len(x.Off)+len(x.Size)+len(x.Dims)))
			}
			m.Items = append(m.Items, x)
		case 2:
			m.Wait = f.bool()
		case 3:
			m.Lane = f.uint64()
		}
	}
	return f.err
}

// DataIDs names registered transfers: DataStart's answer (one id per item)
// and the request of DataWait and DataStatus.
type DataIDs struct {
	IDs []uint64 // 1
	// A DataWait may name a lane (Lane) and, per id, where in it a read's
	// bytes go (LaneOffs: offset plus one; 0 for the answer's payload).
	Lane     uint64   // 2
	LaneOffs []uint64 // 3
}

func (m *DataIDs) Marshal(b []byte) []byte {
	if b == nil {
		b = make([]byte, 0, 8+len(m.IDs)*4)
	}
	b = putPackedUints(b, 1, m.IDs)
	b = putUint(b, 2, m.Lane)
	return putPackedUints(b, 3, m.LaneOffs)
}

// firstDims is the dims of the first item, for sizing.
func firstDims(items []DataItem) []uint64 {
	if len(items) == 0 {
		return nil
	}
	return items[0].Dims
}

func (m *DataIDs) Unmarshal(b []byte) error {
	*m = DataIDs{}
	f := fields{b: b, msg: "DataIDs"}
	for f.next() {
		switch f.num {
		case 1:
			m.IDs = f.packedUints(m.IDs)
		case 2:
			m.Lane = f.uint64()
		case 3:
			m.LaneOffs = f.packedUints(m.LaneOffs)
		}
	}
	return f.err
}

// Transfer states, as pdc_transfer_status_t.
const (
	StateComplete uint32 = 0
	StatePending  uint32 = 1
	StateNotFound uint32 = 2
)

// DataResult is how one transfer ended, or where it stands.
type DataResult struct {
	Code    Code   // 1: the transfer's error, CodeOK if it succeeded
	Message string // 2
	Size    uint64 // 3: bytes of this transfer in the answer's payload
	State   uint32 // 4: DataStatus only
	InLane  bool   // 5: the Size bytes are in the wait's lane, not the payload
}

func (m *DataResult) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Code))
	b = putString(b, 2, m.Message)
	b = putUint(b, 3, m.Size)
	b = putUint(b, 4, uint64(m.State))
	return putBool(b, 5, m.InLane)
}

func (m *DataResult) Unmarshal(b []byte) error {
	*m = DataResult{}
	f := fields{b: b, msg: "DataResult"}
	for f.next() {
		switch f.num {
		case 1:
			m.Code = Code(f.uint32())
		case 2:
			m.Message = f.string()
		case 3:
			m.Size = f.uint64()
		case 4:
			m.State = f.uint32()
		case 5:
			m.InLane = f.bool()
		}
	}
	return f.err
}

// DataResults answers DataWait, DataStatus and a waiting DataStart: one
// result per transfer, and the read transfers' bytes in the payload in
// the same order.
type DataResults struct {
	Items []DataResult // 1
	IDs   []uint64     // 2: a waiting DataStart's ids (for status)
}

func (m *DataResults) Marshal(b []byte) []byte {
	if b == nil {
		b = make([]byte, 0, 16+len(m.Items)*8+len(m.IDs)*4)
	}
	for i := range m.Items {
		b = putMsg(b, 1, &m.Items[i])
	}
	return putPackedUints(b, 2, m.IDs)
}

func (m *DataResults) Unmarshal(b []byte) error {
	*m = DataResults{}
	f := fields{b: b, msg: "DataResults"}
	if n := f.count(1); n > 0 {
		m.Items = make([]DataResult, 0, n)
	}
	for f.next() {
		switch f.num {
		case 1:
			// Decoded in place: a local passed to sub escapes, one
			// allocation per transfer answered.
			m.Items = append(m.Items, DataResult{})
			f.sub(&m.Items[len(m.Items)-1])
		case 2:
			m.IDs = f.packedUints(m.IDs)
		}
	}
	return f.err
}

// RegionReq is a region of an object: for RegionAssign, one about to be
// written; for RegionQuery, one about to be read.
type RegionReq struct {
	Obj  uint64   // 1
	Off  []uint64 // 2
	Size []uint64 // 3
	// RegionAssign: the data slots to choose from (placement.SlotHost);
	// the metadata server picks the one it has given the fewest bytes.
	Candidates []uint64 // 4
	Elem       uint32   // 5: bytes per element
}

func (m *RegionReq) Marshal(b []byte) []byte {
	b = putUint(b, 1, m.Obj)
	b = putPackedUints(b, 2, m.Off)
	b = putPackedUints(b, 3, m.Size)
	b = putPackedUints(b, 4, m.Candidates)
	return putUint(b, 5, uint64(m.Elem))
}

func (m *RegionReq) Unmarshal(b []byte) error {
	*m = RegionReq{}
	f := fields{b: b, msg: "RegionReq"}
	for f.next() {
		switch f.num {
		case 1:
			m.Obj = f.uint64()
		case 2:
			m.Off = f.packedUints(m.Off)
		case 3:
			m.Size = f.packedUints(m.Size)
		case 4:
			m.Candidates = f.packedUints(m.Candidates)
		case 5:
			m.Elem = f.uint32()
		}
	}
	return f.err
}

// RegionBatch is many RegionReqs in one request.
type RegionBatch struct {
	Items []RegionReq // 1
}

func (m *RegionBatch) Marshal(b []byte) []byte {
	for i := range m.Items {
		b = putMsg(b, 1, &m.Items[i])
	}
	return b
}

func (m *RegionBatch) Unmarshal(b []byte) error {
	*m = RegionBatch{}
	f := fields{b: b, msg: "RegionBatch"}
	for f.next() {
		if f.num == 1 {
			var x RegionReq
			f.sub(&x)
			m.Items = append(m.Items, x)
		}
	}
	return f.err
}

// RegionPiece is a region stored in one data slot.
type RegionPiece struct {
	Off  []uint64 // 1
	Size []uint64 // 2
	// Server is the data slot (placement.SlotHost), which is the rank of
	// the data server written to when every server holds data and the
	// cluster has not shrunk since.
	Server uint32 // 3
}

func (m *RegionPiece) Marshal(b []byte) []byte {
	b = putPackedUints(b, 1, m.Off)
	b = putPackedUints(b, 2, m.Size)
	return putUint(b, 3, uint64(m.Server))
}

func (m *RegionPiece) Unmarshal(b []byte) error {
	*m = RegionPiece{}
	f := fields{b: b, msg: "RegionPiece"}
	for f.next() {
		switch f.num {
		case 1:
			m.Off = f.packedUints(m.Off)
		case 2:
			m.Size = f.packedUints(m.Size)
		case 3:
			m.Server = f.uint32()
		}
	}
	return f.err
}

// RegionLocated answers one region of a RegionQueryAll: its pieces, or
// why it could not be located.
type RegionLocated struct {
	Code    Code          // 1
	Message string        // 2
	Pieces  []RegionPiece // 3
}

func (m *RegionLocated) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Code))
	b = putString(b, 2, m.Message)
	for i := range m.Pieces {
		b = putMsg(b, 3, &m.Pieces[i])
	}
	return b
}

func (m *RegionLocated) Unmarshal(b []byte) error {
	*m = RegionLocated{}
	f := fields{b: b, msg: "RegionLocated"}
	for f.next() {
		switch f.num {
		case 1:
			m.Code = Code(f.uint32())
		case 2:
			m.Message = f.string()
		case 3:
			var x RegionPiece
			f.sub(&x)
			m.Pieces = append(m.Pieces, x)
		}
	}
	return f.err
}

// RegionLocatedAll answers RegionQueryAll: one item per region asked, in
// order.
type RegionLocatedAll struct {
	Items []RegionLocated // 1
}

func (m *RegionLocatedAll) Marshal(b []byte) []byte {
	for i := range m.Items {
		b = putMsg(b, 1, &m.Items[i])
	}
	return b
}

func (m *RegionLocatedAll) Unmarshal(b []byte) error {
	*m = RegionLocatedAll{}
	f := fields{b: b, msg: "RegionLocatedAll"}
	for f.next() {
		if f.num == 1 {
			var x RegionLocated
			f.sub(&x)
			m.Items = append(m.Items, x)
		}
	}
	return f.err
}

// RegionPieces answers RegionAssign (one piece per item: where to write
// it) and RegionQuery (the disjoint parts of the read held by data
// servers, newest write first resolved; parts not listed read as zeros).
type RegionPieces struct {
	Items []RegionPiece // 1
}

func (m *RegionPieces) Marshal(b []byte) []byte {
	for i := range m.Items {
		b = putMsg(b, 1, &m.Items[i])
	}
	return b
}

func (m *RegionPieces) Unmarshal(b []byte) error {
	*m = RegionPieces{}
	f := fields{b: b, msg: "RegionPieces"}
	for f.next() {
		if f.num == 1 {
			var x RegionPiece
			f.sub(&x)
			m.Items = append(m.Items, x)
		}
	}
	return f.err
}

// DataLaneReq asks a data server for a lane of Size bytes
// (MethodDataLane).
type DataLaneReq struct {
	Size uint64 // 1
}

func (m *DataLaneReq) Marshal(b []byte) []byte { return putUint(b, 1, m.Size) }

func (m *DataLaneReq) Unmarshal(b []byte) error {
	*m = DataLaneReq{}
	f := fields{b: b, msg: "DataLaneReq"}
	for f.next() {
		if f.num == 1 {
			m.Size = f.uint64()
		}
	}
	return f.err
}

// DataLane answers DataLaneReq: the lane's id, and where to fetch its
// memory file (a Unix socket, which hands it over to whoever shows the
// token, once).
type DataLane struct {
	ID    uint64 // 1
	Path  string // 2
	Token []byte // 3
	Size  uint64 // 4
}

func (m *DataLane) Marshal(b []byte) []byte {
	b = putUint(b, 1, m.ID)
	b = putString(b, 2, m.Path)
	b = putBytes(b, 3, m.Token)
	return putUint(b, 4, m.Size)
}

func (m *DataLane) Unmarshal(b []byte) error {
	*m = DataLane{}
	f := fields{b: b, msg: "DataLane"}
	for f.next() {
		switch f.num {
		case 1:
			m.ID = f.uint64()
		case 2:
			m.Path = f.string()
		case 3:
			m.Token = f.bytes()
		case 4:
			m.Size = f.uint64()
		}
	}
	return f.err
}

// uintSlab hands out capacity-capped pieces of one slice, so that the
// packed fields of many messages share an allocation; a piece never
// grows into the next.
type uintSlab struct {
	buf []uint64
}

// take returns where a packed field of f goes: dst if it has a value
// already (a field repeated), a piece of the slab if it has room for the
// field's values, else nil (packedUints allocates).
func (s *uintSlab) take(f *fields, dst []uint64) []uint64 {
	if s == nil || dst != nil || f.typ != protowire.BytesType {
		return dst
	}
	n := 0 // a varint's last byte is the one under 0x80
	for _, c := range f.raw {
		if c < 0x80 {
			n++
		}
	}
	l := len(s.buf)
	if n == 0 || cap(s.buf)-l < n {
		return dst
	}
	s.buf = s.buf[:l+n]
	return s.buf[l : l : l+n]
}
