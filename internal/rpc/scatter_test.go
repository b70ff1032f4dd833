package rpc

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/pdcgo/pdc"

	"github.com/pdcgo/pdc/internal/bufpool"
	"github.com/pdcgo/pdc/internal/wire"
)

const methodOwned wire.Method = 110

// An owned payload is the handler's: it may keep it after answering, and
// gives it back to the pool itself.
func withOwned(kept chan<- []byte) func(*testServer) {
	return func(ts *testServer) {
		ts.HandleOwned(methodOwned, func(ctx context.Context, req *Request) (*Response, error) {
			kept <- req.Payload
			return &Response{Header: []byte("ok")}, nil
		})
	}
}

func TestCallIntoScatters(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
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

func TestHandleOwnedKeepsPayload(t *testing.T) {
	kept := make(chan []byte, 4)
	ts := startServer(t, "unix", ServerConfig{}, withOwned(kept))
	c := dial(t, ts.addr, DialOptions{})
	var held [][]byte
	for i := range 3 {
		p := bytes.Repeat([]byte{byte(i + 1)}, 256<<10)
		if _, err := c.Call(ctx10(t), methodOwned, nil, [][]byte{p}, nil); err != nil {
			t.Fatal(err)
		}
		held = append(held, <-kept)
	}
	// Each kept payload still holds its own bytes: the server did not hand
	// one buffer to the next request.
	for i, p := range held {
		if !bytes.Equal(p, bytes.Repeat([]byte{byte(i + 1)}, 256<<10)) {
			t.Fatalf("payload %d changed after its handler returned", i)
		}
		bufpool.Put(p)
	}
}

const methodHere wire.Method = 111

// A request tried on the reading goroutine is answered there, or handed,
// payload intact, to its handler on a goroutine of its own; a panic there
// is an error like any handler's, and the connection goes on serving.
func TestHandleOwnedHere(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{}, func(ts *testServer) {
		ts.HandleOwnedHere(methodHere, func(ctx context.Context, req *Request) (*Response, error) {
			defer bufpool.Put(req.Payload)
			return &Response{Header: []byte("elsewhere"), Payload: [][]byte{bytes.Clone(req.Payload)}}, nil
		}, func(ctx context.Context, req *Request) (*Response, error) {
			switch string(req.Header) {
			case "decline":
				return nil, ErrElsewhere
			case "panic":
				panic("here handler bug")
			case "stream":
				// Streaming needs a goroutine of its own.
				return nil, req.Chunk(ctx, []byte("chunk"))
			}
			defer bufpool.Put(req.Payload)
			return &Response{Header: []byte("here"), Payload: [][]byte{bytes.Clone(req.Payload)}}, nil
		})
	})
	c := dial(t, ts.addr, DialOptions{})
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for _, tc := range []struct{ hdr, want string }{{"answer", "here"}, {"decline", "elsewhere"}, {"answer", "here"}} {
		r, err := c.Call(ctx10(t), methodHere, []byte(tc.hdr), [][]byte{payload}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.hdr, err)
		}
		if string(r.Header) != tc.want || !bytes.Equal(r.Payload, payload) {
			t.Fatalf("%s: answered %q with %d bytes (equal %v), want %q with the payload",
				tc.hdr, r.Header, len(r.Payload), bytes.Equal(r.Payload, payload), tc.want)
		}
	}
	if _, err := c.Call(ctx10(t), methodHere, []byte("panic"), [][]byte{payload}, nil); !errors.Is(err, pdc.ErrInternal) {
		t.Fatalf("panic on the reading goroutine: got %v, want ErrInternal", err)
	}
	if _, err := c.Call(ctx10(t), methodHere, []byte("stream"), nil, nil); !errors.Is(err, pdc.ErrInternal) {
		t.Fatalf("streaming from the reading goroutine: got %v, want ErrInternal", err)
	}
	r, err := c.Call(ctx10(t), methodHere, []byte("answer"), [][]byte{payload}, nil)
	if err != nil || string(r.Header) != "here" {
		t.Fatalf("after the errors: %q, %v", r.Header, err)
	}
}
