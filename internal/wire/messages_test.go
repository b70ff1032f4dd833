package wire_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// kind is how a message field is encoded.
type kind int

const (
	kUint32 kind = iota
	kUint64
	kInt64 // zigzag
	kBool
	kBytes
	kString
	kMsg
)

func (k kind) wireType() protowire.Type {
	switch k {
	case kBytes, kString, kMsg:
		return protowire.BytesType
	}
	return protowire.VarintType
}

type field struct {
	num  protowire.Number
	kind kind
}

// msgType describes one message type: its schema and sample values. The
// zero value of each type is always among the samples.
type msgType struct {
	name   string
	new    func() wire.Message
	fields []field
	vals   []wire.Message
}

func serverInfo(rank uint32, addr string) wire.ServerInfo {
	return wire.ServerInfo{Rank: rank, Addr: addr, Roles: wire.RoleBoth, PID: 1000 + rank, Host: "node" + addr,
		Instance: "inst-" + addr, StartUnix: 1_700_000_000_123_456_789}
}

// bigServer's encoding is well beyond 127 bytes, so the ServerList length
// prefix of it takes more than one byte.
var bigServer = wire.ServerInfo{Rank: 3, Addr: "unix:/" + strings.Repeat("d", 200) + "/rank-3.sock", Roles: wire.RoleData,
	PID: math.MaxUint32, Host: strings.Repeat("h", 64), Instance: strings.Repeat("i", 32), StartUnix: math.MinInt64}

var msgTypes = []msgType{
	{
		name:   "ErrorBody",
		new:    func() wire.Message { return new(wire.ErrorBody) },
		fields: []field{{1, kUint32}, {2, kString}},
		vals: []wire.Message{
			&wire.ErrorBody{},
			&wire.ErrorBody{Code: wire.CodeNotFound, Message: `object "x" not found`},
			&wire.ErrorBody{Code: math.MaxUint32, Message: strings.Repeat("é", 100)},
			&wire.ErrorBody{Message: "\xff\x00 not utf-8"},
		},
	},
	{
		name:   "Hello",
		new:    func() wire.Message { return new(wire.Hello) },
		fields: []field{{1, kUint32}, {2, kUint32}, {3, kUint32}, {4, kString}, {5, kBool}, {6, kBytes}},
		vals: []wire.Message{
			&wire.Hello{},
			&wire.Hello{Version: 1, Rank: 3, Size: 8, Instance: "5f2c9a", AuthRequired: true, Nonce: bytes.Repeat([]byte{0xa5}, 32)},
			&wire.Hello{Version: math.MaxUint32, Rank: math.MaxUint32, Size: math.MaxUint32},
			&wire.Hello{Nonce: []byte{0}},
		},
	},
	{
		name:   "Auth",
		new:    func() wire.Message { return new(wire.Auth) },
		fields: []field{{1, kBytes}, {2, kBytes}, {3, kString}},
		vals: []wire.Message{
			&wire.Auth{},
			&wire.Auth{Nonce: []byte("client nonce"), MAC: bytes.Repeat([]byte{1, 2}, 16), Client: "1234@node7"},
			&wire.Auth{Client: "only a client"},
			&wire.Auth{MAC: make([]byte, 300)},
		},
	},
	{
		name:   "AuthOK",
		new:    func() wire.Message { return new(wire.AuthOK) },
		fields: []field{{1, kBytes}},
		vals: []wire.Message{
			&wire.AuthOK{},
			&wire.AuthOK{MAC: []byte{0xde, 0xad, 0xbe, 0xef}},
		},
	},
	{
		name:   "ServerInfo",
		new:    func() wire.Message { return new(wire.ServerInfo) },
		fields: []field{{1, kUint32}, {2, kString}, {3, kUint32}, {4, kUint32}, {5, kString}, {6, kString}, {7, kInt64}, {8, kString}},
		vals: []wire.Message{
			&wire.ServerInfo{},
			ptr(serverInfo(0, "127.0.0.1:4000")),
			&wire.ServerInfo{StartUnix: -1},
			&wire.ServerInfo{StartUnix: math.MaxInt64, Roles: wire.RoleMetadata},
			&wire.ServerInfo{Host: "node-b", StageDir: "/dev/shm/producer"},
			ptr(bigServer),
		},
	},
	{
		name:   "ServerList",
		new:    func() wire.Message { return new(wire.ServerList) },
		fields: []field{{1, kMsg}},
		vals: []wire.Message{
			&wire.ServerList{},
			&wire.ServerList{Servers: []wire.ServerInfo{serverInfo(0, "127.0.0.1:4000")}},
			&wire.ServerList{Servers: []wire.ServerInfo{
				serverInfo(0, "127.0.0.1:4000"), serverInfo(1, "127.0.0.1:4001"), {}, serverInfo(3, "unix:/tmp/s.sock")}},
			&wire.ServerList{Servers: []wire.ServerInfo{serverInfo(0, "a:1"), bigServer, serverInfo(2, "c:3")}},
			&wire.ServerList{Servers: []wire.ServerInfo{{}}},
		},
	},
	{
		name:   "Status",
		new:    func() wire.Message { return new(wire.Status) },
		fields: []field{{1, kMsg}, {2, kUint32}, {3, kUint64}, {4, kUint64}, {5, kString}, {6, kInt64}},
		vals: []wire.Message{
			&wire.Status{},
			&wire.Status{Server: serverInfo(2, "10.0.0.2:7000"), Size: 4, Clients: 17, Requests: 1 << 40, Version: "v0.1.0", UptimeNS: 3_600_000_000_000},
			&wire.Status{Server: bigServer, Clients: math.MaxUint64, UptimeNS: -5},
		},
	},
	{
		name:   "RegisterRequest",
		new:    func() wire.Message { return new(wire.RegisterRequest) },
		fields: []field{{1, kMsg}, {2, kUint32}},
		vals: []wire.Message{
			&wire.RegisterRequest{},
			&wire.RegisterRequest{Server: serverInfo(5, "127.0.0.1:4005"), Size: 8},
			&wire.RegisterRequest{Server: bigServer, Size: math.MaxUint32},
		},
	},
}

func ptr[T any](v T) *T { return &v }

func typeNamed(name string) msgType {
	for _, mt := range msgTypes {
		if mt.name == name {
			return mt
		}
	}
	panic("no message type " + name)
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// golden pins the schema: field numbers, wire types and zigzag, in bytes
// written by hand.
var golden = []struct {
	name string
	msg  wire.Message
	enc  string
}{
	{"ErrorBody", &wire.ErrorBody{Code: 2, Message: "x"}, "08 02 12 01 78"},
	{"Hello", &wire.Hello{Version: 1, Rank: 2, Size: 3, Instance: "i", AuthRequired: true, Nonce: []byte{0xaa}},
		"08 01 10 02 18 03 22 01 69 28 01 32 01 aa"},
	{"Auth", &wire.Auth{Nonce: []byte{1}, MAC: []byte{2}, Client: "c"}, "0a 01 01 12 01 02 1a 01 63"},
	{"AuthOK", &wire.AuthOK{MAC: []byte{7}}, "0a 01 07"},
	{"ServerInfo", &wire.ServerInfo{Rank: 1, Addr: "a", Roles: 3, PID: 4, Host: "h", Instance: "i", StartUnix: -1},
		"08 01 12 01 61 18 03 20 04 2a 01 68 32 01 69 38 01"},
	{"ServerInfo", &wire.ServerInfo{StartUnix: 1}, "38 02"},
	{"ServerList", &wire.ServerList{Servers: []wire.ServerInfo{{Rank: 1}, {}}}, "0a 02 08 01 0a 00"},
	{"Status", &wire.Status{Server: wire.ServerInfo{Rank: 1}, Size: 2, Clients: 3, Requests: 4, Version: "v", UptimeNS: 5},
		"0a 02 08 01 10 02 18 03 20 04 2a 01 76 30 0a"},
	{"Status", &wire.Status{}, "0a 00"},
	{"RegisterRequest", &wire.RegisterRequest{Server: wire.ServerInfo{Addr: "a"}, Size: 2}, "0a 03 12 01 61 10 02"},
	{"RegisterRequest", &wire.RegisterRequest{}, "0a 00"},
}

func TestMessageGolden(t *testing.T) {
	for _, g := range golden {
		want := unhex(g.enc)
		if got := g.msg.Marshal(nil); !bytes.Equal(got, want) {
			t.Fatalf("%s %+v:\n got % x\nwant % x", g.name, g.msg, got, want)
		}
		m := typeNamed(g.name).new()
		if err := m.Unmarshal(want); err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		if !reflect.DeepEqual(m, g.msg) {
			t.Fatalf("%s: decoded %+v, want %+v", g.name, m, g.msg)
		}
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for _, mt := range msgTypes {
		full := mt.vals[len(mt.vals)-1]
		for _, v := range mt.vals {
			b := v.Marshal(nil)
			m := mt.new()
			if err := m.Unmarshal(b); err != nil {
				t.Fatalf("%s %+v: %v", mt.name, v, err)
			}
			if !reflect.DeepEqual(m, v) {
				t.Fatalf("%s round trip:\n got %+v\nwant %+v", mt.name, m, v)
			}
			// Marshal appends.
			withPrefix := v.Marshal([]byte("prefix"))
			if !bytes.HasPrefix(withPrefix, []byte("prefix")) || !bytes.Equal(withPrefix[6:], b) {
				t.Fatalf("%s: Marshal after a prefix:\n got % x\nwant prefix + % x", mt.name, withPrefix, b)
			}
			// Unmarshal resets what was there.
			m = mt.new()
			if err := m.Unmarshal(full.Marshal(nil)); err != nil {
				t.Fatal(err)
			}
			if err := m.Unmarshal(b); err != nil || !reflect.DeepEqual(m, v) {
				t.Fatalf("%s: Unmarshal into a used message: got %+v, %v; want %+v", mt.name, m, err, v)
			}
		}
	}
}

// Present but empty byte fields decode as nil, as absent ones do.
func TestMessageEmptyBytesDecodeNil(t *testing.T) {
	var h wire.Hello
	if err := h.Unmarshal(unhex("32 00")); err != nil || h.Nonce != nil {
		t.Fatalf("empty nonce: %#v, %v", h.Nonce, err)
	}
	var a wire.Auth
	if err := a.Unmarshal(unhex("0a 00 12 00")); err != nil || a.Nonce != nil || a.MAC != nil {
		t.Fatalf("empty nonce and MAC: %#v, %#v, %v", a.Nonce, a.MAC, err)
	}
}

func TestMessageDecodedBytesDoNotAlias(t *testing.T) {
	in := (&wire.Auth{Nonce: []byte("nonce"), MAC: []byte("mac")}).Marshal(nil)
	var a wire.Auth
	if err := a.Unmarshal(in); err != nil {
		t.Fatal(err)
	}
	in2 := (&wire.Hello{Nonce: []byte("hello nonce")}).Marshal(nil)
	var h wire.Hello
	if err := h.Unmarshal(in2); err != nil {
		t.Fatal(err)
	}
	in3 := (&wire.AuthOK{MAC: []byte("server mac")}).Marshal(nil)
	var ok wire.AuthOK
	if err := ok.Unmarshal(in3); err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{in, in2, in3} {
		for i := range b {
			b[i] = 0xff
		}
	}
	if string(a.Nonce) != "nonce" || string(a.MAC) != "mac" || string(h.Nonce) != "hello nonce" || string(ok.MAC) != "server mac" {
		t.Fatalf("decoded bytes alias the input: %q %q %q %q", a.Nonce, a.MAC, h.Nonce, ok.MAC)
	}
}

// unknownFields are fields of every wire type with numbers no message uses.
var unknownFields = func() [][]byte {
	var out [][]byte
	for _, n := range []protowire.Number{15, 1000, protowire.MaxValidNumber} {
		for _, typ := range []protowire.Type{protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type,
			protowire.BytesType, protowire.StartGroupType} {
			out = append(out, fieldOfType(n, typ))
		}
	}
	return out
}()

// fieldOfType encodes a well-formed field n of type typ.
func fieldOfType(n protowire.Number, typ protowire.Type) []byte {
	b := protowire.AppendTag(nil, n, typ)
	switch typ {
	case protowire.VarintType:
		return protowire.AppendVarint(b, 300)
	case protowire.Fixed32Type:
		return protowire.AppendFixed32(b, 0xdeadbeef)
	case protowire.Fixed64Type:
		return protowire.AppendFixed64(b, 0x0123456789abcdef)
	case protowire.BytesType:
		return protowire.AppendBytes(b, []byte("unknown bytes"))
	case protowire.StartGroupType:
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, 7)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, []byte("in a group"))
		return protowire.AppendTag(b, n, protowire.EndGroupType)
	}
	panic("bad type")
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestMessageUnknownFieldsSkipped(t *testing.T) {
	for _, mt := range msgTypes {
		for _, v := range mt.vals {
			b := v.Marshal(nil)
			for _, u := range unknownFields {
				for _, in := range [][]byte{cat(b, u), cat(u, b), cat(u, b, u, u)} {
					m := mt.new()
					if err := m.Unmarshal(in); err != nil {
						t.Fatalf("%s with unknown field % x: %v", mt.name, u, err)
					}
					if !reflect.DeepEqual(m, v) {
						t.Fatalf("%s with unknown field % x:\n got %+v\nwant %+v", mt.name, u, m, v)
					}
				}
			}
		}
	}
}

// Unknown fields inside an embedded ServerInfo are skipped too.
func TestMessageUnknownFieldsInSubmessage(t *testing.T) {
	si := serverInfo(1, "x:1")
	inner := cat(unknownFields[4], si.Marshal(nil), unknownFields[0])
	sub := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), inner)

	var st wire.Status
	if err := st.Unmarshal(cat(sub, unhex("10 04"))); err != nil || !reflect.DeepEqual(st, wire.Status{Server: si, Size: 4}) {
		t.Fatalf("Status: %+v, %v", st, err)
	}
	var rr wire.RegisterRequest
	if err := rr.Unmarshal(sub); err != nil || !reflect.DeepEqual(rr, wire.RegisterRequest{Server: si}) {
		t.Fatalf("RegisterRequest: %+v, %v", rr, err)
	}
	var sl wire.ServerList
	if err := sl.Unmarshal(cat(sub, sub)); err != nil || !reflect.DeepEqual(sl, wire.ServerList{Servers: []wire.ServerInfo{si, si}}) {
		t.Fatalf("ServerList: %+v, %v", sl, err)
	}
}

// wrongTypeFields returns, for each known field of mt, encodings of that
// field number with every other wire type.
func wrongTypeFields(mt msgType) [][]byte {
	var out [][]byte
	for _, f := range mt.fields {
		for _, typ := range []protowire.Type{protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type,
			protowire.BytesType, protowire.StartGroupType} {
			if typ != f.kind.wireType() {
				out = append(out, fieldOfType(f.num, typ))
			}
		}
	}
	return out
}

func wantProtocolError(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: decoded without error", what)
	}
	if !errors.Is(err, pdc.ErrProtocol) {
		t.Fatalf("%s: error %q does not wrap pdc.ErrProtocol", what, err)
	}
}

func TestMessageWrongWireType(t *testing.T) {
	for _, mt := range msgTypes {
		wrong := wrongTypeFields(mt)
		if len(wrong) != 4*len(mt.fields) {
			t.Fatalf("%s: %d wrong-type fields for %d fields", mt.name, len(wrong), len(mt.fields))
		}
		for _, v := range mt.vals {
			b := v.Marshal(nil)
			for _, w := range wrong {
				for _, in := range [][]byte{cat(b, w), cat(w, b)} {
					err := mt.new().Unmarshal(in)
					wantProtocolError(t, mt.name+" with "+hex.EncodeToString(w), err)
					if !strings.Contains(err.Error(), "decode "+mt.name) {
						t.Fatalf("%s: error %q does not name the message", mt.name, err)
					}
				}
			}
		}
	}
}

// A wrong wire type inside an embedded ServerInfo fails the outer message.
func TestMessageWrongWireTypeInSubmessage(t *testing.T) {
	for _, w := range wrongTypeFields(typeNamed("ServerInfo")) {
		sub := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), w)
		for _, name := range []string{"ServerList", "Status", "RegisterRequest"} {
			err := typeNamed(name).new().Unmarshal(sub)
			wantProtocolError(t, name+" with inner "+hex.EncodeToString(w), err)
			if !strings.Contains(err.Error(), "decode ServerInfo") {
				t.Fatalf("%s: error %q does not name the inner message", name, err)
			}
		}
	}
}

func TestMessageUint32Overflow(t *testing.T) {
	for _, mt := range msgTypes {
		for _, f := range mt.fields {
			if f.kind != kUint32 {
				continue
			}
			at := protowire.AppendVarint(protowire.AppendTag(nil, f.num, protowire.VarintType), math.MaxUint32)
			if err := mt.new().Unmarshal(at); err != nil {
				t.Fatalf("%s field %d = MaxUint32: %v", mt.name, f.num, err)
			}
			over := protowire.AppendVarint(protowire.AppendTag(nil, f.num, protowire.VarintType), math.MaxUint32+1)
			wantProtocolError(t, mt.name+" uint32 overflow", mt.new().Unmarshal(over))
		}
	}
}

// malformed inputs are refused by every message type.
var malformed = []struct {
	name string
	b    []byte
}{
	{"field number 0", unhex("00 01")},
	{"wire type 6", unhex("0e 01")},
	{"wire type 7", unhex("0f 01")},
	{"end group alone", unhex("0c")},
	{"unterminated group", unhex("7b 08 01")},
	{"mismatched end group", unhex("7b 74")},
	{"truncated tag", unhex("80")},
	{"overlong varint", unhex("08 ff ff ff ff ff ff ff ff ff ff 01")},
	{"bytes length beyond input", unhex("7a 05 01 02")},
	{"huge bytes length", unhex("7a ff ff ff ff 0f")},
	{"truncated fixed64", unhex("79 01 02 03")},
	{"truncated fixed32", unhex("7d 01")},
	{"field number beyond max", protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3)},
}

func TestMessageMalformed(t *testing.T) {
	for _, mt := range msgTypes {
		for _, c := range malformed {
			wantProtocolError(t, mt.name+" "+c.name, mt.new().Unmarshal(c.b))
			wantProtocolError(t, mt.name+" valid then "+c.name, mt.new().Unmarshal(cat(mt.vals[1].Marshal(nil), c.b)))
		}
	}
}

// fieldEnds returns the offsets at which a top-level field of b ends, and 0.
func fieldEnds(t *testing.T, b []byte) map[int]bool {
	ends := map[int]bool{0: true}
	for off := 0; off < len(b); {
		_, _, n := protowire.ConsumeField(b[off:])
		if n < 0 {
			t.Fatalf("test encoding % x does not parse at %d", b, off)
		}
		off += n
		ends[off] = true
	}
	return ends
}

// Every prefix of an encoding decodes if it ends on a field boundary and is
// a protocol error otherwise.
func TestMessageTruncated(t *testing.T) {
	for _, mt := range msgTypes {
		for _, v := range mt.vals {
			b := cat(v.Marshal(nil), bytes.Join(unknownFields[:5], nil))
			ends := fieldEnds(t, b)
			for i := range len(b) {
				err := mt.new().Unmarshal(b[:i])
				if ends[i] {
					if err != nil {
						t.Fatalf("%s: prefix of %d bytes ends on a field boundary but fails: %v", mt.name, i, err)
					}
				} else {
					wantProtocolError(t, mt.name+" truncated", err)
				}
			}
		}
	}
}

// ServerList elements are written with a length prefix fixed up after the
// element is encoded; check it against protowire's own encoding across the
// one-, two- and three-byte length boundaries, after a non-empty dst.
func TestServerListLengthPrefix(t *testing.T) {
	var lens []int
	for n := 120; n <= 135; n++ {
		lens = append(lens, n)
	}
	for n := 16375; n <= 16390; n++ {
		lens = append(lens, n)
	}
	prefix := []byte("dst")
	for _, n := range lens {
		big := wire.ServerInfo{Addr: strings.Repeat("a", n), Rank: 1}
		sl := wire.ServerList{Servers: []wire.ServerInfo{serverInfo(0, "x:0"), big, serverInfo(2, "x:2")}}
		want := bytes.Clone(prefix)
		for i := range sl.Servers {
			want = protowire.AppendTag(want, 1, protowire.BytesType)
			want = protowire.AppendBytes(want, sl.Servers[i].Marshal(nil))
		}
		got := sl.Marshal(bytes.Clone(prefix))
		if !bytes.Equal(got, want) {
			t.Fatalf("addr of %d bytes: encoding differs from protowire's", n)
		}
		var back wire.ServerList
		if err := back.Unmarshal(got[len(prefix):]); err != nil || !reflect.DeepEqual(back, sl) {
			t.Fatalf("addr of %d bytes: decoded %d servers, %v", n, len(back.Servers), err)
		}
	}
	// The big sample's element length really takes more than one byte.
	b := (&wire.ServerList{Servers: []wire.ServerInfo{bigServer}}).Marshal(nil)
	if size := len(bigServer.Marshal(nil)); size < 128 || b[1]&0x80 == 0 {
		t.Fatalf("bigServer encodes to %d bytes with length byte %#x; want a multi-byte length", size, b[1])
	}
}

// fuzzMessage checks that decoding never panics, fails only with
// pdc.ErrProtocol, and that a decoded message re-encodes canonically:
// decode(encode(decode(x))) == decode(x) and encode is stable.
func fuzzMessage(f *testing.F, name string) {
	mt := typeNamed(name)
	for _, v := range mt.vals {
		b := v.Marshal(nil)
		f.Add(b)
		f.Add(cat(b, bytes.Join(unknownFields, nil)))
		if len(b) > 1 {
			f.Add(b[:len(b)-1])
		}
	}
	for _, g := range golden {
		if g.name == name {
			f.Add(unhex(g.enc))
		}
	}
	for _, w := range wrongTypeFields(mt) {
		f.Add(w)
	}
	for _, c := range malformed {
		f.Add(c.b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := mt.new()
		if err := m.Unmarshal(b); err != nil {
			if !errors.Is(err, pdc.ErrProtocol) {
				t.Fatalf("error %q does not wrap pdc.ErrProtocol", err)
			}
			return
		}
		enc := m.Marshal(nil)
		m2 := mt.new()
		if err := m2.Unmarshal(enc); err != nil {
			t.Fatalf("re-encoding % x of %+v does not decode: %v", enc, m, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("decode(encode(decode(x))) differs:\n got %+v\nwant %+v", m2, m)
		}
		if enc2 := m2.Marshal(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n% x\n% x", enc, enc2)
		}
	})
}

func FuzzErrorBody(f *testing.F)       { fuzzMessage(f, "ErrorBody") }
func FuzzHello(f *testing.F)           { fuzzMessage(f, "Hello") }
func FuzzAuth(f *testing.F)            { fuzzMessage(f, "Auth") }
func FuzzAuthOK(f *testing.F)          { fuzzMessage(f, "AuthOK") }
func FuzzServerInfo(f *testing.F)      { fuzzMessage(f, "ServerInfo") }
func FuzzServerList(f *testing.F)      { fuzzMessage(f, "ServerList") }
func FuzzStatus(f *testing.F)          { fuzzMessage(f, "Status") }
func FuzzRegisterRequest(f *testing.F) { fuzzMessage(f, "RegisterRequest") }
