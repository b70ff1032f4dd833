package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/wire"
)

// copyLimit is the largest payload that is copied into the pending buffer;
// larger ones are written from the caller's buffers.
const copyLimit = 64 << 10

// maxPending bounds the bytes of small frames waiting to be written. Past
// it, a sender waits for its turn to write instead of adding more: a peer
// that stops reading stops its senders, not grows our memory.
const maxPending = 8 << 20

// errNotSent marks a write that failed before any of its bytes went out:
// the connection is intact.
var errNotSent = errors.New("frame not sent")

// frameWriter serialises frames onto one connection, combining small frames
// from concurrent senders into one write.
type frameWriter struct {
	nc    net.Conn
	raw   syscall.RawConn // nc's descriptor, when it has one
	stall time.Duration   // a write that makes no progress for this long fails
	// beforeClose, if set, runs before the writer closes nc: a client
	// wakes a reader blocked in poll(2) on it (waker.close).
	beforeClose func()

	// token is held by the goroutine currently writing to nc.
	token chan struct{}

	// cur is the state of the write in progress, guarded by token, and
	// writeFn the callback that does it, made once: a closure made per
	// write would be three allocations on every round trip.
	cur struct {
		b     []byte
		armed bool
		err   error
	}
	writeFn func(fd uintptr) bool

	sent atomic.Uint64 // bytes of frames taken to write

	// dlMu orders write-deadline changes, so that an interrupt armed for
	// one writer's context cannot outlive that writer.
	dlMu sync.Mutex

	mu struct {
		sync.Mutex
		buf   []byte // pending frames not yet written
		spare []byte // the buffer last written, reused
		err   error  // sticky: once a write failed, every later one does
	}
}

func newFrameWriter(nc net.Conn, stall time.Duration) *frameWriter {
	w := &frameWriter{nc: nc, stall: stall, token: make(chan struct{}, 1)}
	if sc, ok := nc.(syscall.Conn); ok {
		w.raw, _ = sc.SyscallConn()
	}
	w.writeFn = w.writeSome
	return w
}

func payloadLen(p [][]byte) int {
	n := 0
	for _, b := range p {
		n += len(b)
	}
	return n
}

// appendFrame adds a small frame to the pending buffer and reports how
// many bytes are pending.
func (w *frameWriter) appendFrame(f wire.Frame, hdr []byte, payload [][]byte) (int, error) {
	f.SetLens(len(hdr), uint64(payloadLen(payload)))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err != nil {
		return 0, w.mu.err
	}
	start := len(w.mu.buf)
	w.mu.buf = f.AppendTrace(f.Append(w.mu.buf))
	w.mu.buf = append(w.mu.buf, hdr...)
	if len(payload) > 0 {
		buf, err := appendPayload(w.mu.buf, payload)
		if err != nil {
			w.mu.buf = w.mu.buf[:start] // the stream stays whole: the frame was never queued
			return 0, err
		}
		w.mu.buf = buf
	}
	w.sent.Add(wire.FrameSize + uint64(f.HeaderLen) + f.PayloadLen)
	return len(w.mu.buf), nil
}

// errPayloadFault is the error of a frame whose payload could not be read:
// it lies in a file mapping whose file was cut since (a data server's view
// of an object shrunk meanwhile). The frame is not sent; the request is
// answered with this error instead (serverConn.reply).
var errPayloadFault = errors.New("the answer's bytes could not be read")

// appendPayload appends payload to buf. A payload slice may be a mapping
// of a file cut since it was made: the copy then faults, which fails this
// frame rather than killing the process.
func appendPayload(buf []byte, payload [][]byte) (out []byte, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("%w (%v): the data changed while being sent; read again: %w", errPayloadFault, p, pdc.ErrStale)
		}
	}()
	for _, p := range payload {
		buf = append(buf, p...)
	}
	return buf, nil
}

// queue adds a small frame to the pending buffer without writing it; a
// later write or flush sends it. Used to answer a burst of inline requests
// with one system call. Large frames are written at once under ctx.
func (w *frameWriter) queue(ctx context.Context, f wire.Frame, hdr []byte, payload [][]byte) error {
	if payloadLen(payload) > copyLimit {
		return w.write(ctx, f, hdr, payload)
	}
	_, err := w.appendFrame(f, hdr, payload)
	return err
}

// write sends one frame. Small frames are copied and may be written by
// another goroutine after write returns; the caller may reuse hdr and
// payload at once either way. ctx bounds the wait for a turn to write and
// the write itself: a write cut short by ctx fails the connection (the
// stream would be torn) and returns ctx's error; one that never started
// returns an error wrapping errNotSent and leaves the connection intact.
func (w *frameWriter) write(ctx context.Context, f wire.Frame, hdr []byte, payload [][]byte) error {
	if payloadLen(payload) > copyLimit {
		return w.writeLarge(ctx, f, hdr, payload)
	}
	n, err := w.appendFrame(f, hdr, payload)
	if err != nil {
		return err
	}
	if n > maxPending {
		// Too much is waiting: take a turn, blocking, and write it all.
		select {
		case w.token <- struct{}{}:
		case <-ctx.Done():
			return nil // the frame is queued; whoever writes next sends it
		}
		err := w.writePendingLocked(ctx, nil)
		<-w.token
		if err != nil {
			return err
		}
	}
	return w.flush(ctx)
}

// flush writes pending frames unless another goroutine is writing, in which
// case that goroutine will see them: it re-checks the buffer after it gives
// up the token.
func (w *frameWriter) flush(ctx context.Context) error {
	for {
		select {
		case w.token <- struct{}{}:
		default:
			return nil
		}
		err := w.writePendingLocked(ctx, nil)
		<-w.token
		if err != nil {
			return err
		}
		w.mu.Lock()
		empty := len(w.mu.buf) == 0
		w.mu.Unlock()
		if empty {
			return nil
		}
	}
}

// writePendingLocked writes the pending buffer followed by extra, in one
// system call where the sizes allow. The caller holds the token. If ctx
// ends during the write, the write is interrupted and the connection
// failed.
func (w *frameWriter) writePendingLocked(ctx context.Context, extra [][]byte) error {
	w.mu.Lock()
	if err := w.mu.err; err != nil {
		w.mu.Unlock()
		return err
	}
	out := w.mu.buf
	w.mu.buf = w.mu.spare[:0]
	w.mu.spare = nil
	w.mu.Unlock()
	if len(out) == 0 && len(extra) == 0 {
		w.mu.Lock()
		w.mu.spare = out
		w.mu.Unlock()
		return nil
	}

	var err error
	var interrupted bool
	if len(extra) == 0 {
		// Small frames, possibly other callers': written to the end, not
		// cut short by one caller's context (a torn frame would end the
		// connection for all), and bounded by the stall timeout.
		err = w.writeAll(out)
	} else {
		interrupted, err = w.writeOwned(ctx, out, extra)
	}

	w.mu.Lock()
	w.mu.spare = out[:0]
	if err != nil {
		if interrupted {
			err = fmt.Errorf("write to %s interrupted: %w", w.nc.RemoteAddr(), ctxErr(ctx))
		} else {
			err = fmt.Errorf("write to %s: %w: %w", w.nc.RemoteAddr(), pdc.ErrUnavailable, err)
		}
		if w.mu.err == nil {
			w.mu.err = fmt.Errorf("connection to %s: an earlier write failed: %w", w.nc.RemoteAddr(), pdc.ErrUnavailable)
		}
		w.mu.buf = nil
	}
	w.mu.Unlock()
	if err != nil {
		w.closeConn()
	}
	return err
}

// writeOwned writes out and then a large payload that is the caller's own:
// its context may cut the write short, which fails the connection. Apart
// from writePendingLocked so that the small frames' path allocates nothing
// for the interrupt it never arms.
func (w *frameWriter) writeOwned(ctx context.Context, out []byte, extra [][]byte) (interrupted bool, err error) {
	var fired chan struct{}
	stop := func() bool { return true }
	if ctx.Done() != nil {
		fired = make(chan struct{})
		stop = context.AfterFunc(ctx, func() {
			w.dlMu.Lock()
			interrupted = true
			_ = w.nc.SetWriteDeadline(time.Unix(1, 0))
			w.dlMu.Unlock()
			close(fired)
		})
	}
	bufs := make(net.Buffers, 0, 1+len(extra))
	if len(out) > 0 {
		bufs = append(bufs, out)
	}
	bufs = append(bufs, extra...)
	_, err = w.writeBuffers(bufs)
	if !stop() {
		<-fired // the interrupt ran or is running: wait for it
		if err == nil {
			// ctx ended just after the write: nothing is torn, so
			// leave the connection usable for the others.
			w.dlMu.Lock()
			_ = w.nc.SetWriteDeadline(time.Time{})
			w.dlMu.Unlock()
		}
	}
	return interrupted, err
}

// writeAll writes b. It arms no deadline while the socket takes the bytes
// at once: arming one per write arms a runtime timer, which wakes the
// thread parked in the network poller and doubles the cost of a small
// round trip. Only when the socket is full, because the peer is not
// reading, is the stall timeout armed.
func (w *frameWriter) writeAll(b []byte) error {
	rc := w.raw
	if rc == nil {
		if w.stall > 0 {
			_ = w.nc.SetWriteDeadline(time.Now().Add(w.stall))
		}
		_, err := w.nc.Write(b)
		return err
	}
	w.cur.b, w.cur.armed, w.cur.err = b, false, nil
	err := rc.Write(w.writeFn)
	armed, werr := w.cur.armed, w.cur.err
	w.cur.b, w.cur.err = nil, nil
	if armed {
		w.dlMu.Lock()
		_ = w.nc.SetWriteDeadline(time.Time{})
		w.dlMu.Unlock()
	}
	if err != nil {
		return err
	}
	return werr
}

// writeSome writes what is left of cur.b to fd until it is all written
// (true), the socket is full (false: the poller calls again when it has
// room), or a write fails (true, with cur.err set).
func (w *frameWriter) writeSome(fd uintptr) bool {
	c := &w.cur
	for len(c.b) > 0 {
		n, err := unix.Write(int(fd), c.b)
		if n > 0 {
			c.b = c.b[n:]
		}
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			if !c.armed && w.stall > 0 {
				c.armed = true
				w.dlMu.Lock()
				_ = w.nc.SetWriteDeadline(time.Now().Add(w.stall))
				w.dlMu.Unlock()
			}
			return false
		case err != nil:
			c.err = err
			return true
		case n == 0:
			c.err = io.ErrShortWrite
			return true
		}
	}
	return true
}

// writeBuffers writes bufs with writev, renewing a stall deadline between
// chunks so that a slow but moving peer is not cut off.
func (w *frameWriter) writeBuffers(bufs net.Buffers) (int64, error) {
	const chunk = 16 << 20
	var total int64
	for len(bufs) > 0 {
		var part net.Buffers
		size := 0
		for len(bufs) > 0 && size < chunk {
			b := bufs[0]
			if size+len(b) > chunk {
				cut := chunk - size
				part = append(part, b[:cut])
				bufs[0] = b[cut:]
				size = chunk
				break
			}
			part = append(part, b)
			size += len(b)
			bufs = bufs[1:]
		}
		if w.stall > 0 {
			w.dlMu.Lock()
			_ = w.nc.SetWriteDeadline(time.Now().Add(w.stall))
			w.dlMu.Unlock()
		}
		n, err := part.WriteTo(w.nc)
		total += n
		if err != nil {
			return total, err
		}
	}
	if w.stall > 0 {
		w.dlMu.Lock()
		_ = w.nc.SetWriteDeadline(time.Time{})
		w.dlMu.Unlock()
	}
	return total, nil
}

// writeLarge waits for the token, then writes pending frames, f, hdr and the
// payload from the caller's buffers in one writev sequence.
func (w *frameWriter) writeLarge(ctx context.Context, f wire.Frame, hdr []byte, payload [][]byte) error {
	f.SetLens(len(hdr), uint64(payloadLen(payload)))
	select {
	case w.token <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errNotSent, ctxErr(ctx))
	}
	prefix := f.AppendTrace(f.Append(make([]byte, 0, wire.FrameSize+wire.TraceSize+len(hdr))))
	prefix = append(prefix, hdr...)
	extra := make([][]byte, 0, 1+len(payload))
	extra = append(extra, prefix)
	for _, b := range payload {
		extra = netio.AppendAdjacent(extra, b)
	}
	err := w.writePendingLocked(ctx, extra)
	<-w.token
	if err != nil {
		return err
	}
	w.sent.Add(wire.FrameSize + uint64(f.HeaderLen) + f.PayloadLen)
	return w.flush(ctx)
}

// writeFile waits for the token, then writes pending frames, f and hdr, and
// n bytes of file from off (sendfile where the OS allows). A write cut
// short fails the connection: the stream is torn.
func (w *frameWriter) writeFile(ctx context.Context, f wire.Frame, hdr []byte, file *os.File, off, n int64) error {
	f.SetLens(len(hdr), uint64(n))
	select {
	case w.token <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errNotSent, ctxErr(ctx))
	}
	defer func() { <-w.token }()
	prefix := f.AppendTrace(f.Append(make([]byte, 0, wire.FrameSize+wire.TraceSize+len(hdr))))
	prefix = append(prefix, hdr...)
	if err := w.writePendingLocked(ctx, [][]byte{prefix}); err != nil {
		return err
	}
	done := netio.Interrupt(ctx, w.nc, false)
	_, err := netio.SendFile(context.WithoutCancel(ctx), w.nc, file, off, n)
	interrupted := done()
	if err == nil {
		w.sent.Add(wire.FrameSize + uint64(f.HeaderLen) + f.PayloadLen)
		if interrupted {
			w.dlMu.Lock()
			_ = w.nc.SetWriteDeadline(time.Time{})
			w.dlMu.Unlock()
		}
		return nil
	}
	if interrupted {
		err = fmt.Errorf("write to %s interrupted: %w", w.nc.RemoteAddr(), ctxErr(ctx))
	} else {
		err = fmt.Errorf("sending %d bytes of %s to %s: %w: %w", n, file.Name(), w.nc.RemoteAddr(), pdc.ErrUnavailable, err)
	}
	w.fail(fmt.Errorf("connection to %s: an earlier write failed: %w", w.nc.RemoteAddr(), pdc.ErrUnavailable))
	w.closeConn()
	return err
}

// closeConn closes nc after a failed write.
func (w *frameWriter) closeConn() {
	if w.beforeClose != nil {
		w.beforeClose()
	}
	_ = w.nc.Close()
}

// fail makes every later write return err.
func (w *frameWriter) fail(err error) {
	w.mu.Lock()
	if w.mu.err == nil {
		w.mu.err = err
	}
	w.mu.buf = nil
	w.mu.Unlock()
}
