package rpc

import (
	"bytes"
	"container/list"
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/bufpool"
	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/wire"
)

// Request is one call as a handler sees it. Header belongs to the handler.
// Payload does too if the handler owns it (OwnsPayload, until it calls
// Release); otherwise it is the handler's until its answer is written,
// and may be returned in the answer without copying.
type Request struct {
	Method  wire.Method
	Header  []byte
	Payload []byte
	// Body, set instead of Payload for a handler tried on the reading
	// goroutine (TryHere), reads the payload's BodyLen bytes (of
	// which there may be none) from the connection as they arrive. What
	// the handler leaves unread is skipped after it returns.
	Body    io.Reader
	BodyLen int64
	// Client is the name the client gave in its handshake.
	Client string
	// Remote is the client's address.
	Remote string
	// Local is the address the client reached this server at (the
	// listener's own for a Unix socket).
	Local string
	// Release, set for a handler that owns its payload (OwnsPayload,
	// TryHere), gives the payload back: to bufpool, and its share
	// of the server's payload budget. The handler calls it once nothing
	// refers to the payload any more, which may be after it returns.
	// Safe to call from any goroutine, and more than once.
	Release func()

	conn   *serverConn
	id     uint64
	inline bool
	ticket uint64 // its place in the connection's turns; 0: none
}

// Chunk sends one chunk of a streamed answer: a response frame marked
// FlagMore, which the client receives before the final response (the
// handler's return, which ends the stream). Chunks keep their order. Only
// handlers that run on their own goroutine (not Inline) may stream.
func (r *Request) Chunk(ctx context.Context, hdr []byte, payload ...[]byte) error {
	if err := r.canStream(); err != nil {
		return err
	}
	f := wire.Frame{Flags: wire.FlagResponse | wire.FlagMore, Method: r.Method, ID: r.id}
	return r.conn.w.write(ctx, f, hdr, payload)
}

// ChunkFile sends n bytes of file from off as one chunk, from the page
// cache to the socket without passing through user space where the OS
// allows.
func (r *Request) ChunkFile(ctx context.Context, hdr []byte, file *os.File, off, n int64) error {
	if err := r.canStream(); err != nil {
		return err
	}
	f := wire.Frame{Flags: wire.FlagResponse | wire.FlagMore, Method: r.Method, ID: r.id}
	return r.conn.w.writeFile(ctx, f, hdr, file, off, n)
}

func (r *Request) canStream() error {
	if r.conn == nil || r.inline {
		return fmt.Errorf("%s: only a handler on its own goroutine can stream its answer: %w", r.Method, pdc.ErrInternal)
	}
	return nil
}

// Response is a handler's answer. The server owns it once the handler
// returns: the handler must not change the payload buffers afterwards.
type Response struct {
	Header  []byte
	Payload [][]byte
	// Done, if set, is called once the response has been written or
	// queued (its buffers copied), or dropped: the handler's buffers are
	// free again.
	Done func()
}

// Respond returns a response whose header is m.
func Respond(m wire.Message) *Response { return &Response{Header: m.Marshal(nil)} }

// Handler serves one method. It runs on its own goroutine; ctx carries the
// client's deadline and is canceled when the client cancels, the connection
// drops or the server closes. An error is sent to the client as its wire
// code and message.
type Handler func(ctx context.Context, req *Request) (*Response, error)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Limits bound frame lengths from clients.
	Limits wire.Limits
	// Secret, when set, must be proven by every connecting client.
	Secret []byte
	// Rank, Size and Instance are announced in the handshake.
	Rank, Size uint32
	Instance   string
	// Logger receives refusals and protocol errors. Default: slog.Default().
	Logger *slog.Logger
	// HandshakeTimeout bounds a new connection's handshake. Default 10s.
	HandshakeTimeout time.Duration
	// StallTimeout fails a write that makes no progress for this long,
	// and closes a connection that sends nothing for this long in the
	// middle of a frame. Default 60s.
	StallTimeout time.Duration
	// MinRecvRate is the floor, in bytes per second, below which a frame
	// may not arrive for longer than StallTimeout, however fast it came
	// before; a connection below it is closed. Only time spent waiting on
	// the socket counts. Default 64 KiB/s; negative: no floor.
	MinRecvRate int64
	// PayloadBudget bounds the bytes of request payloads the server holds
	// in memory at once, over all connections: from when a payload's
	// first bytes have arrived until its request is answered, or, for a
	// handler that owns its payload, until it calls Request.Release. A
	// payload that does not fit waits for room, its connection unread;
	// it does not fail. A payload larger than the whole budget waits
	// until it is alone. Default 1 GiB.
	PayloadBudget int64
	// MaxConns bounds the connections open at once (default 4096),
	// MaxConnsPerPeer those from one address (default 1024; every Unix
	// socket peer is the same, local one), and MaxHandshakes those that
	// have not completed their handshake (default 256). At a bound, the
	// connection longest in its handshake is closed to make room (a
	// client completes it in a round trip); if there is none, the new
	// connection is refused with an error frame that its client reports
	// as pdc.ErrUnavailable.
	MaxConns, MaxConnsPerPeer, MaxHandshakes int
	// MaxInFlight bounds the requests one connection may have running; the
	// server stops reading from a connection at the bound. Default 1024.
	MaxInFlight int
	// OnSessionEnd, if set, is called when the last connection of a client
	// (by the name it gave in its handshake) has closed.
	OnSessionEnd func(client string)
}

func (c *ServerConfig) setDefaults() {
	c.Limits = c.Limits.WithDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = 60 * time.Second
	}
	if c.MinRecvRate == 0 {
		c.MinRecvRate = DefaultMinRecvRate
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 1024
	}
	if c.PayloadBudget <= 0 {
		c.PayloadBudget = DefaultPayloadBudget
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxConnsPerPeer <= 0 {
		c.MaxConnsPerPeer = DefaultMaxConnsPerPeer
	}
	if c.MaxHandshakes <= 0 {
		c.MaxHandshakes = DefaultMaxHandshakes
	}
}

// Defaults of ServerConfig.
const (
	DefaultMinRecvRate     = 64 << 10
	DefaultPayloadBudget   = 1 << 30
	DefaultMaxConns        = 4096
	DefaultMaxConnsPerPeer = 1024
	DefaultMaxHandshakes   = 256
)

// Server serves RPCs on any number of listeners.
type Server struct {
	cfg      ServerConfig
	log      *slog.Logger
	handlers map[wire.Method]handlerEntry

	clients  atomic.Int64
	requests atomic.Uint64
	refused  atomic.Uint64 // connections refused at a bound
	evicted  atomic.Uint64 // connections closed in their handshake to make room
	slow     atomic.Uint64 // connections closed for a frame that stalled or crawled
	waits    atomic.Uint64 // payloads that waited for the budget

	payloads *semaphore.Weighted // ServerConfig.PayloadBudget
	held     atomic.Int64        // bytes of it taken

	// Rate-limited logs of what a peer can make happen at will.
	refusals *netio.RateLog // connections refused or evicted
	drops    *netio.RateLog // connections closed for what their peer did
	draining atomic.Bool
	drainMu  sync.RWMutex // orders handler starts against Shutdown

	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // accept loops and connections
	handlerWG sync.WaitGroup // running handlers, for Shutdown

	mu struct {
		sync.Mutex
		listeners map[net.Listener]struct{}
		conns     map[*serverConn]struct{}
		sessions  map[string]int // open connections per client name
		open      int            // connections counted against the bounds
		peers     map[string]int // of them, by peer (netio.PeerKey)
		shaking   list.List      // of *serverConn in their handshake, oldest first
	}
}

// NewServer returns a server with no handlers.
func NewServer(cfg ServerConfig) *Server {
	cfg.setDefaults()
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		handlers: make(map[wire.Method]handlerEntry),
		closing:  make(chan struct{}),
		payloads: semaphore.NewWeighted(cfg.PayloadBudget),
		refusals: netio.NewRateLog(cfg.Logger, logBurst, logInterval),
		drops:    netio.NewRateLog(cfg.Logger, logBurst, logInterval),
	}
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*serverConn]struct{})
	s.mu.sessions = make(map[string]int)
	s.mu.peers = make(map[string]int)
	return s
}

type handlerEntry struct {
	h         Handler
	here      Handler // tried first on the reading goroutine (TryHere)
	owned     bool    // the handler owns the request's payload (OwnsPayload)
	payload   bool    // requests may carry a payload
	inline    bool
	inlineMax uint32 // run inline when the header is at most this long
}

// A HandleOption qualifies a registration: where its handler runs and
// what becomes of its requests' payloads.
type HandleOption func(*handlerEntry)

// WithPayload lets the method's requests carry a payload (Request.Payload),
// which is the handler's until its answer has been written (it goes back
// to bufpool then). A request of a method registered without it (or
// OwnsPayload, or TryHere) that carries one is refused with
// pdc.ErrInvalid, its bytes skipped as they arrive and never kept: a
// client cannot make the server hold memory for a method that ignores it.
func WithPayload() HandleOption { return func(e *handlerEntry) { e.payload = true } }

// OwnsPayload is WithPayload handing the request's payload to the
// handler: it comes from bufpool, and the handler gives it back with
// Request.Release once nothing refers to it any more (which may be after
// it returns). For methods that carry bulk data.
func OwnsPayload() HandleOption {
	return func(e *handlerEntry) { e.owned, e.payload = true, true }
}

// ErrElsewhere is returned by a handler tried on the reading goroutine
// (TryHere) that leaves the request to its handler on a goroutine of its
// own.
var ErrElsewhere = errors.New("rpc: run the request on a goroutine of its own")

// TryHere is OwnsPayload with here to try first on the goroutine that
// read the request's header, before the connection reads on. here gets
// the payload as Request.Body, to read as it arrives, and either answers
// the request or returns ErrElsewhere without having read from Body: the
// payload is then read whole and the method's handler gets the request on
// a goroutine of its own. here may do bounded work, such as storing the
// payload as it arrives, but must not wait on other requests: the
// connection reads nothing else, not even its client's cancellations,
// while it runs. A read of Body that waits longer than the stall timeout
// fails, and a failed read ends the connection once here returns. For
// bulk requests: the payload is stored from a buffer that stays in the
// CPU cache, with no hand-off between threads, while the next bytes wait
// in the socket. It overrides Inline and InlineUpTo.
//
// The requests of such a method on one connection take turns in the
// order they arrived (see turns): here can tell with Request.Behind that
// an earlier request it declined has not ended its turn yet, and declines
// this one too if it must not overtake it; the handler waits with
// Request.WaitTurn and lets the later ones go with Request.EndTurn.
func TryHere(here Handler) HandleOption {
	return func(e *handlerEntry) { e.here, e.owned, e.payload = here, true, true }
}

// Inline runs the handler on the goroutine that read the request, before
// the connection reads on. The handler must not block: no I/O, no
// waiting on other requests, no long locks. It saves a hand-off between
// threads per request, which on an idle server doubles a small round
// trip. An inline handler cannot stream its answer.
func Inline() HandleOption { return func(e *handlerEntry) { e.inline = true } }

// InlineUpTo runs the handler inline (see Inline) for requests whose
// header is at most maxHeader bytes and that carry no payload, and on a
// goroutine of its own otherwise: for batch methods whose cost grows with
// the batch.
func InlineUpTo(maxHeader uint32) HandleOption {
	return func(e *handlerEntry) { e.inlineMax = maxHeader }
}

// Handle registers h for m. By default h runs on a goroutine of its own
// and its requests carry no payload; opts say otherwise. It must be
// called before Serve.
func (s *Server) Handle(m wire.Method, h Handler, opts ...HandleOption) {
	e := handlerEntry{h: h}
	for _, o := range opts {
		o(&e)
	}
	if e.here != nil {
		// here already runs on the reading goroutine; h is for the
		// requests it declines, which must not hold that goroutine too.
		e.inline, e.inlineMax = false, 0
	}
	s.handlers[m] = e
}

// Stats are a server's counters.
type Stats struct {
	Clients     int64  // authenticated connections open now
	Requests    uint64 // requests served since start
	Refused     uint64 // connections refused at a bound (ServerConfig.MaxConns...)
	Evicted     uint64 // connections closed in their handshake to make room
	Slow        uint64 // connections closed for a frame that stalled or crawled
	BudgetWaits uint64 // payloads that waited for room in the payload budget
	PayloadHeld int64  // bytes of the payload budget taken now
}

// Stats returns the server's counters. Safe for concurrent use.
func (s *Server) Stats() Stats {
	return Stats{Clients: s.clients.Load(), Requests: s.requests.Load(), Refused: s.refused.Load(),
		Evicted: s.evicted.Load(), Slow: s.slow.Load(), BudgetWaits: s.waits.Load(), PayloadHeld: s.held.Load()}
}

// Serve accepts connections on ln until the server is closed; it then
// returns pdc.ErrClosed. ln is closed on return.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	select {
	case <-s.closing:
		s.mu.Unlock()
		_ = ln.Close()
		return pdc.ErrClosed
	default:
	}
	if s.draining.Load() {
		s.mu.Unlock()
		_ = ln.Close()
		return pdc.ErrClosed
	}
	s.mu.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, ln)
		s.mu.Unlock()
		_ = ln.Close()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.closing:
				return pdc.ErrClosed
			default:
			}
			if s.draining.Load() {
				return pdc.ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTooManyFiles(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "in", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-s.closing:
					t.Stop()
					return pdc.ErrClosed
				}
				continue
			}
			return fmt.Errorf("accept on %s: %w", Addr(ln.Addr()), err)
		}
		backoff = 0
		if !s.track(nc) {
			return pdc.ErrClosed
		}
	}
}

func (s *Server) track(nc net.Conn) bool {
	c := &serverConn{s: s, nc: nc, peer: netio.PeerKey(nc.RemoteAddr()), remote: nc.RemoteAddr().String(), local: nc.LocalAddr().String(),
		inflight: make(map[uint64]*reqCtx)}
	s.mu.Lock()
	select {
	case <-s.closing:
		s.mu.Unlock()
		_ = nc.Close()
		return false
	default:
	}
	refusal, evicted := s.admitLocked(c)
	if refusal != "" {
		s.mu.Unlock()
		s.refuse(nc, refusal)
		return true
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	s.mu.conns[c] = struct{}{}
	s.wg.Add(1) // released by the connection's last reader, in finish
	s.mu.Unlock()
	if evicted != nil {
		s.evicted.Add(1)
		s.refusals.Warn("closed a connection still in its handshake to make room for a new one",
			"remote", evicted.nc.RemoteAddr().String(), "new", nc.RemoteAddr().String())
	}
	go c.serve()
	return true
}

// admitLocked counts c against the connection bounds, closing the
// connection longest in its handshake if one must go to make room
// (returned), or says why c is refused. s.mu is held.
func (s *Server) admitLocked(c *serverConn) (refusal string, evicted *serverConn) {
	cfg := &s.cfg
	switch {
	case s.mu.peers[c.peer] >= cfg.MaxConnsPerPeer:
		if evicted = s.oldestShakingLocked(c.peer); evicted == nil {
			return fmt.Sprintf("too many connections from %s: %d open, the server's limit per peer (--max-conns-per-peer); close some, or retry later",
				c.peer, cfg.MaxConnsPerPeer), nil
		}
	case s.mu.open >= cfg.MaxConns:
		if evicted = s.oldestShakingLocked(""); evicted == nil {
			return fmt.Sprintf("too many connections: %d open, the server's limit (--max-conns); retry later", cfg.MaxConns), nil
		}
	case s.mu.shaking.Len() >= cfg.MaxHandshakes:
		evicted = s.oldestShakingLocked("")
	}
	if evicted != nil {
		s.evictLocked(evicted)
	}
	s.mu.open++
	s.mu.peers[c.peer]++
	c.counted = true
	c.shaking = s.mu.shaking.PushBack(c)
	return "", evicted
}

// oldestShakingLocked returns the connection of peer ("": any) longest in
// its handshake, or nil. s.mu is held.
func (s *Server) oldestShakingLocked(peer string) *serverConn {
	for e := s.mu.shaking.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*serverConn); peer == "" || c.peer == peer {
			return c
		}
	}
	return nil
}

// evictLocked closes c, which is in its handshake, and stops counting it.
// s.mu is held.
func (s *Server) evictLocked(c *serverConn) {
	s.uncountLocked(c)
	c.cancel()
	_ = c.nc.Close()
}

// uncountLocked stops counting c against the bounds. s.mu is held.
func (s *Server) uncountLocked(c *serverConn) {
	if c.shaking != nil {
		s.mu.shaking.Remove(c.shaking)
		c.shaking = nil
	}
	if !c.counted {
		return
	}
	c.counted = false
	s.mu.open--
	if s.mu.peers[c.peer]--; s.mu.peers[c.peer] <= 0 {
		delete(s.mu.peers, c.peer)
	}
}

// refuse tells a connection over a bound why in an error frame, in place
// of the hello its client waits for, and closes it. The frame fits in a
// fresh socket's buffer: the write does not wait on the peer.
func (s *Server) refuse(nc net.Conn, why string) {
	s.refused.Add(1)
	s.refusals.Warn("refused connection: "+why, "remote", nc.RemoteAddr().String())
	body := wire.ErrorBody{Code: wire.CodeUnavailable, Message: why}
	hdr := body.Marshal(nil)
	f := wire.Frame{Flags: wire.FlagResponse | wire.FlagError, Method: wire.MethodHello, HeaderLen: uint32(len(hdr))}
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write(append(f.Append(nil), hdr...))
	_ = nc.Close()
}

// Logs of what peers can make happen at will come at most logBurst lines
// per logInterval each.
const (
	logBurst    = 10
	logInterval = 10 * time.Second
)

// Shutdown stops accepting connections and requests, waits for running
// handlers to finish (or ctx to end), then closes the server.
func (s *Server) Shutdown(ctx context.Context) error {
	s.drainMu.Lock()
	s.draining.Store(true)
	s.drainMu.Unlock()
	s.mu.Lock()
	for ln := range s.mu.listeners {
		_ = ln.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.handlerWG.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("shutdown: handlers still running: %w", ctxErr(ctx))
	}
	s.Close()
	return err
}

// Close closes every listener and connection and waits for their
// goroutines and running handlers. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		close(s.closing)
		for ln := range s.mu.listeners {
			_ = ln.Close()
		}
		for c := range s.mu.conns {
			// The connection first, then its handlers' contexts: a
			// handler that returns its context's error must not get
			// "canceled" to its client as if the client had asked;
			// the client sees the server go.
			_ = c.nc.Close()
			c.cancel()
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
	return nil
}

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
}

func (c *serverConn) serve() {
	s := c.s
	netio.Tune(c.nc, s.cfg.StallTimeout)
	// Until its client has authenticated, a connection reads through a
	// small buffer: a peer that has proven nothing holds next to nothing.
	c.r = newFrameReaderSize(c.nc, s.cfg.Limits, handshakeBufSize)
	c.w = newFrameWriter(c.nc, s.cfg.StallTimeout)
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
		s.mu.sessions[c.client]++
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
	s.mu.sessions[c.client]--
	last := s.mu.sessions[c.client] == 0
	if last {
		delete(s.mu.sessions, c.client)
	}
	s.mu.Unlock()
	if last && s.cfg.OnSessionEnd != nil {
		s.cfg.OnSessionEnd(c.client)
	}
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

// finish ends the connection: cancels its handlers, waits for them and
// releases it from the server.
func (c *serverConn) finish() {
	c.cancel()
	c.w.fail(pdc.ErrClosed)
	_ = c.nc.Close()
	c.wg.Wait()
	c.s.mu.Lock()
	delete(c.s.mu.conns, c)
	c.s.uncountLocked(c)
	c.s.mu.Unlock()
	c.s.wg.Done()
}

// inbound is a request read and admitted, to be run: its Request, its
// context and what running it needs, in one allocation.
type inbound struct {
	req     Request
	ctx     reqCtx
	c       *serverConn
	h       Handler
	f       wire.Frame
	owned   bool
	inline  bool
	payload []byte // the request's payload, if the handler does not own it
	grant   int64  // of the payload budget, for payload
}

// dispatch handles one frame. A request comes back as run, to be run on
// a goroutine of its own unless inline; an error closes the connection.
func (c *serverConn) dispatch(f wire.Frame) (run *inbound, inline bool, err error) {
	s := c.s
	if f.Version != wire.Version {
		if err := c.r.discard(uint64(f.HeaderLen) + f.PayloadLen); err != nil {
			return nil, false, err
		}
		return nil, false, c.replyErr(f, wire.CodeVersion,
			fmt.Sprintf("protocol version %d not supported; this server speaks version %d", f.Version, wire.Version))
	}
	if f.Flags&wire.FlagCancel != 0 {
		c.mu.Lock()
		rc := c.inflight[f.ID]
		c.mu.Unlock()
		if rc != nil {
			rc.cancelRequest()
		}
		return nil, false, nil
	}
	if f.Flags&wire.FlagResponse != 0 {
		return nil, false, fmt.Errorf("client sent a response frame (id %d): %w", f.ID, pdc.ErrProtocol)
	}
	he, ok := s.handlers[f.Method]
	if !ok || f.Method == wire.MethodHello || f.Method == wire.MethodAuth {
		if err := c.r.discard(uint64(f.HeaderLen) + f.PayloadLen); err != nil {
			return nil, false, err
		}
		return nil, false, c.replyErr(f, wire.CodeUnimplemented, fmt.Sprintf("unknown method %d", uint32(f.Method)))
	}
	if f.PayloadLen > 0 && !he.payload {
		// Skipped as it arrives, never kept.
		if err := c.r.discard(uint64(f.HeaderLen) + f.PayloadLen); err != nil {
			return nil, false, err
		}
		return nil, false, c.replyErr(f, wire.CodeInvalid,
			fmt.Sprintf("%s takes no payload, and the request carried %d bytes", f.Method, f.PayloadLen))
	}
	// A request tried on this goroutine reads its payload as it arrives.
	streamed := he.here != nil && f.PayloadLen > 0
	var payload []byte
	var grant int64 // of the payload budget, for payload
	hdr, err := c.r.header(f)
	if err == nil && !streamed {
		payload, grant, err = c.payload(f)
	}
	if err != nil {
		return nil, false, err
	}
	// A payload that never reaches its handler goes back here; one not
	// read yet is skipped.
	putBack := func() error {
		if streamed {
			return c.r.discard(f.PayloadLen)
		}
		s.putPayload(payload, grant)
		return nil
	}
	if he.inlineMax > 0 && f.HeaderLen <= he.inlineMax && f.PayloadLen == 0 {
		he.inline = true
	}

	select {
	case c.sem <- struct{}{}:
	default:
		// Refuse rather than stop reading: a connection that stops reading
		// cannot see its client's cancellations.
		if err := putBack(); err != nil {
			return nil, false, err
		}
		return nil, false, c.replyErr(f, wire.CodeUnavailable,
			fmt.Sprintf("server busy: %d requests in flight on this connection; retry or spread over more connections", s.cfg.MaxInFlight))
	}
	in := &inbound{c: c, h: he.h, f: f, owned: he.owned, payload: payload, grant: grant}
	ctx := &in.ctx
	ctx.init(c.ctx, f.Timeout)
	req := &in.req
	*req = Request{Method: f.Method, Header: hdr, Payload: payload, Client: c.client, Remote: c.remote, Local: c.local,
		conn: c, id: f.ID, inline: he.inline}
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
		if err := putBack(); err != nil {
			return nil, false, err
		}
		return nil, false, c.replyErr(f, wire.CodeUnavailable, "server is shutting down")
	}
	s.handlerWG.Add(1)
	s.drainMu.RUnlock()
	if he.here != nil {
		req.ticket = c.turns.take()
		body := &bodyReader{r: c.r, left: f.PayloadLen}
		req.Body, req.BodyLen = body, int64(f.PayloadLen)
		req.inline = true // it may not stream its answer from this goroutine
		resp, err := c.run(ctx, he.here, req, he.owned && !streamed)
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
			return nil, false, err
		}
		if streamed {
			if payload, grant, err = c.payload(f); err != nil {
				req.EndTurn()
				ctx.release()
				<-c.sem
				s.handlerWG.Done()
				return nil, false, err
			}
			streamed, req.Payload, req.Release = false, payload, s.releaser(payload, grant)
		}
	}
	if !he.inline {
		c.mu.Lock()
		if _, dup := c.inflight[f.ID]; dup {
			c.mu.Unlock()
			ctx.release()
			<-c.sem
			_ = putBack() // the connection ends anyway
			req.EndTurn()
			s.handlerWG.Done()
			return nil, false, fmt.Errorf("request id %d reused while in flight: %w", f.ID, pdc.ErrProtocol)
		}
		c.inflight[f.ID] = ctx
		c.mu.Unlock()
	}
	in.payload, in.grant, in.inline = payload, grant, he.inline
	return in, he.inline, nil
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
	if in.inline {
		_ = c.w.queue(c.ctx, out, resp.Header, resp.Payload)
		return
	}
	_ = c.w.write(c.ctx, out, resp.Header, resp.Payload)
}

// payload reads f's payload, which follows its header, into a buffer from
// bufpool, taken from the server's payload budget: grant bytes of it,
// which putPayload gives back with the buffer. (From bufpool rather than
// the heap: a buffer given back is the next one's at once, where the
// collector would leave it in memory, garbage, until its next cycle.)
//
// Nothing is taken before the payload's first bytes (a bufferful, or all
// of a smaller one) have arrived: a frame prefix alone holds no memory.
// Then, if the budget has no room, the connection waits for it, unread.
// The wait cannot deadlock: what holds the budget is payloads being read
// (their bytes come, or the frame's bounds end their connection), answers
// being written (bounded by the stall timeout), and payloads their owners
// give back once stored, which waits on nothing another connection reads
// (the data server takes none of its own budget for them).
func (c *serverConn) payload(f wire.Frame) (payload []byte, grant int64, err error) {
	if f.PayloadLen == 0 {
		return nil, 0, nil
	}
	if err := c.r.more(int(min(f.PayloadLen, uint64(c.r.br.Size())))); err != nil {
		return nil, 0, fmt.Errorf("reading a request's payload: %w", err)
	}
	s := c.s
	n := int(f.PayloadLen)
	grant = min(int64(bufpool.SizeOf(n)), s.cfg.PayloadBudget)
	if !s.payloads.TryAcquire(grant) {
		s.waits.Add(1)
		// Answers queued for earlier requests go out before the wait.
		if err := c.w.flush(c.ctx); err != nil {
			return nil, 0, err
		}
		if err := s.payloads.Acquire(c.ctx, grant); err != nil {
			return nil, 0, fmt.Errorf("waiting for room for a payload of %d bytes: %w", n, ctxErr(c.ctx))
		}
	}
	s.held.Add(grant)
	payload = bufpool.Get(n)
	if err := c.r.readPayload(payload); err != nil {
		s.putPayload(payload, grant)
		return nil, 0, err
	}
	return payload, grant, nil
}

// putPayload gives back a payload and its grant of the budget. Nothing
// refers to the payload any more.
func (s *Server) putPayload(payload []byte, grant int64) {
	if grant == 0 {
		return
	}
	bufpool.Put(payload)
	s.held.Add(-grant)
	s.payloads.Release(grant)
}

// releaser returns a Request.Release for payload: putPayload, once.
func (s *Server) releaser(payload []byte, grant int64) func() {
	if grant == 0 {
		return func() {}
	}
	var done atomic.Bool
	return func() {
		if !done.Swap(true) {
			s.putPayload(payload, grant)
		}
	}
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
	if werr := c.w.write(c.ctx, out, hdr, payload); werr != nil && !errors.Is(werr, errNotSent) {
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
	body := wire.ErrorBody{Code: code, Message: msg}
	out := wire.Frame{Flags: wire.FlagResponse | wire.FlagError, Method: f.Method, ID: f.ID}
	return c.w.write(c.ctx, out, body.Marshal(nil), nil)
}

// handshake proves the client, and calls admit just before it tells the
// client it is in.
func (c *serverConn) handshake(admit func()) error {
	s := c.s
	_ = c.nc.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	defer c.nc.SetDeadline(time.Time{})

	nonce := newNonce()
	hello := wire.Hello{
		Version:      wire.Version,
		Rank:         s.cfg.Rank,
		Size:         s.cfg.Size,
		Instance:     s.cfg.Instance,
		AuthRequired: len(s.cfg.Secret) > 0,
		Nonce:        nonce,
	}
	if err := c.w.write(c.ctx, wire.Frame{Method: wire.MethodHello}, hello.Marshal(nil), nil); err != nil {
		return err
	}
	f, err := c.r.next()
	if err != nil {
		return fmt.Errorf("read auth: %w", err)
	}
	if f.Method != wire.MethodAuth || f.Flags != 0 || f.Version != wire.Version {
		return fmt.Errorf("expected an auth frame, got %s flags %#x version %d: %w", f.Method, uint8(f.Flags), f.Version, pdc.ErrProtocol)
	}
	// Nothing large is allocated for a peer that has not authenticated.
	if f.HeaderLen > maxAuthHeader || f.PayloadLen != 0 {
		return fmt.Errorf("auth frame of %d+%d bytes; at most %d and no payload: %w", f.HeaderLen, f.PayloadLen, maxAuthHeader, pdc.ErrProtocol)
	}
	hdr, _, err := c.r.body(f)
	if err != nil {
		return err
	}
	var auth wire.Auth
	if err := auth.Unmarshal(hdr); err != nil {
		return err
	}
	c.client = auth.Client
	var ok wire.AuthOK
	if len(s.cfg.Secret) > 0 {
		want := clientProof(s.cfg.Secret, nonce, auth.Nonce)
		if len(auth.MAC) == 0 || !hmac.Equal(auth.MAC, want) {
			what := "wrong cluster secret"
			if len(auth.MAC) == 0 {
				what = "no cluster secret given"
			}
			// Logged before the reply, so that the refusal is on record by
			// the time the client learns of it.
			s.refusals.Warn("refused connection: "+what, "remote", c.nc.RemoteAddr().String(), "client", c.client)
			_ = c.replyErr(f, wire.CodePermission, what+"; this server requires the cluster secret")
			return fmt.Errorf("%s: %w", what, pdc.ErrPermission)
		}
		ok.MAC = serverProof(s.cfg.Secret, nonce, auth.Nonce)
	}
	admit()
	out := wire.Frame{Flags: wire.FlagResponse, Method: wire.MethodAuth, ID: f.ID}
	return c.w.write(c.ctx, out, ok.Marshal(nil), nil)
}

// maxAuthHeader bounds the auth frame a client sends before it has proven
// anything.
const maxAuthHeader = 4 << 10

func isClosedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, pdc.ErrClosed) || isConnReset(err)
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
