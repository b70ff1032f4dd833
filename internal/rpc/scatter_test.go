package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/pdcgo/pdc"

	"github.com/pdcgo/pdc/internal/wire"
)

const methodOwned wire.Method = 110

// An owned payload is the handler's: it may keep it after answering, and
// gives it back to the pool itself.
func withOwned(kept chan<- *Request) func(*testServer) {
	return func(ts *testServer) {
		ts.Handle(methodOwned, func(ctx context.Context, req *Request) (*Response, error) {
			kept <- req
			return &Response{Header: []byte("ok")}, nil
		}, OwnsPayload())
	}
}

func TestCallIntoScatters(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	payload := make([]byte, 3<<20+17)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	// Segments of every kind of size, an empty one among them.
	cuts := []int{0, 1, 1, 4096, 1 << 20, 3 << 20, len(payload)}
	into := make([][]byte, len(cuts)-1)
	for i := range into {
		into[i] = make([]byte, cuts[i+1]-cuts[i])
	}
	r, err := c.CallInto(ctx10(t), methodEcho, []byte("h"), [][]byte{payload}, into)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Scattered || r.Payload != nil {
		t.Fatalf("reply not scattered (Scattered %v, %d payload bytes)", r.Scattered, len(r.Payload))
	}
	if got := bytes.Join(into, nil); !bytes.Equal(got, payload) {
		t.Fatal("scattered payload differs from what was sent")
	}

	// A payload of another length comes whole, the buffers untouched.
	small := []byte("not the length the caller expected")
	into = [][]byte{make([]byte, 4), make([]byte, 4)}
	r, err = c.CallInto(ctx10(t), methodEcho, nil, [][]byte{small}, into)
	if err != nil {
		t.Fatal(err)
	}
	if r.Scattered || !bytes.Equal(r.Payload, small) {
		t.Fatalf("mismatched length: Scattered %v, payload %q", r.Scattered, r.Payload)
	}
	if !bytes.Equal(bytes.Join(into, nil), make([]byte, 8)) {
		t.Fatal("buffers of a mismatched reply were written")
	}
}

func TestOwnsPayloadKeepsPayload(t *testing.T) {
	kept := make(chan *Request, 4)
	ts := startServer(t, "unix", ServerConfig{}, withOwned(kept))
	c := dial(t, ts.addr, DialOptions{})
	var held []*Request
	for i := range 3 {
		p := bytes.Repeat([]byte{byte(i + 1)}, 256<<10)
		if _, err := c.Call(ctx10(t), methodOwned, nil, [][]byte{p}, nil); err != nil {
			t.Fatal(err)
		}
		held = append(held, <-kept)
	}
	// Each kept payload still holds its own bytes: the server did not hand
	// one buffer to the next request.
	for i, req := range held {
		if !bytes.Equal(req.Payload, bytes.Repeat([]byte{byte(i + 1)}, 256<<10)) {
			t.Fatalf("payload %d changed after its handler returned", i)
		}
		req.Release()
	}
}

const methodHere wire.Method = 111

func withHere(ts *testServer) {
	ts.Handle(methodHere, func(ctx context.Context, req *Request) (*Response, error) {
		defer req.Release()
		return &Response{Header: []byte("elsewhere"), Payload: [][]byte{bytes.Clone(req.Payload)}}, nil
	}, TryHere(func(ctx context.Context, req *Request) (*Response, error) {
		switch string(req.Header) {
		case "decline":
			return nil, ErrElsewhere
		case "decline late":
			_, _ = req.Body.Read(make([]byte, 10))
			return nil, ErrElsewhere
		case "panic":
			panic("here handler bug")
		case "stream":
			// Streaming an answer needs a goroutine of its own.
			return nil, req.Chunk(ctx, []byte("chunk"))
		case "half":
			// What the handler leaves unread is skipped.
			b := make([]byte, req.BodyLen/2)
			if _, err := io.ReadFull(req.Body, b); err != nil {
				return nil, err
			}
			return &Response{Header: []byte("half"), Payload: [][]byte{b}}, nil
		}
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		if int64(len(b)) != req.BodyLen {
			return nil, fmt.Errorf("read %d bytes of a %d-byte body", len(b), req.BodyLen)
		}
		return &Response{Header: []byte("here"), Payload: [][]byte{b}}, nil
	}))
}

// A request tried on the reading goroutine reads its payload as it arrives
// and is answered there, or is handed, payload intact, to its handler on a
// goroutine of its own. A panic there, a handler that declines after
// reading, or one that reads half, is an error or an answer like any
// other, and the connection goes on serving.
func TestTryHere(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{}, withHere)
	c := dial(t, ts.addr, DialOptions{})
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for _, tc := range []struct {
		hdr, want  string
		send, back []byte
	}{
		{"answer", "here", payload, payload},
		{"decline", "elsewhere", payload, payload},
		{"half", "half", payload, payload[:len(payload)/2]},
		{"answer", "here", payload[:1], payload[:1]},
		{"answer", "here", nil, nil},
		{"decline", "elsewhere", nil, nil},
		{"answer", "here", payload, payload},
	} {
		r, err := c.Call(ctx10(t), methodHere, []byte(tc.hdr), [][]byte{tc.send}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.hdr, err)
		}
		if string(r.Header) != tc.want || !bytes.Equal(r.Payload, tc.back) {
			t.Fatalf("%s: answered %q with %d bytes (equal %v), want %q with %d",
				tc.hdr, r.Header, len(r.Payload), bytes.Equal(r.Payload, tc.back), tc.want, len(tc.back))
		}
	}
	for _, hdr := range []string{"panic", "decline late", "stream"} {
		if _, err := c.Call(ctx10(t), methodHere, []byte(hdr), [][]byte{payload}, nil); !errors.Is(err, pdc.ErrInternal) {
			t.Fatalf("%s: got %v, want ErrInternal", hdr, err)
		}
	}
	r, err := c.Call(ctx10(t), methodHere, []byte("answer"), [][]byte{payload}, nil)
	if err != nil || string(r.Header) != "here" || !bytes.Equal(r.Payload, payload) {
		t.Fatalf("after the errors: %q, %v", r.Header, err)
	}
}

// A client that stops sending part way through a payload read on the
// reading goroutine loses its connection after the stall timeout, instead
// of holding the handler (and what it has locked) for good.
func TestHereBodyStall(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{StallTimeout: 200 * time.Millisecond}, withHere)
	nc, r := rawConn(t, ts.addr)
	f := wire.Frame{Method: methodHere, ID: 9, HeaderLen: 6, PayloadLen: 1 << 20}
	msg := append(f.Append(nil), "answer"...)
	msg = append(msg, make([]byte, 1000)...)
	if _, err := nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	if _, err := r.next(); err == nil {
		t.Fatal("the server answered a request whose payload never came")
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server kept the connection open: %v", err)
	}
	// Others are served meanwhile and after.
	c := dial(t, ts.addr, DialOptions{})
	if _, err := c.Call(ctx10(t), methodHere, []byte("answer"), [][]byte{[]byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
}
