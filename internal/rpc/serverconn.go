package rpc

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/wire"
)

// serverConn is one client connection.
type serverConn struct {
	s      *Server
	nc     net.Conn
	r      *frameReader
	w      *frameWriter
	client string
	peer   string // netio.PeerKey of its remote address
	remote string // its remote address, as Request.Remote: formatted once
	local  string // its local address, as Request.Local

	// Guarded by s.mu: whether it counts against the connection bounds,
	// and its place among the connections in their handshake.
	counted bool
	shaking *list.Element

	ctx    context.Context // canceled when the connection ends
	cancel context.CancelFunc
	sem    chan struct{}
	wg     sync.WaitGroup // workers of this connection

	handoff chan struct{} // an idle worker receives from it to become the reader
	idle    atomic.Int32  // workers waiting on handoff

	mu       sync.Mutex
	inflight map[uint64]*reqCtx // guarded by mu

	turns turns // of TryHere requests

	recvd atomic.Uint64 // bytes of frames read

	// id names the connection to its client (AuthOK.Conn), from its
	// admission; over is closed once its handlers are done.
	id   uint64
	over chan struct{}
}

func (c *serverConn) serve() {
	s := c.s
	netio.Tune(c.nc, s.cfg.StallTimeout)
	// Until its client has authenticated, a connection reads through a
	// small buffer: a peer that has proven nothing holds next to nothing.
	c.r = newFrameReaderSize(c.nc, s.cfg.Limits, handshakeBufSize)
	defer c.finish()
	// The connection is made ready to serve, and counted as a client's,
	// before its client learns that it is in.
	admitted := false
	err := c.handshake(func() {
		admitted = true
		s.mu.Lock()
		if c.shaking != nil {
			s.mu.shaking.Remove(c.shaking)
			c.shaking = nil
		}
		// A client that connects again while the end of its last
		// session is handled (OnSessionEnd drops what it held: a data
		// server's transfers and lane) waits for that: the end must not
		// take what the new session makes.
		for ending := s.mu.ending[c.client]; ending != nil && c.ctx.Err() == nil; ending = s.mu.ending[c.client] {
			s.mu.Unlock()
			if s.admitWait != nil {
				s.admitWait(c.client)
			}
			select {
			case <-ending:
			case <-c.ctx.Done():
			}
			s.mu.Lock()
		}
		s.mu.sessions[c.client]++
		s.mu.lastID++
		c.id, c.over = s.mu.lastID, make(chan struct{})
		s.mu.byID[c.id] = c
		s.mu.Unlock()
		s.clients.Add(1)
		c.authenticated()
		c.sem = make(chan struct{}, s.cfg.MaxInFlight)
		c.handoff = make(chan struct{})
	})
	if admitted {
		defer s.clients.Add(-1)
		defer c.endSession()
	}
	if err != nil {
		if !errors.Is(err, pdc.ErrPermission) && !isClosedErr(err) && c.ctx.Err() == nil { // refusals are logged in handshake
			s.drops.Info("handshake failed", "remote", c.nc.RemoteAddr().String(), "err", err)
		}
		return
	}
	c.wg.Add(1)
	go c.worker()
	<-c.ctx.Done()
}

// authenticated gives the connection its full read buffer, and bounds on
// how slowly a frame may arrive. Bytes its client sent beyond its auth
// frame are read first.
func (c *serverConn) authenticated() {
	var src io.Reader = c.nc
	if n := c.r.br.Buffered(); n > 0 {
		rest, _ := c.r.br.Peek(n)
		src = &prefixReader{rest: bytes.Clone(rest), r: c.nc}
	}
	r := newFrameReader(src, c.s.cfg.Limits)
	r.lw = netio.NewLowWater(c.nc)
	r.pace = pace{nc: c.nc, stall: c.s.cfg.StallTimeout, minRate: max(c.s.cfg.MinRecvRate, 0)}
	c.r = r
}

// prefixReader reads rest, then r.
type prefixReader struct {
	rest []byte
	r    io.Reader
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if len(p.rest) > 0 {
		n := copy(b, p.rest)
		p.rest = p.rest[n:]
		return n, nil
	}
	return p.r.Read(b)
}

// endSession runs once the connection's handlers are done.
func (c *serverConn) endSession() {
	c.cancel()
	_ = c.nc.Close()
	c.wg.Wait()
	s := c.s
	s.mu.Lock()
	delete(s.mu.byID, c.id)
	close(c.over)
	s.mu.sessions[c.client]--
	last := s.mu.sessions[c.client] == 0
	var done, prev chan struct{}
	if last {
		delete(s.mu.sessions, c.client)
		if s.cfg.OnSessionEnd != nil {
			// Until it returns, a new connection of the client waits
			// (see serve); an earlier end still running goes first.
			done, prev = make(chan struct{}), s.mu.ending[c.client]
			s.mu.ending[c.client] = done
		}
	}
	s.mu.Unlock()
	if done == nil {
		return
	}
	if prev != nil {
		<-prev
	}
	s.cfg.OnSessionEnd(c.client)
	s.mu.Lock()
	if s.mu.ending[c.client] == done {
		delete(s.mu.ending, c.client)
	}
	s.mu.Unlock()
	close(done)
}

// maxIdleWorkers bounds the goroutines a connection keeps waiting to read.
const maxIdleWorkers = 16

// worker reads frames until one needs a handler, passes reading on to an
// idle worker (or a new one), runs the handler itself and then waits to
// read again. The request that woke the reader is thus served without a
// goroutine switch, and workers are reused rather than started, with their
// grown stacks, per request. One worker reads at a time.
func (c *serverConn) worker() {
	defer c.wg.Done()
	for {
		run, err := c.readRequest()
		if err != nil {
			var slow *errSlow
			if errors.As(err, &slow) {
				c.s.slow.Add(1)
			}
			if !isClosedErr(err) && c.ctx.Err() == nil {
				c.s.drops.Warn("closing connection: "+err.Error(), "remote", c.nc.RemoteAddr().String(), "client", c.client)
			}
			c.cancel()
			return
		}
		select {
		case c.handoff <- struct{}{}:
		default:
			c.wg.Add(1)
			go c.worker()
		}
		run.run()
		if c.idle.Add(1) > maxIdleWorkers {
			c.idle.Add(-1)
			return
		}
		select {
		case <-c.handoff:
			c.idle.Add(-1)
		case <-c.ctx.Done():
			c.idle.Add(-1)
			return
		}
	}
}

// readRequest reads frames until one is a request to run on a goroutine of
// its own. Inline requests are run here.
func (c *serverConn) readRequest() (*inbound, error) {
	for {
		f, err := c.r.next()
		if err != nil {
			return nil, err
		}
		run, inline, err := c.dispatch(f)
		if err != nil {
			return nil, err
		}
		if inline {
			run.run()
			if !c.frameBuffered() {
				// No further request is waiting: send the answers queued
				// for this burst before blocking on the next read.
				if err := c.w.flush(c.ctx); err != nil {
					return nil, err
				}
			}
			continue
		}
		if run != nil {
			if err := c.w.flush(c.ctx); err != nil { // queued inline replies
				return nil, err
			}
			return run, nil
		}
		if !c.frameBuffered() {
			if err := c.w.flush(c.ctx); err != nil {
				return nil, err
			}
		}
	}
}

// frameBuffered reports whether the next frame is wholly in the read buffer.
func (c *serverConn) frameBuffered() bool {
	b, err := c.r.br.Peek(min(c.r.br.Buffered(), wire.FrameSize))
	if err != nil || len(b) < wire.FrameSize {
		return false
	}
	f, err := wire.DecodeFrame(b)
	if err != nil {
		return true // let next report it
	}
	return uint64(c.r.br.Buffered()) >= wire.FrameSize+uint64(f.HeaderLen)+f.PayloadLen
}

// finish ends the connection: cancels its handlers, waits for them and
// releases it from the server.
func (c *serverConn) finish() {
	c.cancel()
	c.w.fail(pdc.ErrClosed)
	_ = c.nc.Close()
	c.wg.Wait()
	c.s.mu.Lock()
	// Under the lock Stats sums under, so that no byte is counted twice
	// or missed.
	c.s.closedIn.Add(c.recvd.Load())
	c.s.closedOut.Add(c.w.sent.Load())
	delete(c.s.mu.conns, c)
	c.s.uncountLocked(c)
	c.s.mu.Unlock()
	c.s.wg.Done()
}

func isClosedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, pdc.ErrClosed) || isConnReset(err)
}

// fence ends the connections ids of c's client that its client has given
// up on (Auth.Supersedes), and waits, until by at the latest, for
// their handlers to be done: a request the server was reading or handling
// on one of them is then either handled (and, by a data server, ordered
// before anything c brings) or dropped, never handled after a request
// sent on c. It reports whether every one of them is over. c is counted
// in its client's session already, so that ending the others does not end
// the session (and drop what it holds).
func (c *serverConn) fence(ids []uint64, by time.Time) bool {
	s := c.s
	var olds []*serverConn
	s.mu.Lock()
	for _, id := range ids {
		// A connection of another client name is not this client's to
		// end: it counts as over, as an id this server never gave does.
		if o := s.mu.byID[id]; o != nil && o != c && o.client == c.client {
			olds = append(olds, o)
		}
	}
	s.mu.Unlock()
	if len(olds) == 0 {
		return true
	}
	for _, o := range olds {
		o.cancel()
		_ = o.nc.Close()
	}
	t := time.NewTimer(time.Until(by))
	defer t.Stop()
	for _, o := range olds {
		select {
		case <-o.over:
		case <-c.ctx.Done():
			return false
		case <-t.C:
			return false
		}
	}
	return true
}
