package rpc

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// copyLimit is the largest payload that is copied into the pending buffer;
// larger ones are written from the caller's buffers.
const copyLimit = 64 << 10

// frameWriter serialises frames onto one connection, combining small frames
// from concurrent senders into one write.
type frameWriter struct {
	nc    net.Conn
	stall time.Duration // a write that makes no progress for this long fails

	// token is held by the goroutine currently writing to nc.
	token chan struct{}

	mu struct {
		sync.Mutex
		buf   []byte // pending frames not yet written
		spare []byte // the buffer last written, reused
		err   error  // sticky: once a write failed, every later one does
	}
}

func newFrameWriter(nc net.Conn, stall time.Duration) *frameWriter {
	return &frameWriter{nc: nc, stall: stall, token: make(chan struct{}, 1)}
}

func payloadLen(p [][]byte) int {
	n := 0
	for _, b := range p {
		n += len(b)
	}
	return n
}

// queue adds a small frame to the pending buffer without writing it; a
// later write or flush sends it. Used to answer a burst of inline requests
// with one system call.
func (w *frameWriter) queue(f wire.Frame, hdr []byte, payload [][]byte) error {
	n := payloadLen(payload)
	if n > copyLimit {
		return w.write(context.Background(), f, hdr, payload)
	}
	f.HeaderLen = uint32(len(hdr))
	f.PayloadLen = uint64(n)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err != nil {
		return w.mu.err
	}
	w.mu.buf = f.Append(w.mu.buf)
	w.mu.buf = append(w.mu.buf, hdr...)
	for _, p := range payload {
		w.mu.buf = append(w.mu.buf, p...)
	}
	return nil
}

// write sends one frame. f's HeaderLen and PayloadLen are set from hdr and
// payload. Small frames are copied and may be written by another goroutine
// after write returns; the caller may reuse hdr and payload at once either
// way. ctx bounds only the wait for a turn to write a large payload.
func (w *frameWriter) write(ctx context.Context, f wire.Frame, hdr []byte, payload [][]byte) error {
	n := payloadLen(payload)
	f.HeaderLen = uint32(len(hdr))
	f.PayloadLen = uint64(n)
	if n > copyLimit {
		return w.writeLarge(ctx, f, hdr, payload)
	}
	w.mu.Lock()
	if err := w.mu.err; err != nil {
		w.mu.Unlock()
		return err
	}
	w.mu.buf = f.Append(w.mu.buf)
	w.mu.buf = append(w.mu.buf, hdr...)
	for _, p := range payload {
		w.mu.buf = append(w.mu.buf, p...)
	}
	w.mu.Unlock()
	return w.flush()
}

// flush writes pending frames unless another goroutine is writing, in which
// case that goroutine will see them: it re-checks the buffer after it gives
// up the token.
func (w *frameWriter) flush() error {
	for {
		select {
		case w.token <- struct{}{}:
		default:
			return nil
		}
		err := w.writePendingLocked(nil)
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
// system call where the sizes allow. The caller holds the token.
func (w *frameWriter) writePendingLocked(extra [][]byte) error {
	w.mu.Lock()
	if err := w.mu.err; err != nil {
		w.mu.Unlock()
		return err
	}
	out := w.mu.buf
	w.mu.buf = w.mu.spare[:0]
	w.mu.spare = nil
	w.mu.Unlock()

	var err error
	switch {
	case len(extra) == 0 && len(out) == 0:
	case len(extra) == 0:
		// No write deadline here: arming one per write arms a runtime
		// timer, which wakes the thread parked in the network poller and
		// doubles the cost of a small round trip. A peer that stops
		// reading is caught by the socket's TCP_USER_TIMEOUT instead.
		_, err = w.nc.Write(out)
	default:
		bufs := make(net.Buffers, 0, 1+len(extra))
		if len(out) > 0 {
			bufs = append(bufs, out)
		}
		bufs = append(bufs, extra...)
		_, err = writeBuffers(w.nc, bufs, w.stall)
	}

	w.mu.Lock()
	w.mu.spare = out[:0]
	if err != nil {
		err = fmt.Errorf("write to %s: %w: %w", w.nc.RemoteAddr(), pdc.ErrUnavailable, err)
		if w.mu.err == nil {
			w.mu.err = err
		}
		w.mu.buf = nil
	}
	w.mu.Unlock()
	if err != nil {
		_ = w.nc.Close()
	}
	return err
}

// writeBuffers writes bufs with writev, renewing the write deadline between
// chunks so that a slow but moving peer is not cut off.
func writeBuffers(nc net.Conn, bufs net.Buffers, stall time.Duration) (int64, error) {
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
		if stall > 0 {
			_ = nc.SetWriteDeadline(time.Now().Add(stall))
		}
		n, err := part.WriteTo(nc)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// writeLarge waits for the token, then writes pending frames, f, hdr and the
// payload from the caller's buffers in one writev sequence.
func (w *frameWriter) writeLarge(ctx context.Context, f wire.Frame, hdr []byte, payload [][]byte) error {
	select {
	case w.token <- struct{}{}:
	case <-ctx.Done():
		return ctxErr(ctx)
	}
	prefix := f.Append(make([]byte, 0, wire.FrameSize+len(hdr)))
	prefix = append(prefix, hdr...)
	extra := make([][]byte, 0, 1+len(payload))
	extra = append(extra, prefix)
	extra = append(extra, payload...)
	err := w.writePendingLocked(extra)
	<-w.token
	if err != nil {
		return err
	}
	return w.flush()
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
