package wire_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// maxTimeout is the largest timeout DecodeFrame accepts.
const maxTimeout = time.Duration(1 << 62)

// reseal recomputes the CRC-32C of a frame prefix (bytes 0..19 and 24..39,
// stored at 20..23), so a test can build frames the encoder would not write.
func reseal(b []byte) []byte {
	tab := crc32.MakeTable(crc32.Castagnoli)
	c := crc32.Update(0, tab, b[0:20])
	c = crc32.Update(c, tab, b[24:40])
	binary.LittleEndian.PutUint32(b[20:], c)
	return b
}

// rawFrame builds a sealed 40-byte prefix field by field, independently of
// Frame.Append.
func rawFrame(version, flags uint8, method uint32, id uint64, hdr uint32, payload, timeout uint64) []byte {
	b := make([]byte, wire.FrameSize)
	b[0], b[1], b[2], b[3] = 'P', 'D', version, flags
	binary.LittleEndian.PutUint32(b[4:], method)
	binary.LittleEndian.PutUint64(b[8:], id)
	binary.LittleEndian.PutUint32(b[16:], hdr)
	binary.LittleEndian.PutUint64(b[24:], payload)
	binary.LittleEndian.PutUint64(b[32:], timeout)
	return reseal(b)
}

// validFrames are frames that must survive Append then DecodeFrame
// unchanged. Every one sets Version, which Append writes as given.
var validFrames = []wire.Frame{
	{Version: 1},
	{Version: 1, Method: wire.MethodPing, ID: 1, HeaderLen: 3, PayloadLen: 5},
	{Version: 1, Flags: wire.FlagResponse, Method: wire.MethodStatus, ID: 42, HeaderLen: 100},
	{Version: 1, Flags: wire.FlagResponse | wire.FlagError, Method: wire.MethodAuth, ID: 7, HeaderLen: 12},
	{Version: 1, Flags: wire.FlagCancel, Method: wire.MethodPing, ID: math.MaxUint64},
	{Version: 2, Method: 1000, ID: 1 << 40, HeaderLen: math.MaxUint32, PayloadLen: 5 << 30},
	{Version: 255, Method: math.MaxUint32, PayloadLen: math.MaxUint64},
	{Version: 1, PayloadLen: 1<<32 + 1, Timeout: time.Nanosecond},
	{Version: 1, Method: wire.MethodRegister, Timeout: 1500 * time.Millisecond},
	{Version: 1, Flags: wire.FlagResponse, Timeout: time.Hour},
	{Version: 1, Timeout: maxTimeout},
	{Version: 1, Flags: wire.FlagCancel, Timeout: 3 * time.Second},
	{Version: 1, Flags: wire.FlagResponse | wire.FlagMore, Method: wire.MethodStatus, ID: 3, HeaderLen: 9, PayloadLen: 1 << 20},
	{Version: 1, Flags: wire.FlagTrace, Method: wire.MethodStatus, ID: 4, HeaderLen: wire.TraceSize, PayloadLen: 7},
}

func TestFrameRoundTrip(t *testing.T) {
	for _, f := range validFrames {
		b := f.Append(nil)
		if len(b) != wire.FrameSize {
			t.Fatalf("%+v: Append wrote %d bytes, want %d", f, len(b), wire.FrameSize)
		}
		got, err := wire.DecodeFrame(b)
		if err != nil {
			t.Fatalf("%+v: DecodeFrame: %v", f, err)
		}
		if got != f {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, f)
		}
		// Bytes after the prefix are not the prefix's business.
		got, err = wire.DecodeFrame(append(b, "trailing header bytes"...))
		if err != nil || got != f {
			t.Fatalf("%+v with trailing bytes: got %+v, %v", f, got, err)
		}
	}
}

func TestFrameAppendKeepsDst(t *testing.T) {
	f := wire.Frame{Version: 1, Method: wire.MethodPing, ID: 9}
	dst := []byte("prefix")
	b := f.Append(dst)
	if len(b) != len("prefix")+wire.FrameSize || string(b[:6]) != "prefix" {
		t.Fatalf("Append(%q) = %q", "prefix", b)
	}
	if !bytes.Equal(b[6:], f.Append(nil)) {
		t.Fatalf("Append after a prefix wrote different bytes")
	}
}

func TestFrameLayout(t *testing.T) {
	f := wire.Frame{Version: 1, Flags: wire.FlagResponse | wire.FlagError, Method: 0x01020304,
		ID: 0x1112131415161718, HeaderLen: 0x21222324, PayloadLen: 0x3132333435363738, Timeout: 0x0102030405060708}
	b := f.Append(nil)
	want := rawFrame(1, 3, 0x01020304, 0x1112131415161718, 0x21222324, 0x3132333435363738, 0x0102030405060708)
	if !bytes.Equal(b, want) {
		t.Fatalf("layout:\n got % x\nwant % x", b, want)
	}
}

func TestFrameAppendNormalises(t *testing.T) {
	cases := []struct {
		name string
		in   wire.Frame
		want wire.Frame
	}{
		{"version 0 is written as Version", wire.Frame{ID: 5}, wire.Frame{Version: wire.Version, ID: 5}},
		{"negative timeout is already expired, not none", wire.Frame{Version: 1, Timeout: -time.Second}, wire.Frame{Version: 1, Timeout: 1}},
		{"min duration", wire.Frame{Version: 1, Timeout: math.MinInt64}, wire.Frame{Version: 1, Timeout: 1}},
		{"timeout beyond range is clamped", wire.Frame{Version: 1, Timeout: maxTimeout + 1}, wire.Frame{Version: 1, Timeout: maxTimeout}},
		{"max duration is clamped", wire.Frame{Version: 1, Timeout: math.MaxInt64}, wire.Frame{Version: 1, Timeout: maxTimeout}},
	}
	for _, c := range cases {
		got, err := wire.DecodeFrame(c.in.Append(nil))
		if err != nil {
			t.Fatalf("%s: DecodeFrame(Append(%+v)): %v", c.name, c.in, err)
		}
		if got != c.want {
			t.Fatalf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

// Regression: a caller whose deadline lies beyond 1<<62 ns (e.g.
// context.WithTimeout(ctx, math.MaxInt64)) made Append write a timeout
// that DecodeFrame refuses, so the server closed the connection.
func TestFrameAppendFarTimeoutDecodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), math.MaxInt64)
	defer cancel()
	d, _ := ctx.Deadline()
	for _, timeout := range []time.Duration{time.Until(d), 1<<62 + 1, math.MaxInt64} {
		f := wire.Frame{Version: 1, Method: wire.MethodPing, ID: 1, Timeout: timeout}
		got, err := wire.DecodeFrame(f.Append(nil))
		if err != nil {
			t.Fatalf("timeout %d: %v", timeout, err)
		}
		if got.Timeout != maxTimeout {
			t.Fatalf("timeout %d decoded as %d, want %d", timeout, got.Timeout, maxTimeout)
		}
	}
}

func TestDecodeFrameRejects(t *testing.T) {
	good := rawFrame(1, 0, 3, 1, 0, 0, 0)
	if _, err := wire.DecodeFrame(good); err != nil {
		t.Fatalf("baseline frame: %v", err)
	}
	with := func(edit func(b []byte)) []byte {
		b := bytes.Clone(good)
		edit(b)
		return b
	}
	const (
		resp   = uint8(wire.FlagResponse)
		errf   = uint8(wire.FlagError)
		cancel = uint8(wire.FlagCancel)
	)
	cases := []struct {
		name string
		b    []byte
		msg  string // substring of the error
	}{
		{"nil", nil, "0 bytes"},
		{"empty", []byte{}, "0 bytes"},
		{"one byte short", good[:wire.FrameSize-1], "39 bytes"},
		{"bad first magic byte", reseal(with(func(b []byte) { b[0] = 'X' })), "magic"},
		{"bad second magic byte", reseal(with(func(b []byte) { b[1] = 'd' })), "magic"},
		{"zeros", make([]byte, wire.FrameSize), "magic"},
		{"bad crc", with(func(b []byte) { b[20] ^= 1 }), "checksum"},
		{"unsealed edit", with(func(b []byte) { b[16] = 1 }), "checksum"},
		{"unknown flag 1<<5", rawFrame(1, 1<<5, 3, 1, 0, 0, 0), "unknown frame flags"},
		{"trace flag without room for the id", rawFrame(1, 1<<4, 3, 1, 0, 0, 0), "trace flag"},
		{"unknown flag 1<<7", rawFrame(1, 1<<7, 3, 1, 0, 0, 0), "unknown frame flags"},
		{"unknown flag with response", rawFrame(1, resp|1<<5, 3, 1, 0, 0, 0), "unknown frame flags"},
		{"all flags", rawFrame(1, 0xff, 3, 1, 0, 0, 0), "unknown frame flags"},
		{"cancel with header", rawFrame(1, cancel, 3, 1, 1, 0, 0), "cancel frame"},
		{"cancel with payload", rawFrame(1, cancel, 3, 1, 0, 1, 0), "cancel frame"},
		{"cancel with large payload", rawFrame(1, cancel, 3, 1, 0, 1<<40, 0), "cancel frame"},
		{"cancel response", rawFrame(1, cancel|resp, 3, 1, 0, 0, 0), "cancel frame"},
		{"cancel error", rawFrame(1, cancel|errf, 3, 1, 0, 0, 0), "cancel frame"},
		{"cancel error response", rawFrame(1, cancel|errf|resp, 3, 1, 0, 0, 0), "cancel frame"},
		{"error on a request", rawFrame(1, errf, 3, 1, 4, 0, 0), "error flag on a request"},
		{"more on a request", rawFrame(1, uint8(wire.FlagMore), 3, 1, 0, 0, 0), "more flag"},
		{"more on an error", rawFrame(1, uint8(wire.FlagMore)|errf|resp, 3, 1, 0, 0, 0), "more flag"},
		{"timeout just out of range", rawFrame(1, 0, 3, 1, 0, 0, 1<<62+1), "timeout"},
		{"timeout negative as int64", rawFrame(1, 0, 3, 1, 0, 0, math.MaxUint64), "timeout"},
	}
	for _, c := range cases {
		f, err := wire.DecodeFrame(c.b)
		if err == nil {
			t.Fatalf("%s: DecodeFrame accepted % x as %+v", c.name, c.b, f)
		}
		if !errors.Is(err, pdc.ErrProtocol) {
			t.Fatalf("%s: error %q does not wrap pdc.ErrProtocol", c.name, err)
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Fatalf("%s: error %q does not mention %q", c.name, err, c.msg)
		}
		if f != (wire.Frame{}) {
			t.Fatalf("%s: error with a non-zero frame %+v", c.name, f)
		}
	}
}

// Every single-bit error outside the magic is caught by the CRC.
func TestDecodeFrameCRCCoversEveryBit(t *testing.T) {
	good := (&wire.Frame{Version: 1, Flags: wire.FlagResponse, Method: 4, ID: 77, HeaderLen: 10, PayloadLen: 1 << 33, Timeout: time.Second}).Append(nil)
	for i := 2; i < wire.FrameSize; i++ {
		for bit := range 8 {
			b := bytes.Clone(good)
			b[i] ^= 1 << bit
			if _, err := wire.DecodeFrame(b); !errors.Is(err, pdc.ErrProtocol) || !strings.Contains(err.Error(), "checksum") {
				t.Fatalf("byte %d bit %d flipped: got %v, want a checksum error", i, bit, err)
			}
		}
	}
}

// Every flag combination either round-trips or is refused; exactly the
// documented ones are valid.
func TestFrameFlagCombinations(t *testing.T) {
	valid := map[wire.Flags]bool{
		0:                                  true,
		wire.FlagResponse:                  true,
		wire.FlagResponse | wire.FlagError: true,
		wire.FlagCancel:                    true,
		wire.FlagResponse | wire.FlagMore:  true,
	}
	for fl := range 256 {
		f := wire.Frame{Version: 1, Flags: wire.Flags(fl), Method: 3, ID: 1}
		got, err := wire.DecodeFrame(f.Append(nil))
		if valid[f.Flags] {
			if err != nil || got != f {
				t.Fatalf("flags %#02x: got %+v, %v", fl, got, err)
			}
		} else if !errors.Is(err, pdc.ErrProtocol) {
			t.Fatalf("flags %#02x: got %+v, %v; want pdc.ErrProtocol", fl, got, err)
		}
	}
}

func TestLimitsCheck(t *testing.T) {
	cases := []struct {
		name    string
		l       wire.Limits
		hdr     uint32
		payload uint64
		tooBig  string // "" when within limits, else a substring of the error
	}{
		{"zero frame", wire.Limits{}, 0, 0, ""},
		{"default header at limit", wire.Limits{}, wire.DefaultMaxHeader, 0, ""},
		{"default header over", wire.Limits{}, wire.DefaultMaxHeader + 1, 0, "header of 1048577 bytes exceeds the limit of 1048576"},
		{"default payload at limit", wire.Limits{}, 0, wire.DefaultMaxPayload, ""},
		{"default payload over", wire.Limits{}, 0, wire.DefaultMaxPayload + 1, "payload of 1073741825 bytes exceeds the limit of 1073741824"},
		{"default payload over 4GiB", wire.Limits{}, 0, 5 << 30, "payload"},
		{"default max header", wire.Limits{}, math.MaxUint32, 0, "header"},
		{"custom header at limit", wire.Limits{MaxHeader: 10}, 10, wire.DefaultMaxPayload, ""},
		{"custom header over", wire.Limits{MaxHeader: 10}, 11, 0, "limit of 10"},
		{"custom header keeps default payload", wire.Limits{MaxHeader: 10}, 0, wire.DefaultMaxPayload + 1, "payload"},
		{"custom payload beyond 4GiB", wire.Limits{MaxPayload: 8 << 30}, 0, 8 << 30, ""},
		{"custom payload over", wire.Limits{MaxPayload: 8 << 30}, 0, 8<<30 + 1, "payload"},
		{"custom payload keeps default header", wire.Limits{MaxPayload: 1}, wire.DefaultMaxHeader + 1, 0, "header"},
		{"both custom, both over", wire.Limits{MaxHeader: 1, MaxPayload: 1}, 2, 2, "header"},
		{"max payload", wire.Limits{MaxPayload: math.MaxUint64}, 0, math.MaxUint64, ""},
	}
	for _, c := range cases {
		err := c.l.Check(wire.Frame{HeaderLen: c.hdr, PayloadLen: c.payload})
		if c.tooBig == "" {
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, pdc.ErrTooLarge) {
			t.Fatalf("%s: got %v, want pdc.ErrTooLarge", c.name, err)
		}
		if !strings.Contains(err.Error(), c.tooBig) {
			t.Fatalf("%s: error %q does not mention %q", c.name, err, c.tooBig)
		}
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	if got := (wire.Limits{}).WithDefaults(); got != (wire.Limits{MaxHeader: wire.DefaultMaxHeader, MaxPayload: wire.DefaultMaxPayload}) {
		t.Fatalf("zero limits: %+v", got)
	}
	if got := (wire.Limits{MaxHeader: 5, MaxPayload: 6}).WithDefaults(); got != (wire.Limits{MaxHeader: 5, MaxPayload: 6}) {
		t.Fatalf("set limits changed: %+v", got)
	}
}

func TestMethodString(t *testing.T) {
	cases := map[wire.Method]string{
		wire.MethodHello: "hello", wire.MethodAuth: "auth", wire.MethodPing: "ping",
		wire.MethodStatus: "status", wire.MethodRegister: "register", wire.MethodShutdown: "shutdown",
		wire.MethodObjMembers: "obj_members",
		0:                     "method(0)", 99: "method(99)", math.MaxUint32: "method(4294967295)",
	}
	for m, want := range cases {
		if got := m.String(); got != want {
			t.Fatalf("Method(%d).String() = %q, want %q", uint32(m), got, want)
		}
	}
	// Method numbers are the protocol.
	if wire.MethodObjMembers != 32 {
		t.Fatalf("MethodObjMembers is %d, was 32", wire.MethodObjMembers)
	}
}

// FuzzDecodeFrame: decoding never panics; every error is a protocol error;
// a decoded frame re-encodes to the same 40 bytes, except that Append writes
// version 0 as Version (which changes byte 2 and so the CRC).
func FuzzDecodeFrame(f *testing.F) {
	for _, fr := range validFrames {
		f.Add(fr.Append(nil))
	}
	f.Add(rawFrame(0, 0, 3, 1, 0, 0, 0))
	f.Add(rawFrame(1, uint8(wire.FlagCancel), 3, 1, 1, 0, 0))
	f.Add(rawFrame(1, 0, 3, 1, 0, 0, 1<<62+1))
	f.Add([]byte("PD"))
	f.Add(make([]byte, wire.FrameSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := wire.DecodeFrame(b)
		if err != nil {
			if !errors.Is(err, pdc.ErrProtocol) {
				t.Fatalf("error %q does not wrap pdc.ErrProtocol", err)
			}
			return
		}
		_ = wire.Limits{}.Check(fr)
		if fr.Timeout < 0 || fr.Timeout > maxTimeout {
			t.Fatalf("decoded timeout %d out of range", fr.Timeout)
		}
		out := fr.Append(nil)
		if fr.Version != 0 {
			if !bytes.Equal(out, b[:wire.FrameSize]) {
				t.Fatalf("re-encoding differs:\n in % x\nout % x", b[:wire.FrameSize], out)
			}
			return
		}
		if out[2] != wire.Version {
			t.Fatalf("version 0 re-encoded as %d, want %d", out[2], wire.Version)
		}
		in := bytes.Clone(b[:wire.FrameSize])
		in[2] = wire.Version
		if !bytes.Equal(out, reseal(in)) {
			t.Fatalf("re-encoding differs beyond the version:\n in % x\nout % x", in, out)
		}
		again, err := wire.DecodeFrame(out)
		fr.Version = wire.Version
		if err != nil || again != fr {
			t.Fatalf("re-decoded %+v, %v; want %+v", again, err, fr)
		}
	})
}

// FuzzFrameAppend: every frame Append writes with a valid flag combination
// decodes, to the frame given after Append's documented normalisation
// (version 0 as Version, a negative timeout as 1ns, a timeout beyond
// DecodeFrame's range as the largest it accepts).
func FuzzFrameAppend(f *testing.F) {
	for _, fr := range validFrames {
		f.Add(fr.Version, uint8(fr.Flags), uint32(fr.Method), fr.ID, fr.HeaderLen, fr.PayloadLen, int64(fr.Timeout))
	}
	f.Add(uint8(1), uint8(0), uint32(3), uint64(1), uint32(0), uint64(0), int64(math.MaxInt64))
	f.Add(uint8(0), uint8(0), uint32(3), uint64(1), uint32(0), uint64(0), int64(-1))
	f.Fuzz(func(t *testing.T, version, flags uint8, method uint32, id uint64, hdr uint32, payload uint64, timeout int64) {
		fr := wire.Frame{Version: version, Flags: wire.Flags(flags), Method: wire.Method(method), ID: id,
			HeaderLen: hdr, PayloadLen: payload, Timeout: time.Duration(timeout)}
		got, err := wire.DecodeFrame(fr.Append(nil))
		valid := fr.Flags == 0 || fr.Flags == wire.FlagResponse || fr.Flags == wire.FlagResponse|wire.FlagError ||
			fr.Flags == wire.FlagResponse|wire.FlagMore || (fr.Flags == wire.FlagCancel && hdr == 0 && payload == 0) ||
			(fr.Flags == wire.FlagTrace && hdr >= wire.TraceSize)
		if !valid {
			if !errors.Is(err, pdc.ErrProtocol) {
				t.Fatalf("%+v: got %+v, %v; want pdc.ErrProtocol", fr, got, err)
			}
			return
		}
		want := fr
		if want.Version == 0 {
			want.Version = wire.Version
		}
		switch {
		case want.Timeout < 0:
			want.Timeout = 1
		case want.Timeout > maxTimeout:
			want.Timeout = maxTimeout
		}
		if err != nil || got != want {
			t.Fatalf("Append(%+v) decoded as %+v, %v; want %+v", fr, got, err, want)
		}
	})
}

// A traced request's id rides at the front of its header, counted in
// HeaderLen, and comes back off it; the flag is refused on anything but a
// request whose header can hold the id.
func TestFrameTrace(t *testing.T) {
	f := wire.Frame{Method: wire.MethodStatus, ID: 9, Trace: 0xfeedfacecafebeef}
	hdr := []byte("header")
	f.SetLens(len(hdr), 3)
	b := append(f.AppendTrace(f.Append(nil)), hdr...)
	got, err := wire.DecodeFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Flags != wire.FlagTrace || got.HeaderLen != uint32(len(hdr)+wire.TraceSize) || got.Trace != 0 {
		t.Fatalf("decoded %+v", got)
	}
	got.TakeTrace((*[wire.TraceSize]byte)(b[wire.FrameSize:]))
	if rest := b[wire.FrameSize+wire.TraceSize:]; got.Trace != f.Trace || got.HeaderLen != uint32(len(rest)) || string(rest) != "header" {
		t.Fatalf("taken: trace %#x, header %d bytes %q", got.Trace, got.HeaderLen, rest)
	}
	// No trace: no flag, no bytes.
	plain := wire.Frame{Method: wire.MethodStatus, ID: 9}
	plain.SetLens(len(hdr), 0)
	if plain.Flags != 0 || plain.HeaderLen != uint32(len(hdr)) || len(plain.AppendTrace(nil)) != 0 {
		t.Fatalf("untraced frame %+v", plain)
	}
	for _, bad := range []wire.Frame{
		{Version: 1, Flags: wire.FlagTrace, Method: 3, ID: 1, HeaderLen: wire.TraceSize - 1},
		{Version: 1, Flags: wire.FlagTrace | wire.FlagResponse, Method: 3, ID: 1, HeaderLen: 20},
		{Version: 1, Flags: wire.FlagTrace | wire.FlagCancel, Method: 3, ID: 1},
	} {
		if _, err := wire.DecodeFrame(bad.Append(nil)); !errors.Is(err, pdc.ErrProtocol) {
			t.Fatalf("%+v: got %v, want pdc.ErrProtocol", bad, err)
		}
	}
}
