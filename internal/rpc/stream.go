package rpc

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/wire"
)

// ChunkFunc consumes one chunk of a streamed answer: exactly n bytes from r,
// straight from the connection's buffer into wherever they belong. hdr is
// the chunk's header.
type ChunkFunc func(hdr []byte, r io.Reader, n uint64) error

// CallStream sends a request whose answer is streamed: any number of chunks
// (responses marked wire.FlagMore), each handed to chunk as it is read,
// then the final response, which CallStream returns. A stream of any total
// size moves in bounded chunks with TCP's flow control as backpressure.
//
// The stream needs the connection to itself, because it reads the chunks
// on the caller's goroutine: CallStream fails if another call is in
// flight, and calls made while it runs fail. If ctx ends, chunk fails or
// the server breaks the stream, the connection is closed (a stream cut
// short cannot be resumed) and the error returned.
func (c *Conn) CallStream(ctx context.Context, m wire.Method, hdr []byte, payload [][]byte, chunk ChunkFunc) (Reply, error) {
	if !c.streaming.CompareAndSwap(false, true) {
		return Reply{}, fmt.Errorf("server %s: %s: the connection already carries a stream: %w", c.label, m, pdc.ErrInvalid)
	}
	defer c.streaming.Store(false)
	if c.inFlight.Load() != 0 {
		return Reply{}, fmt.Errorf("server %s: %s: a stream needs a connection of its own, and this one has calls in flight: %w",
			c.label, m, pdc.ErrInvalid)
	}
	select {
	case c.readTok <- struct{}{}:
	case <-ctx.Done():
		return Reply{}, fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
	}
	defer func() { <-c.readTok }()
	c.mu.Lock()
	err := c.mu.err
	c.mu.Unlock()
	if err != nil {
		return Reply{}, fmt.Errorf("%s: %w", m, err)
	}

	f := wire.Frame{Method: m, ID: c.nextID.Add(1)}
	if c.hello.Trace {
		if f.Trace = TraceOf(ctx); f.Trace == 0 {
			f.Trace = NewTrace()
		}
	}
	if d, ok := ctx.Deadline(); ok {
		if f.Timeout = time.Until(d); f.Timeout <= 0 {
			return Reply{}, fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
		}
	}
	if err := c.w.write(ctx, f, hdr, payload); err != nil {
		err = fmt.Errorf("connection to server %s lost: %w", c.label, err)
		c.fail(err)
		if ctx.Err() != nil {
			return Reply{}, fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
		}
		return Reply{}, fmt.Errorf("%s: %w", m, err)
	}

	c.dlMu.Lock()
	// A caller that gave up while nobody read (giveUp) interrupted a read
	// that was no longer there: its deadline may still be set, past. The
	// stream's reads end with ctx, not with that.
	c.setReadDeadlineLocked(time.Time{})
	done := netio.Interrupt(ctx, c.nc, true)
	c.dlMu.Unlock()
	rep, srvErr, err := c.readStream(f, chunk)
	if done() {
		err = fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
	}
	if err != nil {
		c.fail(fmt.Errorf("connection to %s closed: a stream on it broke (%v): %w", c.label, err, pdc.ErrUnavailable))
		return Reply{}, err
	}
	return rep, srvErr // an error answer ends the stream cleanly
}

// readStream reads the answer to request f: chunks, then the final frame.
// srvErr is the server's error answer; err breaks the connection.
func (c *Conn) readStream(req wire.Frame, chunk ChunkFunc) (rep Reply, srvErr, err error) {
	// What is left of a reply whose caller gave up part-way comes first:
	// nobody's now, skipped (readFrame resumes it). That may be part of
	// a prefix alone, read by a reader that stopped before the rest came.
	if c.rs.inFrame || c.rs.nPrefix > 0 {
		if got, err := c.readFrame(); err != nil {
			return Reply{}, nil, c.lost(req.Method, err)
		} else if got != nil {
			got.done <- struct{}{}
		}
	}
	var prefix [wire.FrameSize]byte
	for {
		if _, err := io.ReadFull(c.br, prefix[:]); err != nil {
			return Reply{}, nil, c.lost(req.Method, err)
		}
		f, err := wire.DecodeFrame(prefix[:])
		if err == nil {
			err = c.lim.Check(f)
		}
		if err != nil {
			return Reply{}, nil, fmt.Errorf("server %s: %s: %w", c.label, req.Method, err)
		}
		if f.Flags&wire.FlagResponse != 0 && f.Flags&wire.FlagMore == 0 && f.ID < req.ID {
			// The late reply of a call that gave up before it came (the
			// stream started with no call waiting): nobody's.
			if err := c.skip(uint64(f.HeaderLen) + f.PayloadLen); err != nil {
				return Reply{}, nil, c.lost(req.Method, err)
			}
			continue
		}
		if f.Flags&wire.FlagResponse == 0 || f.ID != req.ID {
			return Reply{}, nil, fmt.Errorf("server %s: %s: frame for request %d (flags %#02x) in the stream of request %d: %w",
				c.label, req.Method, f.ID, uint8(f.Flags), req.ID, pdc.ErrProtocol)
		}
		hdr := make([]byte, f.HeaderLen)
		if _, err := io.ReadFull(c.br, hdr); err != nil {
			return Reply{}, nil, c.lost(req.Method, err)
		}
		if f.Flags&wire.FlagMore != 0 {
			er := &errReader{r: c.br}
			lr := &io.LimitedReader{R: er, N: int64(f.PayloadLen)}
			if err := chunk(hdr, lr, f.PayloadLen); err != nil {
				if er.err != nil {
					return Reply{}, nil, c.lost(req.Method, er.err)
				}
				return Reply{}, nil, fmt.Errorf("server %s: %s: chunk of %d bytes: %w", c.label, req.Method, f.PayloadLen, err)
			}
			if lr.N != 0 {
				return Reply{}, nil, fmt.Errorf("server %s: %s: chunk of %d bytes consumed only in part: %w",
					c.label, req.Method, f.PayloadLen, pdc.ErrInternal)
			}
			continue
		}
		payload := make([]byte, f.PayloadLen)
		if _, err := io.ReadFull(c.br, payload); err != nil {
			return Reply{}, nil, c.lost(req.Method, err)
		}
		c.lastRead.Store(time.Now().UnixNano())
		if f.Flags&wire.FlagError != 0 {
			var eb wire.ErrorBody
			if err := eb.Unmarshal(hdr); err != nil {
				return Reply{}, nil, fmt.Errorf("server %s: %s: bad error reply: %w", c.label, req.Method, err)
			}
			return Reply{}, &pdc.ServerError{Server: c.label, Method: req.Method.String(), Msg: eb.Message, Err: eb.Code.Err()}, nil
		}
		return Reply{Header: hdr, Payload: payload}, nil, nil
	}
}

func (c *Conn) lost(m wire.Method, err error) error {
	return fmt.Errorf("server %s: %s: connection lost mid-stream: %w: %w", c.label, m, pdc.ErrUnavailable, err)
}

// LocalAddr is the connection's local address: the address this host uses
// to reach the server.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// errReader remembers the error of the reader under a chunk, to tell a lost
// connection from a chunk function's own failure.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

// skip reads and drops n bytes of the connection.
func (c *Conn) skip(n uint64) error {
	for n > 0 {
		k, err := c.br.Discard(int(min(n, 1<<30)))
		n -= uint64(k)
		if err != nil {
			return err
		}
	}
	return nil
}
