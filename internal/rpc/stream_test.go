package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

const (
	methodStream       wire.Method = 110 // header: chunk count, chunk size; answers chunks then "end"
	methodStreamFile   wire.Method = 111 // streams the file named in the header in 3 chunks
	methodStreamFail   wire.Method = 112 // two chunks, then an error answer
	methodStreamInline wire.Method = 113 // an inline handler that tries to stream
)

func startStreamServer(t *testing.T, network string) *testServer {
	return startServer(t, network, ServerConfig{}, registerStreams)
}

func registerStreams(ts *testServer) {
	ts.Handle(methodStream, func(ctx context.Context, req *Request) (*Response, error) {
		n, size := binary.LittleEndian.Uint32(req.Header), binary.LittleEndian.Uint32(req.Header[4:])
		for i := range n {
			chunk := bytes.Repeat([]byte{byte(i)}, int(size))
			if err := req.Chunk(ctx, []byte{byte(i)}, chunk); err != nil {
				return nil, err
			}
		}
		return &Response{Header: []byte("end")}, nil
	})
	ts.Handle(methodStreamFile, func(ctx context.Context, req *Request) (*Response, error) {
		f, err := os.Open(string(req.Header))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		st, _ := f.Stat()
		third := st.Size() / 3
		for i, off := range []int64{0, third, 2 * third} {
			n := third
			if i == 2 {
				n = st.Size() - off
			}
			if err := req.ChunkFile(ctx, nil, f, off, n); err != nil {
				return nil, err
			}
		}
		return &Response{}, nil
	})
	ts.Handle(methodStreamFail, func(ctx context.Context, req *Request) (*Response, error) {
		for range 2 {
			if err := req.Chunk(ctx, nil, []byte("part")); err != nil {
				return nil, err
			}
		}
		return nil, errors.Join(pdc.ErrNotFound, errors.New("object \"x\" vanished mid-stream"))
	})
	ts.Handle(methodStreamInline, func(ctx context.Context, req *Request) (*Response, error) {
		return nil, req.Chunk(ctx, nil, []byte("no"))
	}, Inline())
}

func streamHdr(n, size uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, n)
	return binary.LittleEndian.AppendUint32(b, size)
}

func TestStream(t *testing.T) {
	for _, network := range []string{"tcp", "unix", "mem"} {
		t.Run(network, func(t *testing.T) {
			ts := startStreamServer(t, network)
			c := dial(t, ts.addr, DialOptions{})
			for _, tc := range []struct{ n, size uint32 }{{0, 0}, {1, 0}, {3, 10}, {5, copyLimit + 1}, {2, 8 << 20}} {
				var got [][]byte
				rep, err := c.CallStream(ctx10(t), methodStream, streamHdr(tc.n, tc.size), nil, func(hdr []byte, r io.Reader, n uint64) error {
					b := make([]byte, n)
					if _, err := io.ReadFull(r, b); err != nil {
						return err
					}
					if len(hdr) != 1 || int(hdr[0]) != len(got) {
						t.Errorf("chunk %d has header %v", len(got), hdr)
					}
					got = append(got, b)
					return nil
				})
				if err != nil {
					t.Fatalf("%d chunks of %d: %v", tc.n, tc.size, err)
				}
				if string(rep.Header) != "end" {
					t.Fatalf("final header %q", rep.Header)
				}
				if len(got) != int(tc.n) {
					t.Fatalf("%d chunks, want %d", len(got), tc.n)
				}
				for i, b := range got {
					if !bytes.Equal(b, bytes.Repeat([]byte{byte(i)}, int(tc.size))) {
						t.Fatalf("chunk %d is wrong", i)
					}
				}
			}
			// The connection still serves ordinary calls after streams.
			if _, err := c.Call(ctx10(t), methodEcho, []byte("h"), nil, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestStreamFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 3<<20+7)
	for i := range data {
		data[i] = byte(i * 31)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, network := range []string{"tcp", "unix"} {
		ts := startStreamServer(t, network)
		c := dial(t, ts.addr, DialOptions{})
		var got bytes.Buffer
		if _, err := c.CallStream(ctx10(t), methodStreamFile, []byte(path), nil, func(_ []byte, r io.Reader, n uint64) error {
			_, err := io.CopyN(&got, r, int64(n))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("%s: streamed file differs (%d bytes, want %d)", network, got.Len(), len(data))
		}
	}
}

func TestStreamErrors(t *testing.T) {
	ts := startStreamServer(t, "mem")
	c := dial(t, ts.addr, DialOptions{})
	chunks := 0
	count := func(_ []byte, r io.Reader, n uint64) error {
		chunks++
		_, err := io.Copy(io.Discard, r)
		return err
	}
	// An error answer after chunks ends the stream cleanly.
	_, err := c.CallStream(ctx10(t), methodStreamFail, nil, nil, count)
	if !errors.Is(err, pdc.ErrNotFound) || !strings.Contains(err.Error(), "vanished") || chunks != 2 {
		t.Fatalf("got %v after %d chunks, want pdc.ErrNotFound after 2", err, chunks)
	}
	if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatalf("connection unusable after an error answer: %v", err)
	}
	// Inline handlers cannot stream.
	_, err = c.CallStream(ctx10(t), methodStreamInline, nil, nil, count)
	if !errors.Is(err, pdc.ErrInternal) {
		t.Fatalf("inline stream: got %v, want pdc.ErrInternal", err)
	}
	// A chunk function's failure breaks the stream and the connection.
	c2 := dial(t, ts.addr, DialOptions{})
	boom := errors.New("disk full")
	_, err = c2.CallStream(ctx10(t), methodStream, streamHdr(3, 100), nil, func([]byte, io.Reader, uint64) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("chunk failure: got %v", err)
	}
	if _, err := c2.Call(ctx10(t), methodEcho, nil, nil, nil); !errors.Is(err, pdc.ErrUnavailable) && !errors.Is(err, pdc.ErrClosed) {
		t.Fatalf("call on a connection whose stream broke: got %v", err)
	}
	// Cancellation mid-stream ends the call with the context's error.
	c3 := dial(t, ts.addr, DialOptions{})
	ctx, cancel := context.WithCancel(ctx10(t))
	_, err = c3.CallStream(ctx, methodStream, streamHdr(1000, 1<<20), nil, func(_ []byte, r io.Reader, n uint64) error {
		cancel()
		_, err := io.Copy(io.Discard, r)
		return err
	})
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled stream: got %v, want context.Canceled", err)
	}
	// The server is unharmed.
	if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// A stream needs its connection to itself.
func TestStreamExclusive(t *testing.T) {
	ts := startStreamServer(t, "mem")
	c := dial(t, ts.addr, DialOptions{})
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), methodBlock, nil, nil, nil)
		errc <- err
	}()
	hctx := <-ts.blocked
	_, err := c.CallStream(ctx10(t), methodStream, streamHdr(1, 1), nil, func(_ []byte, r io.Reader, n uint64) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "of its own") {
		t.Fatalf("stream beside a call: got %v, want pdc.ErrInvalid", err)
	}
	c.Close()
	<-errc
	<-hctx.Done()

	// And a call made while a stream runs is refused.
	c2 := dial(t, ts.addr, DialOptions{})
	inStream := make(chan struct{})
	release := make(chan struct{})
	go func() {
		_, err := c2.CallStream(ctx10(t), methodStream, streamHdr(2, 10), nil, func(_ []byte, r io.Reader, n uint64) error {
			select {
			case <-inStream:
			default:
				close(inStream)
				<-release
			}
			_, err := io.Copy(io.Discard, r)
			return err
		})
		errc <- err
	}()
	<-inStream
	_, err = c2.Call(ctx10(t), methodEcho, nil, nil, nil)
	close(release)
	if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "carries a stream") {
		t.Fatalf("call during a stream: got %v, want pdc.ErrInvalid", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("the stream itself: %v", err)
	}
}

// A response's Done runs once the server no longer needs its buffers, and
// the bytes the client gets are those of the buffer before Done changed it.
func TestResponseDone(t *testing.T) {
	done := make(chan struct{})
	buf := []byte("payload")
	ts := startServer(t, "mem", ServerConfig{}, func(ts *testServer) {
		ts.Handle(methodStreamFail+1, func(ctx context.Context, req *Request) (*Response, error) {
			return &Response{Payload: [][]byte{buf}, Done: func() {
				copy(buf, "garbage")
				close(done)
			}}, nil
		})
	})
	c := dial(t, ts.addr, DialOptions{})
	rep, err := c.Call(ctx10(t), methodStreamFail+1, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(rep.Payload) != "payload" {
		t.Fatalf("got %q: the buffer was released before it was sent", rep.Payload)
	}
	<-done
}

// A stream on a connection where a call gave up its reply part-way, and
// another gave up before its reply came at all: the stream skips what is
// left of the first and the whole of the second, which are nobody's, and
// reads its own answer.
func TestStreamAfterAbandonedReplies(t *testing.T) {
	const methodBig wire.Method = 141
	big := make([]byte, 1<<20+300<<10)
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	ts := startServer(t, "tcp", ServerConfig{}, registerStreams, func(ts *testServer) {
		ts.Handle(methodBig, func(ctx context.Context, req *Request) (*Response, error) {
			started <- struct{}{}
			if len(req.Header) > 0 { // the late one: answers after its caller left
				<-release
			}
			return &Response{Payload: [][]byte{big}}, nil
		})
	})
	px := startHeldProxy(t, ts.addr)
	c := dial(t, px.addr, DialOptions{})
	ctx := ctx10(t)

	// The late reply: its caller gives up before it is sent.
	giveUp(t, ctx, "late call", func(ctx context.Context) error {
		_, err := c.Call(ctx, methodBig, []byte("late"), nil, nil)
		return err
	}, func() { <-started })

	// The reply given up part-way.
	px.hold(256 << 10)
	giveUp(t, ctx, "call", func(ctx context.Context) error {
		_, err := c.Call(ctx, methodBig, nil, nil, nil)
		return err
	}, func() {
		<-started
		awaitClaimed(c, 0)
	})
	px.release()
	close(release)

	checkStream(t, ctx, c, "stream after replies given up")
}

// A call whose reply another caller was reading when that caller left,
// and which then gives up with nobody reading, discards the rest of its
// reply itself, after interrupting a read that is no longer there: the
// read deadline it set is still in the past. A later reader must not take
// it for its own context's end: a stream started then would fail and
// close its connection.
func TestStreamAfterGiveUpWithNobodyReading(t *testing.T) {
	const methodBig wire.Method = 142
	big := make([]byte, 1<<20+300<<10)
	ts := startServer(t, "tcp", ServerConfig{}, registerStreams, func(ts *testServer) {
		ts.Handle(methodBig, func(ctx context.Context, req *Request) (*Response, error) {
			return &Response{Payload: [][]byte{big}}, nil
		})
	})
	px := startHeldProxy(t, ts.addr)
	c := dial(t, px.addr, DialOptions{})
	ctx := ctx10(t)

	// A's reply is read part-way by B, which then leaves.
	px.hold(256 << 10)
	a, err := c.Send(ctx, methodBig, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	giveUp(t, ctx, "B", func(ctx context.Context) error {
		_, err := c.Call(ctx, methodBlock, nil, nil, nil)
		return err
	}, func() {
		<-ts.blocked
		awaitClaimed(c, a.f.ID)
	})

	// A gives up while nobody reads: the test holds the read token until
	// A has asked for its frame to be dropped.
	c.readTok <- struct{}{}
	actx, acancel := context.WithCancel(ctx)
	acancel()
	aerr := make(chan error, 1)
	go func() {
		_, err := a.Wait(actx)
		aerr <- err
	}()
	for !a.cl.abandoned.Load() {
		time.Sleep(time.Millisecond)
	}
	<-c.readTok
	if err := <-aerr; !errors.Is(err, pdc.ErrCanceled) {
		t.Fatalf("A given up: %v", err)
	}
	px.release()

	checkStream(t, ctx, c, "stream after a reply given up with nobody reading")
}

// A late reply whose prefix has only partly arrived when a reader stops
// (here Broken, which reads what has arrived) leaves those bytes in the
// read state with no frame started. The stream must resume the prefix,
// not read a new one from the middle of it.
func TestStreamAfterPartialPrefix(t *testing.T) {
	const methodLate wire.Method = 143
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	ts := startServer(t, "tcp", ServerConfig{}, registerStreams, func(ts *testServer) {
		ts.Handle(methodLate, func(ctx context.Context, req *Request) (*Response, error) {
			started <- struct{}{}
			<-release // answers after its caller left
			return &Response{Header: []byte("late")}, nil
		})
	})
	px := startHeldProxy(t, ts.addr)
	c := dial(t, px.addr, DialOptions{})
	ctx := ctx10(t)

	giveUp(t, ctx, "late call", func(ctx context.Context) error {
		_, err := c.Call(ctx, methodLate, nil, nil, nil)
		return err
	}, func() { <-started })

	// 5 bytes of the late reply's prefix come; Broken reads them.
	px.hold(5)
	close(release)
	for n := 0; n == 0; time.Sleep(time.Millisecond) {
		c.lastRead.Store(0) // idle: Broken looks at the socket
		if c.Broken() {
			t.Fatal("Broken with a reply on its way")
		}
		c.readTok <- struct{}{}
		n = c.rs.nPrefix
		<-c.readTok
	}
	px.release()

	checkStream(t, ctx, c, "stream after part of a prefix")
}

// A call giving up whose reply is being read is still in flight until its
// frame has been dropped: it is about to interrupt the reader, which
// would cut a stream short. A stream started meanwhile is refused.
func TestStreamRefusedWhileACallGivesUp(t *testing.T) {
	const methodBig wire.Method = 144
	big := make([]byte, 1<<20+300<<10)
	ts := startServer(t, "tcp", ServerConfig{}, registerStreams, func(ts *testServer) {
		ts.Handle(methodBig, func(ctx context.Context, req *Request) (*Response, error) {
			return &Response{Payload: [][]byte{big}}, nil
		})
	})
	px := startHeldProxy(t, ts.addr)
	c := dial(t, px.addr, DialOptions{})
	ctx := ctx10(t)

	// A's reply is claimed, and read part-way, by B, which then leaves.
	px.hold(256 << 10)
	a, err := c.Send(ctx, methodBig, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	giveUp(t, ctx, "B", func(ctx context.Context) error {
		_, err := c.Call(ctx, methodBlock, nil, nil, nil)
		return err
	}, func() {
		<-ts.blocked
		awaitClaimed(c, a.f.ID)
	})

	// A gives up; the test holds the read token, so A waits for it with
	// its frame still claimed.
	c.readTok <- struct{}{}
	actx, acancel := context.WithCancel(ctx)
	acancel()
	aerr := make(chan error, 1)
	go func() {
		_, err := a.Wait(actx)
		aerr <- err
	}()
	for !a.cl.abandoned.Load() {
		time.Sleep(time.Millisecond)
	}
	// A context already ended: a stream let through would wait for the
	// token and give up with it; one refused says why.
	sctx, scancel := context.WithCancel(ctx)
	scancel()
	_, err = c.CallStream(sctx, methodStream, streamHdr(1, 1), nil, func(_ []byte, r io.Reader, _ uint64) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	<-c.readTok
	if !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("stream while a call gives up: got %v, want pdc.ErrInvalid", err)
	}
	if err := <-aerr; !errors.Is(err, pdc.ErrCanceled) {
		t.Fatalf("A given up: %v", err)
	}
	px.release()
	// Once it has, the stream goes.
	if _, err := c.CallStream(ctx, methodStream, streamHdr(1, 1), nil, func(_ []byte, r io.Reader, _ uint64) error {
		_, err := io.Copy(io.Discard, r)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
