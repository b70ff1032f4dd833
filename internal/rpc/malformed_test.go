package rpc

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// rawConn connects and completes the handshake by hand, leaving a raw
// socket to send arbitrary bytes on.
func rawConn(t *testing.T, addr string) (net.Conn, *frameReader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	r := newFrameReader(nc, wire.Limits{})
	if _, err := r.next(); err != nil {
		t.Fatal(err)
	}
	if err := r.discard(uint64(r.lastHeaderLen())); err != nil {
		t.Fatal(err)
	}
	f := wire.Frame{Method: wire.MethodAuth}
	if _, err := nc.Write(f.Append(nil)); err != nil {
		t.Fatal(err)
	}
	if f, err = r.next(); err != nil || f.Flags&wire.FlagError != 0 {
		t.Fatalf("auth reply %+v, %v", f, err)
	}
	if err := r.discard(uint64(f.HeaderLen) + f.PayloadLen); err != nil {
		t.Fatal(err)
	}
	return nc, r
}

func validFrame(mutate func(f *wire.Frame)) []byte {
	f := wire.Frame{Method: methodEcho, ID: 7}
	mutate(&f)
	return f.Append(nil)
}

func TestMalformedFramesCloseOnlyThatConnection(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{Limits: wire.Limits{MaxHeader: 1 << 10, MaxPayload: 1 << 20}})
	good := dial(t, ts.addr, DialOptions{})

	badMagic := validFrame(func(*wire.Frame) {})
	badMagic[0] = 'X'
	badCRC := validFrame(func(*wire.Frame) {})
	badCRC[5] ^= 1
	cases := []struct {
		name  string
		bytes []byte
		log   string
	}{
		{"bad magic", badMagic, "bad frame magic"},
		{"bad checksum", badCRC, "checksum"},
		{"garbage", []byte(strings.Repeat("GET / HTTP/1.1\r\n", 8)), "bad frame magic"},
		{"oversized header", validFrame(func(f *wire.Frame) { f.HeaderLen = 1<<10 + 1 }), "exceeds the limit"},
		{"oversized payload", validFrame(func(f *wire.Frame) { f.PayloadLen = 1 << 62 }), "exceeds the limit"},
		{"unknown flags", validFrame(func(f *wire.Frame) { f.Flags = 0x80 }), "unknown frame flags"},
		{"response from client", validFrame(func(f *wire.Frame) { f.Flags = wire.FlagResponse }), "response frame"},
		{"truncated", validFrame(func(*wire.Frame) {})[:17], ""},
		{"truncated body", validFrame(func(f *wire.Frame) { f.PayloadLen = 100 }), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc, r := rawConn(t, ts.addr)
			if _, err := nc.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(tc.name, "truncated") {
				nc.(*net.TCPConn).CloseWrite()
			}
			if f, err := r.next(); !errors.Is(err, io.EOF) && !isConnReset(err) {
				t.Fatalf("got frame %+v, err %v; want the connection closed", f, err)
			}
			if _, err := good.Call(ctx10(t), methodEcho, nil, [][]byte{[]byte("still here")}, nil); err != nil {
				t.Fatalf("other connection broken: %v", err)
			}
			if tc.log != "" && !strings.Contains(ts.logs.String(), tc.log) {
				t.Fatalf("log does not say %q:\n%s", tc.log, ts.logs.String())
			}
		})
	}
}

func TestUnknownVersionGetsErrorReply(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	nc, r := rawConn(t, ts.addr)
	frame := validFrame(func(f *wire.Frame) { f.Version = 9; f.HeaderLen = 3; f.PayloadLen = 2 })
	if _, err := nc.Write(append(frame, "hdrpl"...)); err != nil {
		t.Fatal(err)
	}
	f, err := r.next()
	if err != nil || f.Flags != wire.FlagResponse|wire.FlagError || f.ID != 7 {
		t.Fatalf("got %+v, %v; want an error reply to id 7", f, err)
	}
	hdr, _, err := r.body(f)
	if err != nil {
		t.Fatal(err)
	}
	var eb wire.ErrorBody
	if err := eb.Unmarshal(hdr); err != nil {
		t.Fatal(err)
	}
	if eb.Code != wire.CodeVersion || !strings.Contains(eb.Message, "version 9") {
		t.Fatalf("got %+v, want CodeVersion naming version 9", eb)
	}
	if !errors.Is(eb.Code.Err(), pdc.ErrVersion) {
		t.Fatal("CodeVersion does not map to ErrVersion")
	}
	// The stream stays in sync: a valid request on the same socket works.
	ping := wire.Frame{Method: methodEcho, ID: 8, PayloadLen: 4}
	if _, err := nc.Write(append(ping.Append(nil), "ping"...)); err != nil {
		t.Fatal(err)
	}
	f, err = r.next()
	if err != nil || f.ID != 8 || f.Flags != wire.FlagResponse {
		t.Fatalf("got %+v, %v", f, err)
	}
	_, payload, err := r.body(f)
	if err != nil || string(payload) != "ping" {
		t.Fatalf("got %q, %v", payload, err)
	}
}
