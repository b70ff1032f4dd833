package dtl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

var (
	requestMagics = []string{magicPull, magicPush, magicShm}
	answerMagics  = []string{magicPullAck, magicPushAck, magicShmAck}
	allMagics     = append(append([]string{}, requestMagics...), answerMagics...)
)

func TestMagicsDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range allMagics {
		if len(m) != 4 {
			t.Errorf("magic %q is %d bytes, want 4", m, len(m))
		}
		if seen[m] {
			t.Errorf("magic %q used twice", m)
		}
		seen[m] = true
	}
}

func sampleRequest() request {
	r := request{id: 0x0102030405060708, off: 0x1112131415161718, size: 0x2122232425262728}
	for i := range r.token {
		r.token[i] = byte(0xa0 + i)
	}
	return r
}

func TestRequestRoundTrip(t *testing.T) {
	for _, magic := range requestMagics {
		for _, in := range []request{{}, sampleRequest(), {id: ^uint64(0), off: ^uint64(0), size: ^uint64(0), token: token{0xff, 15: 0xff}}} {
			b := in.put(nil, magic)
			if len(b) != requestSize {
				t.Fatalf("%s: encoded %d bytes, want %d", magic, len(b), requestSize)
			}
			if string(b[:4]) != magic || b[4] != protoVersion || b[5] != 0 || b[6] != 0 || b[7] != 0 {
				t.Fatalf("%s: header %x", magic, b[:8])
			}
			var out request
			if err := out.decode(b, magic); err != nil {
				t.Fatalf("%s: decode: %v", magic, err)
			}
			if out != in {
				t.Fatalf("%s: round trip %+v -> %+v", magic, in, out)
			}
		}
	}

	// Flags ride in byte 5 and do not disturb the fields.
	in := sampleRequest()
	b := in.putFlags(nil, magicPull, flagWait)
	if b[5] != flagWait || b[6] != 0 || b[7] != 0 {
		t.Fatalf("flags: header %x", b[:8])
	}
	var out request
	if err := out.decode(b, magicPull); err != nil || out != in {
		t.Fatalf("flags: decode %+v, %v; want %+v", out, err, in)
	}
	if !bytes.Equal(b[8:], in.put(nil, magicPull)[8:]) {
		t.Fatal("flags changed the body")
	}

	// put appends.
	prefix := []byte("prefix")
	b = in.put(append([]byte{}, prefix...), magicPush)
	if !bytes.HasPrefix(b, prefix) || !bytes.Equal(b[len(prefix):], in.put(nil, magicPush)) {
		t.Fatalf("put does not append: %x", b)
	}

	// Little-endian, at fixed places.
	b = in.put(nil, magicShm)
	if binary.LittleEndian.Uint64(b[8:]) != in.id || !bytes.Equal(b[16:32], in.token[:]) ||
		binary.LittleEndian.Uint64(b[32:]) != in.off || binary.LittleEndian.Uint64(b[40:]) != in.size {
		t.Fatalf("layout: %x", b)
	}
}

func TestAnswerRoundTrip(t *testing.T) {
	for _, magic := range answerMagics {
		for _, in := range []answer{
			{},
			{off: 7, size: 1 << 40},
			{code: wire.CodeNotFound, msgLen: 1},
			{code: wire.CodeInternal, msgLen: maxStatusMsg, off: ^uint64(0), size: ^uint64(0)},
			{code: wire.Code(999), msgLen: 3}, // a code from a newer peer
		} {
			b := in.put(nil, magic)
			if len(b) != answerSize {
				t.Fatalf("%s: encoded %d bytes, want %d", magic, len(b), answerSize)
			}
			if string(b[:4]) != magic || b[4] != protoVersion || b[5] != 0 || b[6] != 0 || b[7] != 0 {
				t.Fatalf("%s: header %x", magic, b[:8])
			}
			var out answer
			if err := out.decode(b, magic); err != nil {
				t.Fatalf("%s: decode %+v: %v", magic, in, err)
			}
			if out != in {
				t.Fatalf("%s: round trip %+v -> %+v", magic, in, out)
			}
		}
	}
}

func wantBadPack(t *testing.T, what string, err error, mention string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted", what)
	}
	if !errors.Is(err, ErrBadPack) || !errors.Is(err, pdc.ErrProtocol) {
		t.Fatalf("%s: %v does not match ErrBadPack and pdc.ErrProtocol", what, err)
	}
	if !strings.Contains(err.Error(), mention) {
		t.Fatalf("%s: %q does not mention %q", what, err, mention)
	}
}

func TestDecodeRejects(t *testing.T) {
	in := sampleRequest()
	good := in.put(nil, magicPull)

	t.Run("request magic", func(t *testing.T) {
		for _, other := range allMagics {
			if other == magicPull {
				continue
			}
			var r request
			wantBadPack(t, other, r.decode(good, other), magicPull)
		}
		for _, magic := range []string{"\x00\x00\x00\x00", "pdcb", "HTTP"} {
			b := append([]byte(magic), good[4:]...)
			var r request
			wantBadPack(t, magic, r.decode(b, magicPull), magicPull)
		}
	})
	t.Run("request version", func(t *testing.T) {
		for _, v := range []byte{0, protoVersion + 1, 0xff} {
			b := append([]byte{}, good...)
			b[4] = v
			var r request
			wantBadPack(t, "version", r.decode(b, magicPull), "version")
		}
	})

	okAns := answer{off: 1, size: 2}
	t.Run("answer magic", func(t *testing.T) {
		b := okAns.put(nil, magicShmAck)
		for _, other := range allMagics {
			if other == magicShmAck {
				continue
			}
			var a answer
			wantBadPack(t, other, a.decode(b, other), magicShmAck)
		}
	})
	t.Run("answer version", func(t *testing.T) {
		for _, v := range []byte{0, protoVersion + 1, 0xff} {
			b := okAns.put(nil, magicPullAck)
			b[4] = v
			var a answer
			wantBadPack(t, "version", a.decode(b, magicPullAck), "version")
		}
	})
	t.Run("answer message too long", func(t *testing.T) {
		for _, n := range []uint32{maxStatusMsg + 1, 1 << 31, ^uint32(0)} {
			b := (&answer{code: wire.CodeInternal, msgLen: n}).put(nil, magicPushAck)
			var a answer
			wantBadPack(t, "msgLen", a.decode(b, magicPushAck), "message")
		}
	})
	t.Run("answer code and message disagree", func(t *testing.T) {
		for _, in := range []answer{
			{code: wire.CodeOK, msgLen: 1},            // success with an error message
			{code: wire.CodeOK, msgLen: maxStatusMsg}, // idem
			{code: wire.CodeNotFound, msgLen: 0},      // an error without one
			{code: wire.Code(999), msgLen: 0},
		} {
			b := in.put(nil, magicPullAck)
			var a answer
			wantBadPack(t, "code/msgLen", a.decode(b, magicPullAck), "code")
		}
	})
}

func TestErrAnswer(t *testing.T) {
	decode := func(t *testing.T, b []byte) (answer, string) {
		t.Helper()
		if len(b) < answerSize {
			t.Fatalf("errAnswer: %d bytes", len(b))
		}
		var a answer
		if err := a.decode(b[:answerSize], magicPushAck); err != nil {
			t.Fatalf("errAnswer does not decode: %v", err)
		}
		msg := string(b[answerSize:])
		if int(a.msgLen) != len(msg) {
			t.Fatalf("msgLen %d, but %d bytes follow", a.msgLen, len(msg))
		}
		return a, msg
	}

	a, msg := decode(t, errAnswer(magicPushAck, ErrNotFound))
	if a.code != wire.CodeNotFound || msg != ErrNotFound.Error() {
		t.Fatalf("not found: code %d, %q", a.code, msg)
	}
	if !errors.Is(a.code.Err(), pdc.ErrNotFound) {
		t.Fatalf("code %d does not map back to pdc.ErrNotFound", a.code)
	}

	long := errors.New(strings.Repeat("é", maxStatusMsg)) // twice the limit in bytes
	a, msg = decode(t, errAnswer(magicPushAck, long))
	if len(msg) != maxStatusMsg || a.code != wire.CodeInternal || !strings.HasPrefix(long.Error(), msg) {
		t.Fatalf("long: code %d, %d bytes", a.code, len(msg))
	}

	a, msg = decode(t, errAnswer(magicPushAck, errors.New("")))
	if msg == "" || a.code == wire.CodeOK {
		t.Fatalf("empty message: code %d, %q; an error answer needs a message", a.code, msg)
	}
}

// FuzzDecodeHeaders feeds arbitrary headers to request.decode and
// answer.decode under every magic. Neither may panic; each accepts exactly
// the headers with its magic and version (and, for an answer, a bounded
// message length that agrees with the code); and an accepted header is
// canonical: encoding what was decoded gives back the same bytes, except
// the bytes the decoders do not read. Those are bytes 5..7 of an answer
// and 6..7 of a request; byte 5 of a request carries flags (flagWait),
// which the callers read from the raw header, so the request is
// re-encoded with putFlags and that byte must survive. Nonzero reserved
// bytes are accepted (room for later flags): canonical means equal once
// they are cleared.
func FuzzDecodeHeaders(f *testing.F) {
	r := sampleRequest()
	for i, m := range requestMagics {
		f.Add(r.putFlags(nil, m, byte(i)), uint8(i))
	}
	f.Add(r.putFlags(nil, magicPull, flagWait), uint8(0))
	f.Add(append(r.put(nil, magicPull), 0xff, 0xff), uint8(0))
	for i, m := range answerMagics {
		f.Add((&answer{code: wire.CodeInvalid, msgLen: 9, off: 3, size: 4}).put(nil, m), uint8(i+3))
		f.Add((&answer{size: 1 << 30}).put(nil, m), uint8(i+3))
	}
	f.Add([]byte{}, uint8(0))
	f.Add(bytes.Repeat([]byte{0xff}, 48), uint8(5))

	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		magic := allMagics[int(which)%len(allMagics)]
		headerOK := len(data) >= 5 && string(data[:4]) == magic && data[4] == protoVersion

		var rb [requestSize]byte
		copy(rb[:], data)
		var req request
		err := req.decode(rb[:], magic)
		if (err == nil) != headerOK {
			t.Fatalf("request %x under %q: err %v, want accepted %v", rb, magic, err, headerOK)
		}
		if err != nil && !errors.Is(err, ErrBadPack) {
			t.Fatalf("request rejected with %v, not ErrBadPack", err)
		}
		if err == nil {
			want := rb
			want[6], want[7] = 0, 0
			if got := req.putFlags(nil, magic, rb[5]); !bytes.Equal(got, want[:]) {
				t.Fatalf("request not canonical:\n in  %x\n out %x", want, got)
			}
		}

		var ab [answerSize]byte
		copy(ab[:], data)
		code := wire.Code(binary.LittleEndian.Uint32(ab[8:]))
		msgLen := binary.LittleEndian.Uint32(ab[12:])
		answerOK := headerOK && msgLen <= maxStatusMsg && (code == wire.CodeOK) == (msgLen == 0)
		var ans answer
		err = ans.decode(ab[:], magic)
		if (err == nil) != answerOK {
			t.Fatalf("answer %x under %q: err %v, want accepted %v", ab, magic, err, answerOK)
		}
		if err != nil && !errors.Is(err, ErrBadPack) {
			t.Fatalf("answer rejected with %v, not ErrBadPack", err)
		}
		if err == nil {
			want := ab
			want[5], want[6], want[7] = 0, 0, 0
			if got := ans.put(nil, magic); !bytes.Equal(got, want[:]) {
				t.Fatalf("answer not canonical:\n in  %x\n out %x", want, got)
			}
		}
	})
}
