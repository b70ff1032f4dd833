package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// readState is a frame being read. It survives a reader leaving mid-frame.
type readState struct {
	prefix  [wire.FrameSize]byte
	nPrefix int
	inFrame bool
	f       wire.Frame
	cl      *call // whose frame this is; nil: discard it
	hdr     []byte
	nHdr    int
	payload []byte
	nPay    int
	segs    [][]byte // for a scattered read, the segments after payload
	left    int64    // payload bytes still to come, over all segments
	skip    uint64   // bytes still to discard
}

// lead reads and delivers frames until own's reply has been delivered, ctx
// ends, or the connection fails. The caller holds the read token. own may
// be nil (read until the connection ends).
func (c *Conn) lead(ctx context.Context, own *call) {
	defer c.peer.start().stop()
	if c.rc != nil && blockingWait(ctx) {
		// The interrupt that ends the wait with ctx is armed only if the
		// reply is slow to come (pollReadable): a reply within
		// lazyInterrupt costs no AfterFunc, which on a context made for
		// the call (libpdc's) allocated the context's table of children
		// and the interrupt's channel, every round trip.
		c.pollMode, c.pollCtx = true, ctx
		defer func() { c.pollMode, c.pollCtx = false, nil }()
	} else if ctx.Done() != nil {
		c.armInterrupt(ctx)
	}
	defer c.disarmInterrupt()
	for {
		got, err := c.readFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.clearDeadline()
				c.detachAbandoned()
				if ctx.Err() != nil {
					if own != nil && c.rs.cl == own && !own.keep {
						c.detach()
					}
					return
				}
				continue // another caller interrupted us to give up its frame
			}
			select {
			case <-c.done:
				err = nil // closed by its owner; keep that error
			default:
			}
			if err != nil {
				if !errors.Is(err, pdc.ErrProtocol) && !errors.Is(err, pdc.ErrTooLarge) {
					err = fmt.Errorf("connection to server %s lost: %w: %w", c.label, pdc.ErrUnavailable, err)
				} else {
					err = fmt.Errorf("server %s: %w", c.label, err)
				}
			}
			c.failReading(err)
			return
		}
		if got != nil {
			got.done <- struct{}{}
			if got == own {
				return
			}
		}
	}
}

// readFrame reads until one frame is complete and returns its call (nil if
// the frame was discarded). It resumes a frame a previous reader left
// unfinished. The caller holds the read token.
func (c *Conn) readFrame() (*call, error) {
	rs := &c.rs
	if !rs.inFrame {
		if err := c.readPrefix(); err != nil {
			return nil, err
		}
	}
	if rs.skip > 0 {
		// The mark may still be up for a payload whose caller left
		// mid-way (detach). Discard reads a buffer at a time, so the
		// last reads would wait for more than is left to come: a wait
		// in poll(2) for ever, a parked read unless the rest arrived.
		c.lw.Expect(0)
	}
	for rs.skip > 0 {
		n, err := c.br.Discard(int(min(rs.skip, 1<<30)))
		rs.skip -= uint64(n)
		if err != nil {
			return nil, err
		}
	}
	if rs.cl != nil {
		if err := c.readBody(); err != nil {
			return nil, err
		}
	}
	c.lw.Expect(0) // the next frame may be a few bytes, or none
	cl := rs.cl
	if cl != nil {
		cl.hdr, cl.payload, cl.isErr = rs.hdr, rs.payload, rs.f.Flags&wire.FlagError != 0
		if cl.scattered {
			cl.payload = nil
		}
	}
	*rs = readState{}
	c.lastRead.Store(time.Now().UnixNano())
	return cl, nil
}

// readPrefix reads a frame's prefix and starts the frame: it claims the
// call whose reply it is, or marks the frame's bytes to be skipped when
// nobody waits for it any more.
func (c *Conn) readPrefix() error {
	rs := &c.rs
	for rs.nPrefix < wire.FrameSize {
		n, err := c.br.Read(rs.prefix[rs.nPrefix:])
		rs.nPrefix += n
		if err != nil {
			return err
		}
	}
	rs.nPrefix = 0
	f, err := wire.DecodeFrame(rs.prefix[:])
	if err == nil {
		err = c.lim.Check(f)
	}
	if err != nil {
		return err
	}
	if f.Flags&wire.FlagResponse == 0 {
		return fmt.Errorf("server sent a request frame (%s id %d): %w", f.Method, f.ID, pdc.ErrProtocol)
	}
	rs.inFrame, rs.f = true, f
	c.mu.Lock()
	cl := c.mu.pending[f.ID]
	delete(c.mu.pending, f.ID)
	c.mu.Unlock()
	if cl == nil || cl.abandoned.Load() {
		if cl != nil {
			cl.detached = true
			cl.done <- struct{}{}
		}
		rs.skip = uint64(f.HeaderLen) + f.PayloadLen
		return nil
	}
	rs.cl = cl
	rs.hdr = make([]byte, f.HeaderLen)
	rs.left = int64(f.PayloadLen)
	// The payload goes where its caller asked when it fits: across its
	// buffers if it fits them exactly, into its one buffer if there is
	// room; an error's, or one that does not fit, gets a buffer of its own.
	switch {
	case f.Flags&wire.FlagError == 0 && len(cl.intoV) > 0 && totalLen(cl.intoV) == f.PayloadLen:
		rs.payload, rs.segs = cl.intoV[0], cl.intoV[1:]
		cl.scattered = true
	case f.Flags&wire.FlagError == 0 && uint64(cap(cl.into)) >= f.PayloadLen:
		rs.payload = cl.into[:f.PayloadLen]
	default:
		rs.payload = make([]byte, f.PayloadLen)
	}
	return nil
}

// readBody reads the rest of a claimed frame's header and its payload
// into the buffers readPrefix chose. A reader that leaves early leaves
// its progress in c.rs for the next.
func (c *Conn) readBody() error {
	rs := &c.rs
	for rs.nHdr < len(rs.hdr) {
		n, err := c.br.Read(rs.hdr[rs.nHdr:])
		rs.nHdr += n
		if err != nil {
			return err
		}
	}
	for {
		for rs.nPay < len(rs.payload) {
			// The payload's bytes are certain to come: sleep until
			// a good part of them has.
			c.lw.Expect(rs.left - int64(c.br.Buffered()))
			n, err := c.br.Read(rs.payload[rs.nPay:])
			rs.nPay += n
			rs.left -= int64(n)
			if err != nil {
				return err
			}
		}
		if len(rs.segs) == 0 {
			return nil
		}
		rs.payload, rs.segs, rs.nPay = rs.segs[0], rs.segs[1:], 0
	}
}

// detachAbandoned discards the rest of the current frame if its caller has
// given up on it.
func (c *Conn) detachAbandoned() {
	if cl := c.rs.cl; cl != nil && cl.abandoned.Load() {
		c.detach()
	}
}

// detach turns the rest of the current frame into bytes to discard and
// tells its caller that its buffer is free.
func (c *Conn) detach() {
	rs := &c.rs
	cl := rs.cl
	rs.skip = uint64(len(rs.hdr)-rs.nHdr) + uint64(len(rs.payload)-rs.nPay)
	for _, b := range rs.segs {
		rs.skip += uint64(len(b))
	}
	rs.cl, rs.hdr, rs.payload, rs.segs, rs.nHdr, rs.nPay = nil, nil, nil, nil, 0, 0
	cl.detached = true
	cl.done <- struct{}{}
}

// armInterrupt makes ctx's end interrupt the reader (the caller, who
// holds the read token) until disarmInterrupt.
func (c *Conn) armInterrupt(ctx context.Context) {
	fired := make(chan struct{})
	c.interruptFired = fired
	c.interruptStop = context.AfterFunc(ctx, func() {
		c.interrupt()
		close(fired)
	})
}

// disarmInterrupt undoes armInterrupt, if it ran.
func (c *Conn) disarmInterrupt() {
	stop, fired := c.interruptStop, c.interruptFired
	c.interruptStop, c.interruptFired = nil, nil
	if stop != nil && !stop() {
		// The interrupt ran or is running: once it has, clear it for the
		// next reader.
		<-fired
		c.clearDeadline()
	}
}

// interrupt makes a blocked read return at once; the reader checks why.
func (c *Conn) interrupt() {
	c.dlMu.Lock()
	c.setReadDeadlineLocked(time.Unix(1, 0))
	c.dlMu.Unlock()
	c.wk.wake()
}

func (c *Conn) clearDeadline() {
	c.dlMu.Lock()
	c.setReadDeadlineLocked(time.Time{})
	c.dlMu.Unlock()
}

// setReadDeadlineLocked sets the socket's read deadline, and the copy a
// poll(2) honours (pollReadable). The caller holds dlMu.
func (c *Conn) setReadDeadlineLocked(t time.Time) {
	_ = c.nc.SetReadDeadline(t)
	if t.IsZero() {
		c.readDeadline.Store(0)
	} else {
		c.readDeadline.Store(t.UnixNano())
	}
}

// failReading is fail for a holder of the read token: it also fails the
// call whose frame was being read.
func (c *Conn) failReading(err error) {
	c.fail(err)
	if cl := c.rs.cl; cl != nil {
		c.mu.Lock()
		cl.err = c.mu.err
		c.mu.Unlock()
		cl.done <- struct{}{}
	}
	c.rs = readState{}
}
