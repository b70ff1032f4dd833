package wire

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers are the schema: never renumber or reuse them.

// ErrorBody is the header of a response with FlagError.
type ErrorBody struct {
	Code    Code   // 1
	Message string // 2
}

func (m *ErrorBody) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Code))
	return putString(b, 2, m.Message)
}

func (m *ErrorBody) Unmarshal(b []byte) error {
	*m = ErrorBody{}
	f := fields{b: b, msg: "ErrorBody"}
	for f.next() {
		switch f.num {
		case 1:
			m.Code = Code(f.uint32())
		case 2:
			m.Message = f.string()
		}
	}
	return f.err
}

// Hello is the first frame a server sends on a new connection.
type Hello struct {
	Version      uint32 // 1: highest protocol version the server speaks
	Rank         uint32 // 2
	Size         uint32 // 3
	Instance     string // 4: random per server process; tells a restarted server from the old one
	AuthRequired bool   // 5
	Nonce        []byte // 6: the server's challenge
}

func (m *Hello) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Version))
	b = putUint(b, 2, uint64(m.Rank))
	b = putUint(b, 3, uint64(m.Size))
	b = putString(b, 4, m.Instance)
	b = putBool(b, 5, m.AuthRequired)
	return putBytes(b, 6, m.Nonce)
}

func (m *Hello) Unmarshal(b []byte) error {
	*m = Hello{}
	f := fields{b: b, msg: "Hello"}
	for f.next() {
		switch f.num {
		case 1:
			m.Version = f.uint32()
		case 2:
			m.Rank = f.uint32()
		case 3:
			m.Size = f.uint32()
		case 4:
			m.Instance = f.string()
		case 5:
			m.AuthRequired = f.bool()
		case 6:
			m.Nonce = f.bytes()
		}
	}
	return f.err
}

// Auth is the client's answer to Hello.
type Auth struct {
	Nonce  []byte // 1: the client's challenge to the server
	MAC    []byte // 2: proof that the client knows the secret; empty without one
	Client string // 3: who is connecting, for the server's logs
}

func (m *Auth) Marshal(b []byte) []byte {
	b = putBytes(b, 1, m.Nonce)
	b = putBytes(b, 2, m.MAC)
	return putString(b, 3, m.Client)
}

func (m *Auth) Unmarshal(b []byte) error {
	*m = Auth{}
	f := fields{b: b, msg: "Auth"}
	for f.next() {
		switch f.num {
		case 1:
			m.Nonce = f.bytes()
		case 2:
			m.MAC = f.bytes()
		case 3:
			m.Client = f.string()
		}
	}
	return f.err
}

// AuthOK accepts a connection.
type AuthOK struct {
	MAC []byte // 1: the server's proof that it knows the secret, when one is in use
}

func (m *AuthOK) Marshal(b []byte) []byte { return putBytes(b, 1, m.MAC) }

func (m *AuthOK) Unmarshal(b []byte) error {
	*m = AuthOK{}
	f := fields{b: b, msg: "AuthOK"}
	for f.next() {
		if f.num == 1 {
			m.MAC = f.bytes()
		}
	}
	return f.err
}

// Role bits say what a server does.
type Role uint32

const (
	RoleMetadata Role = 1 << 0
	RoleData     Role = 1 << 1
	RoleBoth          = RoleMetadata | RoleData
)

// ServerInfo describes one server of a cluster.
type ServerInfo struct {
	Rank      uint32 // 1
	Addr      string // 2: "host:port" or "unix:/path"
	Roles     Role   // 3
	PID       uint32 // 4
	Host      string // 5
	Instance  string // 6
	StartUnix int64  // 7: start time, Unix nanoseconds
	StageDir  string // 8: the producer dir it serves staged files from ("" if none)
}

func (m *ServerInfo) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Rank))
	b = putString(b, 2, m.Addr)
	b = putUint(b, 3, uint64(m.Roles))
	b = putUint(b, 4, uint64(m.PID))
	b = putString(b, 5, m.Host)
	b = putString(b, 6, m.Instance)
	b = putInt(b, 7, m.StartUnix)
	return putString(b, 8, m.StageDir)
}

func (m *ServerInfo) Unmarshal(b []byte) error {
	*m = ServerInfo{}
	f := fields{b: b, msg: "ServerInfo"}
	for f.next() {
		switch f.num {
		case 1:
			m.Rank = f.uint32()
		case 2:
			m.Addr = f.string()
		case 3:
			m.Roles = Role(f.uint32())
		case 4:
			m.PID = f.uint32()
		case 5:
			m.Host = f.string()
		case 6:
			m.Instance = f.string()
		case 7:
			m.StartUnix = f.int64()
		case 8:
			m.StageDir = f.string()
		}
	}
	return f.err
}

// ServerList is the membership of a cluster, rank order.
type ServerList struct {
	Servers []ServerInfo // 1
}

func (m *ServerList) Marshal(b []byte) []byte {
	for i := range m.Servers {
		b = putMsg(b, 1, &m.Servers[i])
	}
	return b
}

func (m *ServerList) Unmarshal(b []byte) error {
	*m = ServerList{}
	f := fields{b: b, msg: "ServerList"}
	for f.next() {
		if f.num == 1 {
			var s ServerInfo
			f.sub(&s)
			m.Servers = append(m.Servers, s)
		}
	}
	return f.err
}

// Status is a server's answer to MethodStatus.
type Status struct {
	Server   ServerInfo // 1
	Size     uint32     // 2: servers in the cluster
	Clients  uint64     // 3: connections open now
	Requests uint64     // 4: requests served since start
	Version  string     // 5: build version
	UptimeNS int64      // 6
}

func (m *Status) Marshal(b []byte) []byte {
	b = putMsg(b, 1, &m.Server)
	b = putUint(b, 2, uint64(m.Size))
	b = putUint(b, 3, m.Clients)
	b = putUint(b, 4, m.Requests)
	b = putString(b, 5, m.Version)
	return putInt(b, 6, m.UptimeNS)
}

func (m *Status) Unmarshal(b []byte) error {
	*m = Status{}
	f := fields{b: b, msg: "Status"}
	for f.next() {
		switch f.num {
		case 1:
			f.sub(&m.Server)
		case 2:
			m.Size = f.uint32()
		case 3:
			m.Clients = f.uint64()
		case 4:
			m.Requests = f.uint64()
		case 5:
			m.Version = f.string()
		case 6:
			m.UptimeNS = f.int64()
		}
	}
	return f.err
}

// RegisterRequest is a starting server's registration with rank 0.
type RegisterRequest struct {
	Server ServerInfo // 1
	Size   uint32     // 2: the cluster size the registrant was started with
}

func (m *RegisterRequest) Marshal(b []byte) []byte {
	b = putMsg(b, 1, &m.Server)
	return putUint(b, 2, uint64(m.Size))
}

func (m *RegisterRequest) Unmarshal(b []byte) error {
	*m = RegisterRequest{}
	f := fields{b: b, msg: "RegisterRequest"}
	for f.next() {
		switch f.num {
		case 1:
			f.sub(&m.Server)
		case 2:
			m.Size = f.uint32()
		}
	}
	return f.err
}

// KVBatch carries raw store entries from one metadata server to another
// when metadata moves to a new owner.
type KVBatch struct {
	Keys   [][]byte // 1
	Values [][]byte // 2: Values[i] belongs to Keys[i]
}

func (m *KVBatch) Marshal(b []byte) []byte {
	for _, k := range m.Keys {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, k)
	}
	for _, v := range m.Values {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, v)
	}
	return b
}

func (m *KVBatch) Unmarshal(b []byte) error {
	*m = KVBatch{}
	f := fields{b: b, msg: "KVBatch"}
	for f.next() {
		switch f.num {
		case 1:
			m.Keys = append(m.Keys, f.bytesOrEmpty())
		case 2:
			m.Values = append(m.Values, f.bytesOrEmpty())
		}
	}
	if f.err == nil && len(m.Keys) != len(m.Values) {
		f.fail(fmt.Errorf("%d keys but %d values", len(m.Keys), len(m.Values)))
	}
	return f.err
}
