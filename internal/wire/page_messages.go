// Paged listing and deleting of containers (docs/design/0017). Field
// numbers are the protocol: never renumber or reuse them.

package wire

// PageVersion is the version of ObjPageReq, ObjPage, ContPageReq,
// ContPage, ObjPurge and ObjIDs this build speaks. A server refuses a
// request of another version with pdc.ErrVersion.
const PageVersion = 1

// ObjPageReq asks one metadata server for a page of a container's members
// that it holds (MethodObjPage), in increasing object id order.
type ObjPageReq struct {
	Version uint32 // 1: PageVersion
	ContID  uint64 // 2
	// After resumes the listing past this object id; 0 starts it.
	After uint64 // 3
	// Limit bounds the items of the page; 0 or more than the server's
	// bound takes the server's. A server also ends a page when its
	// answer reaches its byte budget.
	Limit uint32 // 4
	// IDsOnly asks for IDs and Added instead of the records.
	IDsOnly bool // 5
	// Count asks for the number of members only (N): Limit then bounds
	// the members counted.
	Count bool // 6
}

func (m *ObjPageReq) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Version))
	b = putUint(b, 2, m.ContID)
	b = putUint(b, 3, m.After)
	b = putUint(b, 4, uint64(m.Limit))
	b = putBool(b, 5, m.IDsOnly)
	return putBool(b, 6, m.Count)
}

func (m *ObjPageReq) Unmarshal(b []byte) error {
	*m = ObjPageReq{}
	f := fields{b: b, msg: "ObjPageReq"}
	for f.next() {
		switch f.num {
		case 1:
			m.Version = f.uint32()
		case 2:
			m.ContID = f.uint64()
		case 3:
			m.After = f.uint64()
		case 4:
			m.Limit = f.uint32()
		case 5:
			m.IDsOnly = f.bool()
		case 6:
			m.Count = f.bool()
		}
	}
	return f.err
}

// ObjPage answers ObjPageReq.
type ObjPage struct {
	Version uint32       // 1: PageVersion
	Items   []ObjectMeta // 2: the members' records, in id order
	IDs     []uint64     // 3: IDsOnly: the members' ids, ascending
	// Added (IDsOnly) lists those of IDs whose home is another container
	// (they were added to this one by reference), ascending.
	Added []uint64 // 4
	N     uint64   // 5: Count: the members counted
	// Next is After for the next page; 0 when this page is the last.
	Next uint64 // 6
}

func (m *ObjPage) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Version))
	for i := range m.Items {
		b = putMsg(b, 2, &m.Items[i])
	}
	b = putPackedUints(b, 3, m.IDs)
	b = putPackedUints(b, 4, m.Added)
	b = putUint(b, 5, m.N)
	return putUint(b, 6, m.Next)
}

func (m *ObjPage) Unmarshal(b []byte) error {
	*m = ObjPage{}
	f := fields{b: b, msg: "ObjPage"}
	if n := f.count(2); n > 0 {
		m.Items = make([]ObjectMeta, 0, n)
	}
	for f.next() {
		switch f.num {
		case 1:
			m.Version = f.uint32()
		case 2:
			m.Items = append(m.Items, ObjectMeta{})
			f.sub(&m.Items[len(m.Items)-1])
		case 3:
			m.IDs = f.packedUints(m.IDs)
		case 4:
			m.Added = f.packedUints(m.Added)
		case 5:
			m.N = f.uint64()
		case 6:
			m.Next = f.uint64()
		}
	}
	return f.err
}

// ContPageReq asks one metadata server for a page of the containers it
// holds (MethodContPage), in name order.
type ContPageReq struct {
	Version uint32 // 1: PageVersion
	// After resumes the listing past this name; "" starts it.
	After string // 2
	// Limit bounds the items of the page, as ObjPageReq's.
	Limit uint32 // 3
}

func (m *ContPageReq) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Version))
	b = putString(b, 2, m.After)
	return putUint(b, 3, uint64(m.Limit))
}

func (m *ContPageReq) Unmarshal(b []byte) error {
	*m = ContPageReq{}
	f := fields{b: b, msg: "ContPageReq"}
	for f.next() {
		switch f.num {
		case 1:
			m.Version = f.uint32()
		case 2:
			m.After = f.string()
		case 3:
			m.Limit = f.uint32()
		}
	}
	return f.err
}

// ContPage answers ContPageReq.
type ContPage struct {
	Version uint32          // 1: PageVersion
	Items   []ContainerMeta // 2: in name order
	// Next is After for the next page; "" when this page is the last
	// (no container has an empty name).
	Next string // 3
}

func (m *ContPage) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Version))
	for i := range m.Items {
		b = putMsg(b, 2, &m.Items[i])
	}
	return putString(b, 3, m.Next)
}

func (m *ContPage) Unmarshal(b []byte) error {
	*m = ContPage{}
	f := fields{b: b, msg: "ContPage"}
	for f.next() {
		switch f.num {
		case 1:
			m.Version = f.uint32()
		case 2:
			var x ContainerMeta
			f.sub(&x)
			m.Items = append(m.Items, x)
		case 3:
			m.Next = f.string()
		}
	}
	return f.err
}

// ObjPurge deletes members of a container being deleted that one metadata
// server holds (MethodObjPurge). Each object of IDs whose home is the
// container goes, with its tags, index entries and region maps, in one
// commit: the client deleted its data before. Each that was added to the
// container only loses that membership. Ids that are not members (any
// more) are skipped, so a purge may be sent again. The answer is a Count
// of the objects deleted.
type ObjPurge struct {
	Version uint32   // 1: PageVersion
	ContID  uint64   // 2
	IDs     []uint64 // 3: ascending
	// Force purges open objects too (transient containers at pdc down).
	Force bool // 4
}

func (m *ObjPurge) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Version))
	b = putUint(b, 2, m.ContID)
	b = putPackedUints(b, 3, m.IDs)
	return putBool(b, 4, m.Force)
}

func (m *ObjPurge) Unmarshal(b []byte) error {
	*m = ObjPurge{}
	f := fields{b: b, msg: "ObjPurge"}
	for f.next() {
		switch f.num {
		case 1:
			m.Version = f.uint32()
		case 2:
			m.ContID = f.uint64()
		case 3:
			m.IDs = f.packedUints(m.IDs)
		case 4:
			m.Force = f.bool()
		}
	}
	return f.err
}

// ObjIDs names objects: the request of MethodDataDeleteObjs.
type ObjIDs struct {
	Version uint32   // 1: PageVersion
	IDs     []uint64 // 2
}

func (m *ObjIDs) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Version))
	return putPackedUints(b, 2, m.IDs)
}

func (m *ObjIDs) Unmarshal(b []byte) error {
	*m = ObjIDs{}
	f := fields{b: b, msg: "ObjIDs"}
	for f.next() {
		switch f.num {
		case 1:
			m.Version = f.uint32()
		case 2:
			m.IDs = f.packedUints(m.IDs)
		}
	}
	return f.err
}
