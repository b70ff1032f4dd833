package rpc

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/wire"
)

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
	// Observer, if set, is told of every request answered or refused.
	Observer Observer
	// SlowRequest, if set, has a request that takes at least this long
	// (queueing included) logged as a warning naming its method, trace
	// id, what it is about (Describe) and how long it took. At debug
	// level every request is logged so.
	SlowRequest time.Duration
}

// Observer is told of each request at the one place every request passes
// (dispatch), so that a server's request metrics are counted once. It
// runs on the request path, on the goroutine that served the request:
// it must not block, lock or allocate.
type Observer interface {
	// Started is called when a request is admitted, before its handler
	// runs; Served follows, once, for every request Started saw.
	Started(m wire.Method)
	// Served is called once a request's handler has returned, with the
	// wire code of its outcome (wire.CodeOK for success) and the time
	// since its frame was read (queueing included).
	Served(m wire.Method, code wire.Code, elapsed time.Duration)
	// Refused is called for a request answered with an error before any
	// handler saw it: unknown method, payload not taken, busy, draining.
	Refused(m wire.Method, code wire.Code)
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
	debug    bool // the log takes debug lines: every request is logged
	noTrace  bool // tests: announce no trace support, as a server before 0031
	handlers map[wire.Method]handlerEntry

	clients  atomic.Int64
	requests atomic.Uint64
	refused  atomic.Uint64 // connections refused at a bound
	evicted  atomic.Uint64 // connections closed in their handshake to make room
	slow     atomic.Uint64 // connections closed for a frame that stalled or crawled
	waits    atomic.Uint64 // payloads that waited for the budget
	obs      Observer      // cfg.Observer

	// Bytes of frames read and written on connections that have closed;
	// those of open ones are in their serverConns.
	closedIn, closedOut atomic.Uint64

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

	// admitWait, if set (tests), is called when a connection's admission
	// waits for the end of its client's last session.
	admitWait func(client string)

	mu struct {
		sync.Mutex
		listeners map[net.Listener]struct{}
		conns     map[*serverConn]struct{}
		sessions  map[string]int // open connections per client name
		// ending holds, per client, a channel closed once OnSessionEnd
		// for its last session has returned: its next session is
		// admitted only then.
		ending  map[string]chan struct{}
		open    int            // connections counted against the bounds
		peers   map[string]int // of them, by peer (netio.PeerKey)
		shaking list.List      // of *serverConn in their handshake, oldest first
		// byID holds the admitted connections by their id (AuthOK.Conn),
		// until their handlers are done, for a client's later connection
		// to fence (serverConn.fence); lastID is the last id given.
		byID   map[uint64]*serverConn
		lastID uint64
	}
}

// NewServer returns a server with no handlers.
func NewServer(cfg ServerConfig) *Server {
	cfg.setDefaults()
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		debug:    cfg.Logger.Enabled(context.Background(), slog.LevelDebug),
		obs:      cfg.Observer,
		handlers: make(map[wire.Method]handlerEntry),
		closing:  make(chan struct{}),
		payloads: semaphore.NewWeighted(cfg.PayloadBudget),
		refusals: netio.NewRateLog(cfg.Logger, logBurst, logInterval),
		drops:    netio.NewRateLog(cfg.Logger, logBurst, logInterval),
	}
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*serverConn]struct{})
	s.mu.sessions = make(map[string]int)
	s.mu.ending = make(map[string]chan struct{})
	s.mu.peers = make(map[string]int)
	s.mu.byID = make(map[uint64]*serverConn)
	return s
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
	PayloadMax  int64  // the payload budget (ServerConfig.PayloadBudget)
	Conns       int    // connections open now, authenticated or not
	BytesIn     uint64 // bytes of frames read from connections since start
	BytesOut    uint64 // bytes of frames written to connections since start
}

// Stats returns the server's counters. Safe for concurrent use; it takes
// the server's lock for a moment to sum the open connections' bytes.
func (s *Server) Stats() Stats {
	st := Stats{Clients: s.clients.Load(), Requests: s.requests.Load(), Refused: s.refused.Load(),
		Evicted: s.evicted.Load(), Slow: s.slow.Load(), BudgetWaits: s.waits.Load(), PayloadHeld: s.held.Load(),
		PayloadMax: s.cfg.PayloadBudget}
	s.mu.Lock()
	st.Conns = len(s.mu.conns)
	st.BytesIn, st.BytesOut = s.closedIn.Load(), s.closedOut.Load()
	for c := range s.mu.conns {
		st.BytesIn += c.recvd.Load()
		st.BytesOut += c.w.sent.Load()
	}
	s.mu.Unlock()
	return st
}

// served tells the observer, if any, of a request its handler answered.
func (s *Server) served(in *inbound, err error) {
	if in.start.IsZero() {
		return // neither observed nor logged
	}
	elapsed := time.Since(in.start)
	if s.obs != nil {
		code := wire.CodeOK
		if err != nil {
			code = wire.CodeOf(err)
		}
		s.obs.Served(in.f.Method, code, elapsed)
	}
	if s.logsRequests() {
		s.logRequest(in, err, elapsed)
	}
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
