package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// call is one request waiting for its reply: where the reply's payload
// may go, and, once a reader has delivered it, the reply. Pooled.
type call struct {
	into      []byte
	intoV     [][]byte // read the payload across these when it fits exactly
	scattered bool     // it was
	hdr       []byte
	payload   []byte
	isErr     bool
	detached  bool        // the caller gave up mid-frame; its reply was discarded
	abandoned atomic.Bool // the caller wants to give up while its frame is being read
	err       error       // connection failure
	keep      bool        // Poll: a reader giving up leaves the reply to the next
	done      chan struct{}
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// Reply is a successful response. Payload aliases the caller's buffer when it
// fit there.
type Reply struct {
	Header  []byte
	Payload []byte
	// Scattered says the payload was read across CallInto's buffers
	// (Payload is then nil).
	Scattered bool
}

func totalLen(bs [][]byte) uint64 {
	var n uint64
	for _, b := range bs {
		n += uint64(len(b))
	}
	return n
}

// Call sends a request and waits for its reply. hdr and payload are not
// retained after Call returns. When into is large enough for the reply's
// payload, the payload is read into it. Errors from the server come back as
// *pdc.ServerError wrapping the sentinel of its code; a lost connection as
// pdc.ErrUnavailable; ctx's end as pdc.ErrTimeout or pdc.ErrCanceled (the
// server is told to drop the request).
func (c *Conn) Call(ctx context.Context, m wire.Method, hdr []byte, payload [][]byte, into []byte) (Reply, error) {
	return c.call(ctx, m, hdr, payload, into, nil)
}

// CallInto is Call reading the reply's payload across into, in order, when
// its length is exactly theirs (Reply.Scattered); otherwise the payload
// comes in a new buffer.
func (c *Conn) CallInto(ctx context.Context, m wire.Method, hdr []byte, payload [][]byte, into [][]byte) (Reply, error) {
	return c.call(ctx, m, hdr, payload, nil, into)
}

func (c *Conn) call(ctx context.Context, m wire.Method, hdr []byte, payload [][]byte, into []byte, intoV [][]byte) (Reply, error) {
	p, err := c.send(ctx, m, hdr, payload, into, intoV)
	if err != nil {
		return Reply{}, err
	}
	return p.await(ctx)
}

// Pending is a request that has been sent and whose reply is still to be
// collected by Wait. Until then its caller's into buffers belong to the
// connection, which may read the reply into them at any time.
type Pending struct {
	c  *Conn
	f  wire.Frame
	cl *call
}

// Send sends a request without waiting for its reply: the reply is
// collected by the Pending's Wait, which must be called exactly once. It
// lets a caller keep several requests in flight on one connection, each
// sent as soon as it is ready, so that the server works on one while the
// next is on the wire. hdr and payload are not retained after Send
// returns; into is as for CallInto. An error here means nothing needs to
// be waited for.
func (c *Conn) Send(ctx context.Context, m wire.Method, hdr []byte, payload [][]byte, into [][]byte) (*Pending, error) {
	p, err := c.send(ctx, m, hdr, payload, nil, into)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// send is Send returning the Pending by value: a call that waits at once
// keeps it off the heap.
func (c *Conn) send(ctx context.Context, m wire.Method, hdr []byte, payload [][]byte, into []byte, intoV [][]byte) (Pending, error) {
	f := wire.Frame{Method: m, ID: c.nextID.Add(1)}
	if c.hello.Trace {
		if f.Trace = TraceOf(ctx); f.Trace == 0 {
			f.Trace = NewTrace()
		}
	}
	if d, ok := ctx.Deadline(); ok {
		f.Timeout = time.Until(d)
		if f.Timeout <= 0 {
			return Pending{}, fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
		}
	}
	if ctx.Err() != nil {
		return Pending{}, fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
	}
	// Counted before the check, so that CallStream, which checks the
	// count after claiming the connection, and this call never both go.
	c.inFlight.Add(1)
	if c.streaming.Load() {
		c.inFlight.Add(-1)
		return Pending{}, fmt.Errorf("server %s: %s: the connection carries a stream; use another: %w", c.label, m, pdc.ErrInvalid)
	}
	cl := callPool.Get().(*call)
	cl.into, cl.intoV = into, intoV
	c.mu.Lock()
	if c.mu.err != nil {
		err := c.mu.err
		c.mu.Unlock()
		c.release(cl)
		c.inFlight.Add(-1)
		return Pending{}, fmt.Errorf("%s: %w", m, err)
	}
	c.mu.pending[f.ID] = cl
	c.mu.Unlock()

	w := c.peer.start()
	err := c.w.write(ctx, f, hdr, payload)
	w.stop()
	if err != nil {
		if !errors.Is(err, errNotSent) {
			// The stream may be torn. The writer knows only the address;
			// the calls this fails are told which server it was.
			c.fail(fmt.Errorf("connection to server %s lost: %w", c.label, err))
		}
		if ctx.Err() != nil {
			// Our deadline cut the write short (or nothing went out): the
			// caller gets its context's error, not the connection's.
			if !c.forget(f.ID) {
				<-cl.done
			}
			c.release(cl)
			c.inFlight.Add(-1)
			return Pending{}, fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
		}
		// Otherwise the connection has failed, and with it this call:
		// Wait reports how.
	}
	return Pending{c: c, f: f, cl: cl}, nil
}

// Poll is Wait for a request sent without into buffers, except that if
// ctx ends first the request is kept: the error is ctx's, and a later Poll
// or Wait still gets the reply.
func (p *Pending) Poll(ctx context.Context) (Reply, error) {
	if p.cl.into != nil || p.cl.intoV != nil {
		return Reply{}, fmt.Errorf("server %s: %s: Poll of a request with reply buffers: %w", p.c.label, p.f.Method, pdc.ErrInternal)
	}
	p.cl.keep = true
	return p.await(ctx)
}

// Wait waits for the reply, reading it itself when nobody else is reading
// the connection. Errors are as for Call. If ctx ends first, the request is
// abandoned (the server is told to drop it) and its into buffers are free
// again when Wait returns.
func (p *Pending) Wait(ctx context.Context) (Reply, error) {
	return p.await(ctx)
}

func (p *Pending) await(ctx context.Context) (Reply, error) {
	c, f, cl := p.c, p.f, p.cl
	over := func() (Reply, error) { // ctx ended first
		if cl.keep {
			return Reply{}, fmt.Errorf("server %s: %s: %w", c.label, f.Method, ctxErr(ctx))
		}
		// Still in flight until its frame is dropped: giveUp may yet
		// interrupt whoever reads it, and a stream must not start first.
		rep, err := c.giveUp(ctx, f, cl)
		c.inFlight.Add(-1)
		return rep, err
	}
	for {
		// First without ctx: a context made for the call (libpdc's) makes
		// its Done channel when first asked, and a caller that finds the
		// token free, as one alone on its connection does, need not ask.
		tok := false
		select {
		case <-cl.done:
			c.inFlight.Add(-1)
			return c.finish(ctx, f.Method, cl)
		case c.readTok <- struct{}{}:
			tok = true
		default:
		}
		if !tok {
			select {
			case <-cl.done:
				c.inFlight.Add(-1)
				return c.finish(ctx, f.Method, cl)
			case c.readTok <- struct{}{}:
			case <-ctx.Done():
				return over()
			}
		}
		select {
		case <-cl.done:
			// Delivered just before we took the token.
			<-c.readTok
			c.inFlight.Add(-1)
			return c.finish(ctx, f.Method, cl)
		default:
		}
		c.lead(ctx, cl)
		<-c.readTok
		select {
		case <-cl.done:
			c.inFlight.Add(-1)
			return c.finish(ctx, f.Method, cl)
		default:
		}
		if ctx.Err() != nil {
			return over()
		}
	}
}

// cancelWriteTimeout bounds sending a cancellation to a server that may
// have stopped reading.
const cancelWriteTimeout = time.Second

// giveUp ends a call whose context ended before its reply came.
func (c *Conn) giveUp(ctx context.Context, f wire.Frame, cl *call) (Reply, error) {
	c.mu.Lock()
	_, pending := c.mu.pending[f.ID]
	delete(c.mu.pending, f.ID)
	c.mu.Unlock()
	if pending {
		c.release(cl)
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || f.Timeout == 0 {
			// The server's copy of a deadline fires on its own; a
			// cancellation it can only learn from us.
			cf := wire.Frame{Flags: wire.FlagCancel, Method: f.Method, ID: f.ID}
			wctx, cancel := context.WithTimeout(context.Background(), cancelWriteTimeout)
			_ = c.w.write(wctx, cf, nil, nil)
			cancel()
		}
		return Reply{}, fmt.Errorf("server %s: %s: %w", c.label, f.Method, ctxErr(ctx))
	}
	// Its frame is being read into our buffer. Ask the reader to discard
	// the rest, or do so ourselves if nobody is reading.
	cl.abandoned.Store(true)
	c.interrupt()
	select {
	case <-cl.done:
	case c.readTok <- struct{}{}:
		if c.rs.cl == cl {
			c.detach()
		}
		<-c.readTok
		<-cl.done // detached, delivered or failed by now
	}
	return c.finish(ctx, f.Method, cl)
}

func (c *Conn) finish(ctx context.Context, m wire.Method, cl *call) (Reply, error) {
	defer c.release(cl)
	if cl.detached {
		return Reply{}, fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
	}
	if cl.err != nil {
		return Reply{}, fmt.Errorf("%s: %w", m, cl.err)
	}
	if cl.isErr {
		var eb wire.ErrorBody
		if err := eb.Unmarshal(cl.hdr); err != nil {
			return Reply{}, fmt.Errorf("server %s: %s: bad error reply: %w", c.label, m, err)
		}
		return Reply{}, &pdc.ServerError{Server: c.label, Method: m.String(), Msg: eb.Message, Err: eb.Code.Err()}
	}
	return Reply{Header: cl.hdr, Payload: cl.payload, Scattered: cl.scattered}, nil
}

func (c *Conn) release(cl *call) {
	cl.into, cl.intoV, cl.scattered, cl.hdr, cl.payload, cl.isErr, cl.detached, cl.err, cl.keep = nil, nil, false, nil, nil, false, false, nil, false
	cl.abandoned.Store(false)
	callPool.Put(cl)
}

// forget removes a pending call; false if a reader has claimed it.
func (c *Conn) forget(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.pending[id]; ok {
		delete(c.mu.pending, id)
		return true
	}
	return false
}
