// Metadata messages. Field numbers are the protocol: never renumber or reuse them.

package wire

import "google.golang.org/protobuf/encoding/protowire"

var _ = protowire.VarintType

// ObjectProps: Properties of an object, fixed at create but for Dims.
type ObjectProps struct {
	Dims        []uint64 // 1: one per dimension; the first may be PDC_SIZE_UNLIMITED
	Type        int32    // 2: region.Type
	Partition   uint32   // 3: PDC region partition strategy
	Consistency uint32   // 4
	AppName     string   // 5
	TimeStep    uint32   // 6
	UserID      uint32   // 7
	DataLoc     string   // 8
	Tags        string   // 9: free-form tags string (PDCprop_set_obj_tags)
	// Where the data lives, fixed when the object is created so that
	// set_dims never moves it.
	Storage uint32 // 10: regionstore.Mode (0: the default, by offset)
	Home    uint32 // 11: object static: index of its data server
	Block   uint64 // 12: region static: rows of the first dim per block
	Spread  uint32 // 13: data servers the object was spread over at create
}

func (m *ObjectProps) Marshal(b []byte) []byte {
	b = putPackedUints(b, 1, m.Dims)
	b = putInt(b, 2, int64(m.Type))
	b = putUint(b, 3, uint64(m.Partition))
	b = putUint(b, 4, uint64(m.Consistency))
	b = putString(b, 5, m.AppName)
	b = putUint(b, 6, uint64(m.TimeStep))
	b = putUint(b, 7, uint64(m.UserID))
	b = putString(b, 8, m.DataLoc)
	b = putString(b, 9, m.Tags)
	b = putUint(b, 10, uint64(m.Storage))
	b = putUint(b, 11, uint64(m.Home))
	b = putUint(b, 12, m.Block)
	b = putUint(b, 13, uint64(m.Spread))
	return b
}

func (m *ObjectProps) Unmarshal(b []byte) error {
	*m = ObjectProps{}
	f := fields{b: b, msg: "ObjectProps"}
	for f.next() {
		switch f.num {
		case 1:
			m.Dims = f.packedUints(m.Dims)
		case 2:
			m.Type = f.int32()
		case 3:
			m.Partition = f.uint32()
		case 4:
			m.Consistency = f.uint32()
		case 5:
			m.AppName = f.string()
		case 6:
			m.TimeStep = f.uint32()
		case 7:
			m.UserID = f.uint32()
		case 8:
			m.DataLoc = f.string()
		case 9:
			m.Tags = f.string()
		case 10:
			m.Storage = f.uint32()
		case 11:
			m.Home = f.uint32()
		case 12:
			m.Block = f.uint64()
		case 13:
			m.Spread = f.uint32()
		}
	}
	return f.err
}

// ObjectMeta: An object's metadata record.
type ObjectMeta struct {
	ID          uint64      // 1
	Name        string      // 2
	ContID      uint64      // 3
	Props       ObjectProps // 4
	CreatedUnix int64       // 5: nanoseconds
	DimsVersion uint64      // 6: bumped by every set_dims
}

func (m *ObjectMeta) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.ID))
	b = putString(b, 2, m.Name)
	b = putUint(b, 3, uint64(m.ContID))
	b = putMsg(b, 4, &m.Props)
	b = putInt(b, 5, m.CreatedUnix)
	b = putUint(b, 6, uint64(m.DimsVersion))
	return b
}

func (m *ObjectMeta) Unmarshal(b []byte) error {
	*m = ObjectMeta{}
	f := fields{b: b, msg: "ObjectMeta"}
	for f.next() {
		switch f.num {
		case 1:
			m.ID = f.uint64()
		case 2:
			m.Name = f.string()
		case 3:
			m.ContID = f.uint64()
		case 4:
			f.sub(&m.Props)
		case 5:
			m.CreatedUnix = f.int64()
		case 6:
			m.DimsVersion = f.uint64()
		}
	}
	return f.err
}

// ContainerMeta: A container's metadata record.
type ContainerMeta struct {
	ID          uint64 // 1
	Name        string // 2
	Lifetime    uint32 // 3: 0 persistent, 1 transient
	CreatedUnix int64  // 4
	// Deleting marks a container whose delete began (MethodContDeleting)
	// and has not finished: it cannot be opened, only deleted again.
	Deleting bool // 5
}

func (m *ContainerMeta) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.ID))
	b = putString(b, 2, m.Name)
	b = putUint(b, 3, uint64(m.Lifetime))
	b = putInt(b, 4, m.CreatedUnix)
	b = putBool(b, 5, m.Deleting)
	return b
}

func (m *ContainerMeta) Unmarshal(b []byte) error {
	*m = ContainerMeta{}
	f := fields{b: b, msg: "ContainerMeta"}
	for f.next() {
		switch f.num {
		case 1:
			m.ID = f.uint64()
		case 2:
			m.Name = f.string()
		case 3:
			m.Lifetime = f.uint32()
		case 4:
			m.CreatedUnix = f.int64()
		case 5:
			m.Deleting = f.bool()
		}
	}
	return f.err
}

// ContCreate: Create a container, or return the existing one of that name.
type ContCreate struct {
	Name     string // 1
	Lifetime uint32 // 2
}

func (m *ContCreate) Marshal(b []byte) []byte {
	b = putString(b, 1, m.Name)
	b = putUint(b, 2, uint64(m.Lifetime))
	return b
}

func (m *ContCreate) Unmarshal(b []byte) error {
	*m = ContCreate{}
	f := fields{b: b, msg: "ContCreate"}
	for f.next() {
		switch f.num {
		case 1:
			m.Name = f.string()
		case 2:
			m.Lifetime = f.uint32()
		}
	}
	return f.err
}

// ContReply: A container, and whether this call created it.
type ContReply struct {
	Meta    ContainerMeta // 1
	Created bool          // 2
}

func (m *ContReply) Marshal(b []byte) []byte {
	b = putMsg(b, 1, &m.Meta)
	b = putBool(b, 2, m.Created)
	return b
}

func (m *ContReply) Unmarshal(b []byte) error {
	*m = ContReply{}
	f := fields{b: b, msg: "ContReply"}
	for f.next() {
		switch f.num {
		case 1:
			f.sub(&m.Meta)
		case 2:
			m.Created = f.bool()
		}
	}
	return f.err
}

// ContKey: Names a container by name or, if ID is set, by id.
type ContKey struct {
	Name string // 1
	ID   uint64 // 2
}

func (m *ContKey) Marshal(b []byte) []byte {
	b = putString(b, 1, m.Name)
	b = putUint(b, 2, uint64(m.ID))
	return b
}

func (m *ContKey) Unmarshal(b []byte) error {
	*m = ContKey{}
	f := fields{b: b, msg: "ContKey"}
	for f.next() {
		switch f.num {
		case 1:
			m.Name = f.string()
		case 2:
			m.ID = f.uint64()
		}
	}
	return f.err
}

// ContList: Containers held by one server.
type ContList struct {
	Items []ContainerMeta // 1
}

func (m *ContList) Marshal(b []byte) []byte {
	for i := range m.Items {
		b = putMsg(b, 1, &m.Items[i])
	}
	return b
}

func (m *ContList) Unmarshal(b []byte) error {
	*m = ContList{}
	f := fields{b: b, msg: "ContList"}
	for f.next() {
		switch f.num {
		case 1:
			var x ContainerMeta
			f.sub(&x)
			m.Items = append(m.Items, x)
		}
	}
	return f.err
}

// ObjCreate: Create one object.
type ObjCreate struct {
	ContID uint64      // 1
	Name   string      // 2
	Props  ObjectProps // 3
}

func (m *ObjCreate) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.ContID))
	b = putString(b, 2, m.Name)
	b = putMsg(b, 3, &m.Props)
	return b
}

func (m *ObjCreate) Unmarshal(b []byte) error {
	*m = ObjCreate{}
	f := fields{b: b, msg: "ObjCreate"}
	for f.next() {
		switch f.num {
		case 1:
			m.ContID = f.uint64()
		case 2:
			m.Name = f.string()
		case 3:
			f.sub(&m.Props)
		}
	}
	return f.err
}

// ObjKey: Names an object: by ID if set, else by name and time step, and by user id and app name when Exact.
type ObjKey struct {
	ID       uint64 // 1
	Name     string // 2
	TimeStep uint32 // 3
	UserID   uint32 // 4
	AppName  string // 5
	Exact    bool   // 6
	Peek     bool   // 7: read the metadata without opening the object
}

func (m *ObjKey) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.ID))
	b = putString(b, 2, m.Name)
	b = putUint(b, 3, uint64(m.TimeStep))
	b = putUint(b, 4, uint64(m.UserID))
	b = putString(b, 5, m.AppName)
	b = putBool(b, 6, m.Exact)
	b = putBool(b, 7, m.Peek)
	return b
}

func (m *ObjKey) Unmarshal(b []byte) error {
	*m = ObjKey{}
	f := fields{b: b, msg: "ObjKey"}
	for f.next() {
		switch f.num {
		case 1:
			m.ID = f.uint64()
		case 2:
			m.Name = f.string()
		case 3:
			m.TimeStep = f.uint32()
		case 4:
			m.UserID = f.uint32()
		case 5:
			m.AppName = f.string()
		case 6:
			m.Exact = f.bool()
		case 7:
			m.Peek = f.bool()
		}
	}
	return f.err
}

// ObjBatch: Many creates or many opens in one request (one kind per request).
type ObjBatch struct {
	Creates []ObjCreate // 1
	Opens   []ObjKey    // 2
}

func (m *ObjBatch) Marshal(b []byte) []byte {
	for i := range m.Creates {
		b = putMsg(b, 1, &m.Creates[i])
	}
	for i := range m.Opens {
		b = putMsg(b, 2, &m.Opens[i])
	}
	return b
}

func (m *ObjBatch) Unmarshal(b []byte) error {
	*m = ObjBatch{}
	f := fields{b: b, msg: "ObjBatch"}
	for f.next() {
		switch f.num {
		case 1:
			var x ObjCreate
			f.sub(&x)
			m.Creates = append(m.Creates, x)
		case 2:
			var x ObjKey
			f.sub(&x)
			m.Opens = append(m.Opens, x)
		}
	}
	return f.err
}

// ObjResult: One item's outcome: Meta when Code is 0.
type ObjResult struct {
	Meta    ObjectMeta // 1
	Code    Code       // 2
	Message string     // 3
}

func (m *ObjResult) Marshal(b []byte) []byte {
	b = putMsg(b, 1, &m.Meta)
	b = putUint(b, 2, uint64(m.Code))
	b = putString(b, 3, m.Message)
	return b
}

func (m *ObjResult) Unmarshal(b []byte) error {
	*m = ObjResult{}
	f := fields{b: b, msg: "ObjResult"}
	for f.next() {
		switch f.num {
		case 1:
			f.sub(&m.Meta)
		case 2:
			m.Code = Code(f.uint32())
		case 3:
			m.Message = f.string()
		}
	}
	return f.err
}

// ObjResults: Outcomes of a batch, in request order.
type ObjResults struct {
	Items []ObjResult // 1
}

func (m *ObjResults) Marshal(b []byte) []byte {
	for i := range m.Items {
		b = putMsg(b, 1, &m.Items[i])
	}
	return b
}

func (m *ObjResults) Unmarshal(b []byte) error {
	*m = ObjResults{}
	f := fields{b: b, msg: "ObjResults"}
	for f.next() {
		switch f.num {
		case 1:
			var x ObjResult
			f.sub(&x)
			m.Items = append(m.Items, x)
		}
	}
	return f.err
}

// ObjList: Objects held by one server.
type ObjList struct {
	Items []ObjectMeta // 1
}

func (m *ObjList) Marshal(b []byte) []byte {
	for i := range m.Items {
		b = putMsg(b, 1, &m.Items[i])
	}
	return b
}

func (m *ObjList) Unmarshal(b []byte) error {
	*m = ObjList{}
	f := fields{b: b, msg: "ObjList"}
	for f.next() {
		switch f.num {
		case 1:
			var x ObjectMeta
			f.sub(&x)
			m.Items = append(m.Items, x)
		}
	}
	return f.err
}

// SetDims: New dims for an object.
type SetDims struct {
	ID   uint64   // 1
	Dims []uint64 // 2
}

func (m *SetDims) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.ID))
	b = putPackedUints(b, 2, m.Dims)
	return b
}

func (m *SetDims) Unmarshal(b []byte) error {
	*m = SetDims{}
	f := fields{b: b, msg: "SetDims"}
	for f.next() {
		switch f.num {
		case 1:
			m.ID = f.uint64()
		case 2:
			m.Dims = f.packedUints(m.Dims)
		}
	}
	return f.err
}

// IDArg: An id argument.
type IDArg struct {
	ID    uint64 // 1
	Force bool   // 2
}

func (m *IDArg) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.ID))
	b = putBool(b, 2, m.Force)
	return b
}

func (m *IDArg) Unmarshal(b []byte) error {
	*m = IDArg{}
	f := fields{b: b, msg: "IDArg"}
	for f.next() {
		switch f.num {
		case 1:
			m.ID = f.uint64()
		case 2:
			m.Force = f.bool()
		}
	}
	return f.err
}

// Count: A count.
type Count struct {
	N uint64 // 1
}

func (m *Count) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.N))
	return b
}

func (m *Count) Unmarshal(b []byte) error {
	*m = Count{}
	f := fields{b: b, msg: "Count"}
	for f.next() {
		switch f.num {
		case 1:
			m.N = f.uint64()
		}
	}
	return f.err
}

// TagPut: Put one tag on an object (Kind 0) or container (Kind 1).
type TagPut struct {
	Kind  uint32 // 1
	ID    uint64 // 2
	Name  string // 3
	Type  int32  // 4: region.Type
	Value []byte // 5
}

func (m *TagPut) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Kind))
	b = putUint(b, 2, uint64(m.ID))
	b = putString(b, 3, m.Name)
	b = putInt(b, 4, int64(m.Type))
	b = putBytes(b, 5, m.Value)
	return b
}

func (m *TagPut) Unmarshal(b []byte) error {
	*m = TagPut{}
	f := fields{b: b, msg: "TagPut"}
	for f.next() {
		switch f.num {
		case 1:
			m.Kind = f.uint32()
		case 2:
			m.ID = f.uint64()
		case 3:
			m.Name = f.string()
		case 4:
			m.Type = f.int32()
		case 5:
			m.Value = f.bytes()
		}
	}
	return f.err
}

// TagBatch: Many tag puts in one request.
type TagBatch struct {
	Puts []TagPut // 1
}

func (m *TagBatch) Marshal(b []byte) []byte {
	for i := range m.Puts {
		b = putMsg(b, 1, &m.Puts[i])
	}
	return b
}

func (m *TagBatch) Unmarshal(b []byte) error {
	*m = TagBatch{}
	f := fields{b: b, msg: "TagBatch"}
	for f.next() {
		switch f.num {
		case 1:
			var x TagPut
			f.sub(&x)
			m.Puts = append(m.Puts, x)
		}
	}
	return f.err
}

// TagResults: Outcome of each put of a batch, in order (Code 0: done).
type TagResults struct {
	Codes    []uint64 // 1
	Messages []string // 2
}

func (m *TagResults) Marshal(b []byte) []byte {
	b = putPackedUints(b, 1, m.Codes)
	for _, s := range m.Messages {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	return b
}

func (m *TagResults) Unmarshal(b []byte) error {
	*m = TagResults{}
	f := fields{b: b, msg: "TagResults"}
	for f.next() {
		switch f.num {
		case 1:
			m.Codes = f.packedUints(m.Codes)
		case 2:
			m.Messages = append(m.Messages, f.string())
		}
	}
	return f.err
}

// TagKey: Names a tag.
type TagKey struct {
	Kind uint32 // 1
	ID   uint64 // 2
	Name string // 3
}

func (m *TagKey) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Kind))
	b = putUint(b, 2, uint64(m.ID))
	b = putString(b, 3, m.Name)
	return b
}

func (m *TagKey) Unmarshal(b []byte) error {
	*m = TagKey{}
	f := fields{b: b, msg: "TagKey"}
	for f.next() {
		switch f.num {
		case 1:
			m.Kind = f.uint32()
		case 2:
			m.ID = f.uint64()
		case 3:
			m.Name = f.string()
		}
	}
	return f.err
}

// TagValue: A typed tag value.
type TagValue struct {
	Type  int32  // 1
	Value []byte // 2
}

func (m *TagValue) Marshal(b []byte) []byte {
	b = putInt(b, 1, int64(m.Type))
	b = putBytes(b, 2, m.Value)
	return b
}

func (m *TagValue) Unmarshal(b []byte) error {
	*m = TagValue{}
	f := fields{b: b, msg: "TagValue"}
	for f.next() {
		switch f.num {
		case 1:
			m.Type = f.int32()
		case 2:
			m.Value = f.bytes()
		}
	}
	return f.err
}

// TagNames: Tag names of an object or container.
type TagNames struct {
	Names []string // 1
}

func (m *TagNames) Marshal(b []byte) []byte {
	for _, s := range m.Names {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	return b
}

func (m *TagNames) Unmarshal(b []byte) error {
	*m = TagNames{}
	f := fields{b: b, msg: "TagNames"}
	for f.next() {
		switch f.num {
		case 1:
			m.Names = append(m.Names, f.string())
		}
	}
	return f.err
}

// Checkpoint: Where a checkpoint was written.
type Checkpoint struct {
	Path string // 1
}

func (m *Checkpoint) Marshal(b []byte) []byte {
	b = putString(b, 1, m.Path)
	return b
}

func (m *Checkpoint) Unmarshal(b []byte) error {
	*m = Checkpoint{}
	f := fields{b: b, msg: "Checkpoint"}
	for f.next() {
		switch f.num {
		case 1:
			m.Path = f.string()
		}
	}
	return f.err
}

// MembersVersion is the Members version this build speaks. A metadata
// server refuses a request of another version with pdc.ErrVersion.
const MembersVersion = 1

// Members: Add objects to a container as members by reference, or remove such memberships (MethodObjMembers). Every object belongs to the metadata server the request goes to; it checks every item before it changes anything, so one bad item fails the whole request and changes nothing.
type Members struct {
	Version uint32   // 1: MembersVersion
	ContID  uint64   // 2: the container
	ObjIDs  []uint64 // 3: the objects
	Remove  bool     // 4: remove the memberships instead of adding them
	Check   bool     // 5: check every item, change nothing
}

func (m *Members) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Version))
	b = putUint(b, 2, m.ContID)
	b = putPackedUints(b, 3, m.ObjIDs)
	b = putBool(b, 4, m.Remove)
	b = putBool(b, 5, m.Check)
	return b
}

func (m *Members) Unmarshal(b []byte) error {
	*m = Members{}
	f := fields{b: b, msg: "Members"}
	for f.next() {
		switch f.num {
		case 1:
			m.Version = f.uint32()
		case 2:
			m.ContID = f.uint64()
		case 3:
			m.ObjIDs = f.packedUints(m.ObjIDs)
		case 4:
			m.Remove = f.bool()
		case 5:
			m.Check = f.bool()
		}
	}
	return f.err
}

// MembersReply: The answer to Members.
type MembersReply struct {
	Version uint32 // 1: MembersVersion
	Changed uint64 // 2: memberships added or removed (with Check: that would be)
}

func (m *MembersReply) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Version))
	b = putUint(b, 2, m.Changed)
	return b
}

func (m *MembersReply) Unmarshal(b []byte) error {
	*m = MembersReply{}
	f := fields{b: b, msg: "MembersReply"}
	for f.next() {
		switch f.num {
		case 1:
			m.Version = f.uint32()
		case 2:
			m.Changed = f.uint64()
		}
	}
	return f.err
}
