package wire

// FetchRequest asks a sender for the bytes it knows under Key, delivered by
// Mode. It is the packed form of DYAD's consumer request: besides the key
// it says how to reach the receiver when the sender must connect to it
// (push).
type FetchRequest struct {
	Key  []byte // 1: what to send; the sender's resolver interprets it
	Mode uint32 // 2: dtl.Mode the receiver chose
	// Push only: where the receiver waits for the bytes and the
	// registration they go to, guarded by a capability token.
	PushAddr string // 3
	PushID   uint64 // 4
	Token    []byte // 5
	// Cap bounds the size the receiver accepts (0: any).
	Cap uint64 // 6
	// Off and Len select a section of the source (Len 0: to its end).
	Off uint64 // 7
	Len uint64 // 8
	// Pull only: the token of the handle the receiver is already pulling
	// under, without waiting for this answer (a pipelined pull).
	PullToken []byte // 9
	// Shm only: the receiver maps the payload, so the sender hands over
	// only memory that cannot shrink under the mapping (a sealed memfd).
	Map bool // 10
}

func (m *FetchRequest) Marshal(b []byte) []byte {
	b = putBytes(b, 1, m.Key)
	b = putUint(b, 2, uint64(m.Mode))
	b = putString(b, 3, m.PushAddr)
	b = putUint(b, 4, m.PushID)
	b = putBytes(b, 5, m.Token)
	b = putUint(b, 6, m.Cap)
	b = putUint(b, 7, m.Off)
	b = putUint(b, 8, m.Len)
	b = putBytes(b, 9, m.PullToken)
	return putBool(b, 10, m.Map)
}

func (m *FetchRequest) Unmarshal(b []byte) error {
	*m = FetchRequest{}
	f := fields{b: b, msg: "FetchRequest"}
	for f.next() {
		switch f.num {
		case 1:
			m.Key = f.bytes()
		case 2:
			m.Mode = f.uint32()
		case 3:
			m.PushAddr = f.string()
		case 4:
			m.PushID = f.uint64()
		case 5:
			m.Token = f.bytes()
		case 6:
			m.Cap = f.uint64()
		case 7:
			m.Off = f.uint64()
		case 8:
			m.Len = f.uint64()
		case 9:
			m.PullToken = f.bytes()
		case 10:
			m.Map = f.bool()
		}
	}
	return f.err
}

// FetchReply is the sender's answer: the size of what it sends and, for
// pull and shm, where and under which handle the receiver picks it up.
type FetchReply struct {
	Size   uint64 // 1
	Mode   uint32 // 2: the mode used
	Addr   string // 3: pull: bulk address; shm: Unix socket path
	Handle uint64 // 4
	Token  []byte // 5: capability for Handle
	TTL    uint64 // 6: nanoseconds the handle stays valid
}

func (m *FetchReply) Marshal(b []byte) []byte {
	b = putUint(b, 1, m.Size)
	b = putUint(b, 2, uint64(m.Mode))
	b = putString(b, 3, m.Addr)
	b = putUint(b, 4, m.Handle)
	b = putBytes(b, 5, m.Token)
	return putUint(b, 6, m.TTL)
}

func (m *FetchReply) Unmarshal(b []byte) error {
	*m = FetchReply{}
	f := fields{b: b, msg: "FetchReply"}
	for f.next() {
		switch f.num {
		case 1:
			m.Size = f.uint64()
		case 2:
			m.Mode = f.uint32()
		case 3:
			m.Addr = f.string()
		case 4:
			m.Handle = f.uint64()
		case 5:
			m.Token = f.bytes()
		case 6:
			m.TTL = f.uint64()
		}
	}
	return f.err
}
