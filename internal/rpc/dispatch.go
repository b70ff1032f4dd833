package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// inbound is a request read and admitted, to be run: its Request, its
// context and what running it needs, in one allocation.
type inbound struct {
	req      Request
	ctx      reqCtx
	c        *serverConn
	h        Handler
	f        wire.Frame
	owned    bool
	inline   bool
	payload  []byte    // the request's payload, if the handler does not own it
	grant    int64     // of the payload budget, for payload
	start    time.Time // when it was admitted; set only for an Observer or the request log
	describe func(hdr []byte) []slog.Attr
	waits    bool // the method waits by design (Waits): never a slow request
}

// dispatch handles one frame. A request comes back as run, to be run on
// a goroutine of its own unless inline; an error closes the connection.
func (c *serverConn) dispatch(f wire.Frame) (run *inbound, inline bool, err error) {
	c.recvd.Add(wire.FrameSize + uint64(f.HeaderLen) + f.PayloadLen)
	he, ok, err := c.route(f)
	if !ok {
		return nil, false, err
	}
	// A request tried on this goroutine reads its payload as it arrives.
	streamed := he.here != nil && f.PayloadLen > 0
	var payload []byte
	var grant int64 // of the payload budget, for payload
	if f.Flags&wire.FlagTrace != 0 {
		// Read apart from the header, which is often empty: no buffer
		// is made for the id alone.
		if err := c.r.read(c.r.trace[:]); err != nil {
			return nil, false, err
		}
		f.TakeTrace(&c.r.trace)
	}
	hdr, err := c.r.header(f)
	if err == nil && !streamed {
		payload, grant, err = c.payload(f)
	}
	if err != nil {
		return nil, false, err
	}
	if he.inlineMax > 0 && f.HeaderLen <= he.inlineMax && f.PayloadLen == 0 {
		he.inline = true
	}
	in, err := c.admit(f, he, hdr, payload, grant, streamed)
	if in == nil {
		return nil, false, err
	}
	if he.here != nil {
		if answered, err := c.tryHere(in, he.here, streamed); answered || err != nil {
			return nil, false, err
		}
	}
	if !he.inline {
		if err := c.addInflight(in); err != nil {
			return nil, false, err
		}
	}
	in.inline = he.inline
	return in, he.inline, nil
}

// route finds the handler of a frame. Frames that need none (a cancel)
// and requests refused before a handler sees them (a version or method
// this server does not know, a payload the method does not take) are
// dealt with here: ok is false, and err is set if the connection must end.
func (c *serverConn) route(f wire.Frame) (he handlerEntry, ok bool, err error) {
	if f.Version != wire.Version {
		return he, false, c.refuseFrame(f, wire.CodeVersion,
			fmt.Sprintf("protocol version %d not supported; this server speaks version %d", f.Version, wire.Version))
	}
	if f.Flags&wire.FlagCancel != 0 {
		c.mu.Lock()
		rc := c.inflight[f.ID]
		c.mu.Unlock()
		if rc != nil {
			rc.cancelRequest()
		}
		return he, false, nil
	}
	if f.Flags&wire.FlagResponse != 0 {
		return he, false, fmt.Errorf("client sent a response frame (id %d): %w", f.ID, pdc.ErrProtocol)
	}
	he, ok = c.s.handlers[f.Method]
	if !ok || f.Method == wire.MethodHello || f.Method == wire.MethodAuth {
		return he, false, c.refuseFrame(f, wire.CodeUnimplemented, fmt.Sprintf("unknown method %d", uint32(f.Method)))
	}
	if f.PayloadLen > 0 && !he.payload {
		// Skipped as it arrives, never kept.
		return he, false, c.refuseFrame(f, wire.CodeInvalid,
			fmt.Sprintf("%s takes no payload, and the request carried %d bytes", f.Method, f.PayloadLen))
	}
	return he, true, nil
}

// refuseFrame skips a request's header and payload, unread, and answers
// it with an error.
func (c *serverConn) refuseFrame(f wire.Frame, code wire.Code, msg string) error {
	if err := c.r.discard(uint64(f.HeaderLen) + f.PayloadLen); err != nil {
		return err
	}
	return c.replyErr(f, code, msg)
}

// putBack gives back the payload of a request that never reaches its
// handler; one not read yet (streamed) is skipped.
func (c *serverConn) putBack(f wire.Frame, streamed bool, payload []byte, grant int64) error {
	if streamed {
		return c.r.discard(f.PayloadLen)
	}
	c.s.putPayload(payload, grant)
	return nil
}

// admit takes one of the connection's in-flight slots for a request and
// counts it as a running handler, so that Shutdown waits for it. A request
// over MaxInFlight, or one that comes while the server drains, is refused
// instead (nil, and an error only if the connection must end): refused
// rather than left unread, since a connection that stops reading cannot
// see its client's cancellations.
func (c *serverConn) admit(f wire.Frame, he handlerEntry, hdr, payload []byte, grant int64, streamed bool) (*inbound, error) {
	s := c.s
	select {
	case c.sem <- struct{}{}:
	default:
		if err := c.putBack(f, streamed, payload, grant); err != nil {
			return nil, err
		}
		return nil, c.replyErr(f, wire.CodeUnavailable,
			fmt.Sprintf("server busy: %d requests in flight on this connection; retry or spread over more connections", s.cfg.MaxInFlight))
	}
	if f.Trace == 0 {
		// From a client that sends none: the server's own, so that the
		// request's log lines and the requests it sends on share one.
		f.Trace = NewTrace()
	}
	in := &inbound{c: c, h: he.h, f: f, owned: he.owned, payload: payload, grant: grant, describe: he.describe, waits: he.waits}
	if s.obs != nil || s.logsRequests() {
		in.start = time.Now()
	}
	ctx := &in.ctx
	ctx.init(c.ctx, f.Timeout, f.Trace)
	req := &in.req
	*req = Request{Method: f.Method, Header: hdr, Payload: payload, Client: c.client, Remote: c.remote, Local: c.local,
		Trace: f.Trace, conn: c, id: f.ID, inline: he.inline}
	if he.owned {
		req.Release = s.releaser(payload, grant)
	}
	// Checking draining and counting the handler under one lock orders
	// every Add before Shutdown's Wait.
	s.drainMu.RLock()
	if s.draining.Load() {
		s.drainMu.RUnlock()
		ctx.release()
		<-c.sem
		if err := c.putBack(f, streamed, payload, grant); err != nil {
			return nil, err
		}
		return nil, c.replyErr(f, wire.CodeUnavailable, "server is shutting down")
	}
	s.handlerWG.Add(1)
	s.drainMu.RUnlock()
	if s.obs != nil {
		s.obs.Started(f.Method)
	}
	return in, nil
}

// tryHere runs the method's here handler (TryHere) on this goroutine,
// with the payload to read as it arrives. It reports whether the request
// is over: answered here, or failed with the connection. If here declined
// it, the payload has been read whole into in, for the handler to get on
// a goroutine of its own.
func (c *serverConn) tryHere(in *inbound, here Handler, streamed bool) (over bool, err error) {
	s, f, req, ctx := c.s, in.f, &in.req, &in.ctx
	req.ticket = c.turns.take()
	body := &bodyReader{r: c.r, left: f.PayloadLen}
	req.Body, req.BodyLen = body, int64(f.PayloadLen)
	req.inline = true // it may not stream its answer from this goroutine
	resp, err := c.run(ctx, here, req, in.owned && !streamed)
	req.inline, req.Body, req.BodyLen = false, nil, 0
	declined := errors.Is(err, ErrElsewhere)
	if declined && body.read > 0 {
		declined = false
		err = fmt.Errorf("%s: handler declined a request after reading its payload: %w", f.Method, pdc.ErrInternal)
	}
	if !declined {
		req.EndTurn()
		broken := body.finish()
		s.requests.Add(1)
		s.served(in, err)
		ctx.release()
		if broken == nil {
			err = c.answer(f, resp, err)
		} else {
			if resp != nil && resp.Done != nil {
				resp.Done()
			}
			err = broken // the stream is torn: the connection ends
		}
		<-c.sem
		s.handlerWG.Done()
		return true, err
	}
	if streamed {
		payload, grant, err := c.payload(f)
		if err != nil {
			req.EndTurn()
			s.served(in, err)
			ctx.release()
			<-c.sem
			s.handlerWG.Done()
			return true, err
		}
		in.payload, in.grant = payload, grant
		req.Payload, req.Release = payload, s.releaser(payload, grant)
	}
	return false, nil
}

// addInflight records the request's context under its id, for a cancel
// frame to find. An id already in flight is a protocol error that ends
// the connection.
func (c *serverConn) addInflight(in *inbound) error {
	c.mu.Lock()
	if _, dup := c.inflight[in.f.ID]; dup {
		c.mu.Unlock()
		in.ctx.release()
		<-c.sem
		_ = c.putBack(in.f, false, in.payload, in.grant) // the connection ends anyway
		in.req.EndTurn()
		err := fmt.Errorf("request id %d reused while in flight: %w", in.f.ID, pdc.ErrProtocol)
		c.s.served(in, err)
		c.s.handlerWG.Done()
		return err
	}
	c.inflight[in.f.ID] = &in.ctx
	c.mu.Unlock()
	return nil
}

// run runs the request's handler and sends its answer: queued for the
// burst's write if inline, written at once otherwise.
func (in *inbound) run() {
	c, req, f := in.c, &in.req, in.f
	s, ctx := c.s, &in.ctx
	defer s.handlerWG.Done()
	resp, err := c.run(ctx, in.h, req, in.owned)
	req.EndTurn()
	s.requests.Add(1)
	s.served(in, err)
	if !in.inline {
		c.mu.Lock()
		delete(c.inflight, f.ID)
		c.mu.Unlock()
	}
	ctx.release()
	// The slot is held until the reply is queued or written, so that a
	// client that does not read its replies is limited to MaxInFlight.
	defer func() { <-c.sem }()
	if !in.owned {
		// The payload, which the answer may carry, is free once the
		// answer is written or copied.
		defer s.putPayload(in.payload, in.grant)
	}
	if err != nil {
		if resp != nil && resp.Done != nil {
			resp.Done()
		}
		body := wire.ErrorBody{Code: wire.CodeOf(err), Message: err.Error()}
		out := wire.Frame{Flags: wire.FlagResponse | wire.FlagError, Method: f.Method, ID: f.ID}
		if in.inline {
			_ = c.w.queue(c.ctx, out, body.Marshal(nil), nil)
		} else {
			_ = c.w.write(c.ctx, out, body.Marshal(nil), nil)
		}
		return
	}
	if resp.Done != nil {
		defer resp.Done()
	}
	out := wire.Frame{Flags: wire.FlagResponse, Method: f.Method, ID: f.ID}
	_ = c.reply(in.inline, out, resp.Header, resp.Payload)
}

// reply sends out, the answer with hdr and payload, queued if inline. An
// answer whose payload cannot be read (errPayloadFault) goes as that
// error instead, so that the client learns it at once rather than at its
// deadline.
func (c *serverConn) reply(inline bool, out wire.Frame, hdr []byte, payload [][]byte) error {
	send := c.w.write
	if inline {
		send = c.w.queue
	}
	err := send(c.ctx, out, hdr, payload)
	if errors.Is(err, errPayloadFault) {
		body := wire.ErrorBody{Code: wire.CodeOf(err), Message: err.Error()}
		out.Flags |= wire.FlagError
		err = send(c.ctx, out, body.Marshal(nil), nil)
	}
	return err
}

// answer writes the answer of a request served on the reading goroutine
// at once: its work took long enough that the client should not wait for
// the next request's to learn of it. Only a failed write is returned (it
// ends the connection).
func (c *serverConn) answer(f wire.Frame, resp *Response, err error) error {
	out := wire.Frame{Flags: wire.FlagResponse, Method: f.Method, ID: f.ID}
	var hdr []byte
	var payload [][]byte
	if err != nil {
		body := wire.ErrorBody{Code: wire.CodeOf(err), Message: err.Error()}
		out.Flags |= wire.FlagError
		hdr = body.Marshal(nil)
	} else {
		hdr, payload = resp.Header, resp.Payload
	}
	if resp != nil && resp.Done != nil {
		defer resp.Done()
	}
	if werr := c.reply(false, out, hdr, payload); werr != nil && !errors.Is(werr, errNotSent) {
		return werr
	}
	return nil
}

// run calls h, turning a panic into an internal error so that one bad
// request cannot take the server down.
func (c *serverConn) run(ctx context.Context, h Handler, req *Request, owned bool) (resp *Response, err error) {
	if ctx.Err() != nil {
		// The client gave up while the request queued: drop the work,
		// and the payload it would have owned.
		if owned && req.Release != nil {
			req.Release()
		}
		return nil, ctxErr(ctx)
	}
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("handler panicked", "method", req.Method.String(), "panic", p, "stack", string(debug.Stack()))
			resp, err = nil, fmt.Errorf("%s: server bug (panic: %v): %w", req.Method, p, pdc.ErrInternal)
		}
	}()
	resp, err = h(ctx, req)
	if err == nil && resp == nil {
		resp = &Response{}
	}
	if err == nil && len(resp.Header) > wire.DefaultMaxHeader {
		// A client refuses a longer header and drops the connection with
		// every call on it: fail this call alone, saying which.
		if resp.Done != nil {
			resp.Done()
		}
		return nil, fmt.Errorf("%s: reply header of %d bytes is over the %d a client accepts: %w", req.Method, len(resp.Header), wire.DefaultMaxHeader, pdc.ErrTooLarge)
	}
	return resp, err
}

func (c *serverConn) replyErr(f wire.Frame, code wire.Code, msg string) error {
	if c.s.obs != nil {
		c.s.obs.Refused(f.Method, code)
	}
	body := wire.ErrorBody{Code: code, Message: msg}
	out := wire.Frame{Flags: wire.FlagResponse | wire.FlagError, Method: f.Method, ID: f.ID}
	return c.w.write(c.ctx, out, body.Marshal(nil), nil)
}
