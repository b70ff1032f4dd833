package rpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/pdcgo/pdc/internal/netio"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// readBufSize is the read buffer of an authenticated connection. Payloads
// larger than what is buffered are read straight into their destination.
const readBufSize = 64 << 10

// handshakeBufSize is the read buffer of a server connection until its
// client has authenticated: a peer that has proven nothing holds no more
// than this, a goroutine and its socket.
const handshakeBufSize = 512

// frameReader reads frames from a connection and bounds their lengths.
// On a server it also bounds how slowly a frame may arrive (pace).
type frameReader struct {
	br     *bufio.Reader
	lw     netio.LowWater
	limits wire.Limits
	prefix [wire.FrameSize]byte
	trace  [wire.TraceSize]byte // a request's trace id (wire.FlagTrace)
	pace   pace
}

func newFrameReader(r io.Reader, limits wire.Limits) *frameReader {
	return newFrameReaderSize(r, limits, readBufSize)
}

func newFrameReaderSize(r io.Reader, limits wire.Limits, size int) *frameReader {
	fr := &frameReader{br: bufio.NewReaderSize(r, size), limits: limits.WithDefaults()}
	if nc, ok := r.(net.Conn); ok {
		fr.lw = netio.NewLowWater(nc)
	}
	return fr
}

// pace bounds the reads of one frame once its first byte has come: a peer
// that has begun a frame must finish it. The frame has a credit of time to
// wait for its bytes, at most stall, which waits on the socket spend and
// each byte that arrives refills by 1/minRate seconds; a wait that would
// overdraw it fails. So a frame that gets nothing for stall fails, and so
// does one whose bytes come slower than minRate for longer than stall,
// however fast they came before: a burst buys no more than stall. Only
// time blocked on the socket counts, not the time a handler takes to store
// what it read, nor a wait for the payload budget. Idle connections,
// between frames, are not bounded: clients keep them open in their pools
// (keepalives find vanished peers).
type pace struct {
	nc      net.Conn      // nil: no bounds (a client's reader)
	stall   time.Duration // 0: no bounds
	minRate int64         // bytes per second; 0: no floor

	credit time.Duration // the frame may wait this much longer for bytes
	waited time.Duration // blocked on the socket during this frame
	got    int64         // bytes of this frame read after blocking
	armed  bool          // a read deadline is set
}

// errSlow is the reason of a paced read that failed.
type errSlow struct {
	stalled bool // nothing came for stall, rather than too little
	stall   time.Duration
	got     int64
	waited  time.Duration
	minRate int64
}

func (e *errSlow) Error() string {
	if e.stalled {
		return fmt.Sprintf("the peer sent nothing for %v in the middle of a frame (stall timeout)", e.stall)
	}
	return fmt.Sprintf("the peer sends a frame below the floor of %d bytes/s (%d bytes in %v of waiting)", e.minRate, e.got, e.waited.Round(time.Millisecond))
}

func (e *errSlow) Unwrap() error { return pdc.ErrTimeout }

// spend accounts for a wait of d that brought n bytes.
func (p *pace) spend(d time.Duration, n int) {
	p.waited += d
	p.got += int64(n)
	if p.minRate <= 0 {
		if n > 0 {
			p.credit = p.stall
		} else {
			p.credit -= d
		}
		return
	}
	p.credit += time.Duration(float64(n)/float64(p.minRate)*float64(time.Second)) - d
	p.credit = min(p.credit, p.stall)
}

// begin starts a frame: the bounds count from here.
func (r *frameReader) begin() {
	r.pace.waited, r.pace.got, r.pace.credit = 0, 0, r.pace.stall
	if r.pace.armed {
		_ = r.pace.nc.SetReadDeadline(time.Time{})
		r.pace.armed = false
	}
}

// blocking runs read, which waits on the socket for more of the frame,
// under the frame's bounds. read returns how many new bytes it got. A
// failed bound is an error wrapping pdc.ErrTimeout that says which.
func (r *frameReader) blocking(read func() (int, error)) (int, error) {
	p := &r.pace
	if p.nc == nil || p.stall <= 0 {
		return read()
	}
	stalled := p.minRate <= 0 || p.credit >= p.stall
	if d := p.credit; d > 0 {
		start := time.Now()
		_ = p.nc.SetReadDeadline(start.Add(d))
		p.armed = true
		n, err := read()
		p.spend(time.Since(start), n)
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
			return n, err
		}
		if n > 0 {
			return n, nil // progress; the next wait has a deadline of its own
		}
	}
	// Bytes may be waiting behind a raised receive mark: they count, and
	// are read at once with the mark down.
	if r.lw.Queued() > 0 {
		r.lw.Expect(0)
		_ = p.nc.SetReadDeadline(time.Now().Add(p.stall))
		p.armed = true
		start := time.Now()
		n, err := read()
		p.spend(time.Since(start), n)
		p.credit = max(p.credit, time.Millisecond) // they came in time
		return n, err
	}
	return 0, &errSlow{stalled: stalled, stall: p.stall, got: p.got, waited: p.waited, minRate: p.minRate}
}

// more waits until at least want bytes (at most the buffer's size) are
// buffered, under the frame's bounds.
func (r *frameReader) more(want int) error {
	want = min(want, r.br.Size())
	for r.br.Buffered() < want {
		before := r.br.Buffered()
		_, err := r.blocking(func() (int, error) {
			_, err := r.br.Peek(r.br.Buffered() + 1)
			return r.br.Buffered() - before, err
		})
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// next reads and checks one frame prefix. Any error means the stream can no
// longer be trusted. Waiting for a frame to begin is not bounded; once it
// has, the rest comes under the frame's bounds.
func (r *frameReader) next() (wire.Frame, error) {
	r.begin()
	if r.pace.nc != nil && r.br.Buffered() < wire.FrameSize {
		if _, err := r.br.Peek(1); err != nil {
			return wire.Frame{}, err
		}
		if err := r.more(wire.FrameSize); err != nil {
			return wire.Frame{}, err
		}
	}
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
	if r.pace.nc != nil {
		for len(dst) > 0 {
			if r.br.Buffered() == 0 {
				if err := r.more(1); err != nil {
					return err
				}
			}
			n, _ := r.br.Read(dst[:min(len(dst), r.br.Buffered())])
			dst = dst[n:]
		}
		return nil
	}
	_, err := io.ReadFull(r.br, dst)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// readPayload fills dst with a frame's payload, whose bytes are certain to
// come, so the reader may sleep until a good part of them has arrived.
func (r *frameReader) readPayload(dst []byte) error {
	// Read here rather than by io.ReadFull, through which the reader
	// would escape: an allocation per payload.
	b := bodyReader{r: r, left: uint64(len(dst))}
	defer b.done()
	for n := 0; n < len(dst); {
		k, err := b.Read(dst[n:])
		n += k
		if err != nil {
			return err
		}
	}
	return nil
}

// discard skips n bytes of the stream, under the frame's bounds: a peer
// cannot hold a connection by trickling bytes that are thrown away.
func (r *frameReader) discard(n uint64) error {
	for n > 0 {
		if r.br.Buffered() == 0 {
			if err := r.more(1); err != nil {
				return err
			}
		}
		d, err := r.br.Discard(int(min(n, uint64(max(r.br.Buffered(), 1)))))
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

// body reads the header and payload of f into new buffers (the client's
// handshake; servers read payloads with serverConn.payload).
func (r *frameReader) body(f wire.Frame) (hdr, payload []byte, err error) {
	if hdr, err = r.header(f); err != nil {
		return nil, nil, err
	}
	if f.PayloadLen == 0 {
		return hdr, nil, nil
	}
	payload = make([]byte, f.PayloadLen)
	if err := r.readPayload(payload); err != nil {
		return nil, nil, err
	}
	return hdr, payload, nil
}

// header reads f's header into a new buffer.
//
// On a server, a header that is not all here yet grows as its bytes
// arrive: a prefix claiming a large header holds no more memory than the
// bytes its peer has sent, and the frame's bounds end a peer that stops.
func (r *frameReader) header(f wire.Frame) ([]byte, error) {
	n := int(f.HeaderLen)
	if n == 0 {
		return nil, nil
	}
	if r.pace.nc == nil || r.br.Buffered() >= n {
		hdr := make([]byte, n)
		if err := r.read(hdr); err != nil {
			return nil, err
		}
		return hdr, nil
	}
	hdr := make([]byte, 0, min(n, 2*r.br.Size()))
	for len(hdr) < n {
		if err := r.more(1); err != nil {
			return nil, err
		}
		k := min(n-len(hdr), r.br.Buffered())
		b, _ := r.br.Peek(k)
		hdr = append(hdr, b...)
		_, _ = r.br.Discard(k)
	}
	return hdr, nil
}

// bodyReader reads a frame's payload from the connection as it arrives:
// for a handler that runs on the reading goroutine (Request.Body), and
// into a buffer (readPayload).
type bodyReader struct {
	r    *frameReader
	left uint64 // payload bytes not yet read
	read uint64 // payload bytes read
	err  error  // the first failed read: the stream is broken
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.left == 0 {
		return 0, io.EOF
	}
	p = p[:min(uint64(len(p)), b.left)]
	var n int
	var err error
	if b.r.br.Buffered() > 0 {
		n, err = b.r.br.Read(p)
	} else {
		// This read waits on the socket: for the bytes the frame has
		// promised, so sleep until a good part of them is there, within
		// the frame's bounds (a client that stops sending mid payload
		// holds up the objects its handler has locked).
		b.r.lw.Expect(int64(b.left))
		n, err = b.r.blocking(func() (int, error) { return b.r.br.Read(p) })
	}
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

// done restores the connection for reading frames: no raised mark.
func (b *bodyReader) done() { b.r.lw.Expect(0) }

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
