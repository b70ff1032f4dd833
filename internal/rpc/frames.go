package rpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/pdcgo/pdc/internal/bufpool"
	"github.com/pdcgo/pdc/internal/netio"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// readBufSize is the read buffer of a connection. Payloads larger than what
// is buffered are read straight into their destination.
const readBufSize = 64 << 10

// frameReader reads frames from a connection and bounds their lengths.
type frameReader struct {
	br     *bufio.Reader
	lw     netio.LowWater
	limits wire.Limits
	prefix [wire.FrameSize]byte
}

func newFrameReader(r io.Reader, limits wire.Limits) *frameReader {
	fr := &frameReader{br: bufio.NewReaderSize(r, readBufSize), limits: limits.WithDefaults()}
	if nc, ok := r.(net.Conn); ok {
		fr.lw = netio.NewLowWater(nc)
	}
	return fr
}

// next reads and checks one frame prefix. Any error means the stream can no
// longer be trusted.
func (r *frameReader) next() (wire.Frame, error) {
	if _, err := io.ReadFull(r.br, r.prefix[:]); err != nil {
		return wire.Frame{}, err
	}
	f, err := wire.DecodeFrame(r.prefix[:])
	if err != nil {
		return wire.Frame{}, err
	}
	if err := r.limits.Check(f); err != nil {
		return wire.Frame{}, err
	}
	return f, nil
}

// read fills dst from the stream.
func (r *frameReader) read(dst []byte) error {
	_, err := io.ReadFull(r.br, dst)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// readPayload fills dst with a frame's payload, whose bytes are certain to
// come, so the reader may sleep until a good part of them has arrived.
func (r *frameReader) readPayload(dst []byte) error {
	b := &bodyReader{r: r, left: uint64(len(dst))}
	_, err := io.ReadFull(b, dst)
	b.done()
	return err
}

// discard skips n bytes of the stream.
func (r *frameReader) discard(n uint64) error {
	for n > 0 {
		step := n
		if step > 1<<30 {
			step = 1 << 30
		}
		d, err := r.br.Discard(int(step))
		n -= uint64(d)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// body reads the header and payload of f into new buffers, the payload
// from bufpool when pooled is set. (Clients read replies into the caller's
// buffer with Conn.readFrame.)
func (r *frameReader) body(f wire.Frame, pooled bool) (hdr, payload []byte, err error) {
	if hdr, err = r.header(f); err != nil {
		return nil, nil, err
	}
	if payload, err = r.payload(f, pooled); err != nil {
		return nil, nil, err
	}
	return hdr, payload, nil
}

// header reads f's header into a new buffer.
func (r *frameReader) header(f wire.Frame) ([]byte, error) {
	if f.HeaderLen == 0 {
		return nil, nil
	}
	hdr := make([]byte, f.HeaderLen)
	if err := r.read(hdr); err != nil {
		return nil, err
	}
	return hdr, nil
}

// payload reads f's payload, which follows its header, into a new buffer,
// from bufpool when pooled is set.
func (r *frameReader) payload(f wire.Frame, pooled bool) ([]byte, error) {
	if f.PayloadLen == 0 {
		return nil, nil
	}
	var payload []byte
	if pooled {
		payload = bufpool.Get(int(f.PayloadLen))
	} else {
		payload = make([]byte, f.PayloadLen)
	}
	if err := r.readPayload(payload); err != nil {
		if pooled {
			bufpool.Put(payload)
		}
		return nil, err
	}
	return payload, nil
}

// bodyReader reads a frame's payload from the connection as it arrives:
// for a handler that runs on the reading goroutine (Request.Body), and
// into a buffer (readPayload).
type bodyReader struct {
	r     *frameReader
	nc    net.Conn
	stall time.Duration // a read that waits this long fails
	left  uint64        // payload bytes not yet read
	read  uint64        // payload bytes read
	timed bool          // a read deadline is armed
	err   error         // the first failed read: the stream is broken
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.left == 0 {
		return 0, io.EOF
	}
	p = p[:min(uint64(len(p)), b.left)]
	if b.r.br.Buffered() == 0 {
		// This read waits on the socket: for the bytes the frame has
		// promised, so sleep until a good part of them is there, and no
		// longer than the stall timeout (a client that stops sending mid
		// payload holds up the objects its handler has locked).
		b.r.lw.Expect(int64(b.left))
		if b.stall > 0 {
			_ = b.nc.SetReadDeadline(time.Now().Add(b.stall))
			b.timed = true
		}
	}
	n, err := b.r.br.Read(p)
	b.left -= uint64(n)
	b.read += uint64(n)
	if err != nil && b.left > 0 {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		b.err = fmt.Errorf("reading a request's payload (%d bytes still to come): %w", b.left, err)
		return n, b.err
	}
	if b.left == 0 {
		b.done()
	}
	return n, nil
}

// done restores the connection for reading frames: no raised mark, no
// deadline.
func (b *bodyReader) done() {
	b.r.lw.Expect(0)
	if b.timed {
		_ = b.nc.SetReadDeadline(time.Time{})
		b.timed = false
	}
}

// finish reads what the handler left of the payload, so that the stream
// is at the next frame. Its error, or an earlier one, broke the stream.
func (b *bodyReader) finish() error {
	if b.err == nil && b.left > 0 {
		if err := b.r.discard(b.left); err != nil {
			b.err = fmt.Errorf("skipping the rest of a request's payload: %w", err)
		}
		b.read += b.left
		b.left = 0
	}
	b.done()
	return b.err
}

// ctxErr is pdc.CtxErr.
func ctxErr(ctx context.Context) error { return pdc.CtxErr(ctx) }

// splitAddr turns pdc's address form ("host:port" or "unix:/path") into a
// network and an address for package net.
func splitAddr(addr string) (network, address string) {
	if len(addr) > 5 && addr[:5] == "unix:" {
		return "unix", addr[5:]
	}
	return "tcp", addr
}

// Listen listens on a pdc address: "host:port" (port 0 picks one) or
// "unix:/path".
func Listen(addr string) (net.Listener, error) {
	network, address := splitAddr(addr)
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Addr formats a listener's address in pdc's form.
func Addr(a net.Addr) string {
	if a.Network() == "unix" {
		return "unix:" + a.String()
	}
	return a.String()
}
