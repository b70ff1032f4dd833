package dtl

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Resolver finds the payload a receiver asks for by key. A missing one is
// an error wrapping pdc.ErrNotFound (or ErrNotFound).
type Resolver func(ctx context.Context, key []byte) (Source, error)

// EagerLimit is the largest payload that travels in the fetch answer
// itself, whatever the mode.
const EagerLimit = 64 << 10

// SenderConfig configures a Sender.
type SenderConfig struct {
	// Resolve finds payloads by key. Required.
	Resolve Resolver
	// BulkAddr is where pull connections are accepted ("host:port";
	// default 127.0.0.1:0). Give the host's routable address on a cluster.
	BulkAddr string
	// AdvertiseHost, if set, is the host published for pull connections
	// instead of BulkAddr's. Without it a sender bound to a wildcard
	// address (0.0.0.0, ::) publishes the address each receiver reached
	// it at, which that receiver can dial.
	AdvertiseHost string
	// ShmDir holds the Unix socket for shm. Default: none, the socket is
	// in the abstract namespace, which goes with the process (one in a
	// directory stays behind when the process is killed).
	ShmDir string
	// HandleTTL is how long an exposed payload waits to be pulled or
	// mapped before it is released. Default 30s.
	HandleTTL time.Duration
	// MaxEndpoints bounds the push connections the endpoint cache keeps
	// open across all receivers. Default 64.
	MaxEndpoints int
	// ChunkSize is the stream mode's chunk. Default 1 MiB.
	ChunkSize int
	// Stall bounds how long bytes sent on a side channel may go
	// unacknowledged (a receiver that stopped reading) before the
	// connection fails. Default 60s.
	Stall time.Duration
	// MaxConns bounds the connections each side channel (pull, shm)
	// keeps open, MaxConnsPerPeer those from one address; past them a new
	// connection is refused with an answer saying so. Defaults 4096 and
	// 1024.
	MaxConns, MaxConnsPerPeer int
	// Logger receives refused side-channel peers. Default slog.Default().
	Logger *slog.Logger
}

// Sender is the sending side of every backend (DYAD_COMM_SEND): it answers
// fetch requests on an RPC server and runs the pull and shm side channels.
type Sender struct {
	cfg  SenderConfig
	log  *slog.Logger
	bulk net.Listener
	shm  net.Listener
	// Each side channel's connection bounds, and a rate-limited log of
	// the peers refused or breaking the protocol.
	bulkLimit, shmLimit netio.ConnLimit
	refusals            *netio.RateLog
	shmPath             string
	eps                 *endpointCache

	transports map[Mode]SendTransport

	closing   chan struct{}
	ctx       context.Context // canceled by Close
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup

	nextID  atomic.Uint64
	pushes  atomic.Uint64
	pulls   atomic.Uint64
	expired atomic.Uint64
	// Payload bytes sent by each transport (the stream's go in the rpc
	// server's counts).
	pullBytes, pushBytes, shmBytes atomic.Uint64

	mu struct {
		sync.Mutex
		handles map[token]*exposed
		waiters map[token]chan struct{} // pulls that arrived before their payload
		conns   map[net.Conn]struct{}
		closed  bool
	}
}

// exposed is a payload waiting under a handle for one pull or mapping, or
// the outcome of a fetch whose receiver pulls without waiting for the
// answer (a pipelined pull): its failure, or that the payload went in the
// answer.
type exposed struct {
	id      uint64
	tok     token
	src     Source
	memfd   *os.File // shm: the memory file holding a buffer source
	expires time.Time
	err     error // the fetch failed
	inline  bool  // the payload went in the answer
	pending bool  // the fetch is still being answered
}

func (e *exposed) release() {
	if e.memfd != nil {
		_ = e.memfd.Close()
	}
	e.src.release()
}

// NewSender starts the side channels. Register it on an RPC server to
// answer fetches.
func NewSender(cfg SenderConfig) (*Sender, error) {
	if cfg.Resolve == nil {
		return nil, fmt.Errorf("dtl sender: no resolver: %w", pdc.ErrInvalid)
	}
	if cfg.BulkAddr == "" {
		cfg.BulkAddr = "127.0.0.1:0"
	}
	if cfg.HandleTTL <= 0 {
		cfg.HandleTTL = 30 * time.Second
	}
	if cfg.MaxEndpoints <= 0 {
		cfg.MaxEndpoints = 64
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = 1 << 20
	}
	if cfg.Stall <= 0 {
		cfg.Stall = defaultStall
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = defaultMaxConns
	}
	if cfg.MaxConnsPerPeer <= 0 {
		cfg.MaxConnsPerPeer = defaultMaxConnsPerPeer
	}
	s := &Sender{cfg: cfg, log: cfg.Logger, closing: make(chan struct{}),
		refusals: netio.NewRateLog(cfg.Logger, logBurst, logInterval)}
	s.bulkLimit = netio.ConnLimit{Max: cfg.MaxConns, PerPeer: cfg.MaxConnsPerPeer}
	s.shmLimit = netio.ConnLimit{Max: cfg.MaxConns, PerPeer: cfg.MaxConnsPerPeer}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.transports = sendHalves(s)
	s.mu.handles = make(map[token]*exposed)
	s.mu.waiters = make(map[token]chan struct{})
	s.mu.conns = make(map[net.Conn]struct{})
	s.eps = newEndpointCache(cfg.MaxEndpoints, func(ctx context.Context, addr string) (net.Conn, error) {
		return dialPush(ctx, addr, cfg.Stall)
	})

	var err error
	s.bulk, err = net.Listen("tcp", cfg.BulkAddr)
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("dtl sender: bulk listener on %s: %w", cfg.BulkAddr, err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	s.shmPath = fmt.Sprintf("@pdc-shm-%d-%x", os.Getpid(), rnd)
	if cfg.ShmDir != "" {
		s.shmPath = filepath.Join(cfg.ShmDir, fmt.Sprintf("pdc-shm-%d-%x.sock", os.Getpid(), rnd))
	}
	s.shm, err = net.Listen("unix", s.shmPath)
	if err != nil {
		s.bulk.Close()
		s.cancel()
		return nil, fmt.Errorf("dtl sender: shm socket %s: %w", s.shmPath, err)
	}
	s.wg.Add(3)
	go s.accept(s.bulk, &s.bulkLimit, magicPullAck, s.servePull)
	go s.accept(s.shm, &s.shmLimit, magicShmAck, s.serveShm)
	go s.janitor()
	return s, nil
}

// Register makes srv answer fetch requests with this sender.
func (s *Sender) Register(srv *rpc.Server) { srv.Handle(wire.MethodFetch, s.handleFetch) }

// BulkAddr is where pull connections go.
func (s *Sender) BulkAddr() string { return s.bulk.Addr().String() }

// bulkAddrFor is the pull address published to the receiver that asked
// over req (nil: unknown): AdvertiseHost, else for a wildcard listener the
// host the receiver reached this process at, else BulkAddr.
func (s *Sender) bulkAddrFor(req *rpc.Request) string {
	ta, ok := s.bulk.Addr().(*net.TCPAddr)
	if !ok {
		return s.BulkAddr()
	}
	port := strconv.Itoa(ta.Port)
	if s.cfg.AdvertiseHost != "" {
		return net.JoinHostPort(s.cfg.AdvertiseHost, port)
	}
	if !ta.IP.IsUnspecified() {
		return s.BulkAddr()
	}
	if req != nil {
		if host, _, err := net.SplitHostPort(req.Local); err == nil {
			if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && (ta.IP.To4() == nil || ip.To4() != nil) {
				return net.JoinHostPort(ip.String(), port)
			}
		}
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// SenderStats counts a sender's work.
type SenderStats struct {
	Handles   int    // payloads exposed and not yet pulled, mapped or expired
	Expired   uint64 // handles released unclaimed
	Pulls     uint64 // handles claimed by pulls and mappings
	Pushes    uint64
	Endpoints int    // push connections open
	Evictions uint64 // push connections closed to keep the cache in bounds
	// Payload bytes sent by pulls, pushes and shm mappings handed over.
	PullBytes, PushBytes, ShmBytes uint64
}

// Stats reports the sender's counters.
func (s *Sender) Stats() SenderStats {
	s.mu.Lock()
	n := len(s.mu.handles)
	s.mu.Unlock()
	open, ev := s.eps.stats()
	return SenderStats{Handles: n, Expired: s.expired.Load(), Pulls: s.pulls.Load(), Pushes: s.pushes.Load(),
		Endpoints: open, Evictions: ev, PullBytes: s.pullBytes.Load(), PushBytes: s.pushBytes.Load(), ShmBytes: s.shmBytes.Load()}
}

// Close stops the side channels, releases every exposed payload and closes
// the endpoint cache. It waits for its goroutines; idempotent.
func (s *Sender) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.cancel()
		s.bulk.Close()
		s.shm.Close()
		s.mu.Lock()
		s.mu.closed = true
		for nc := range s.mu.conns {
			nc.Close()
		}
		hs := s.mu.handles
		s.mu.handles = map[token]*exposed{}
		s.mu.Unlock()
		for _, e := range hs {
			e.release()
		}
		s.eps.close()
		s.wg.Wait()
		if !strings.HasPrefix(s.shmPath, "@") {
			_ = os.Remove(s.shmPath)
		}
	})
	return nil
}

func (s *Sender) accept(ln net.Listener, lim *netio.ConnLimit, magic string, serve func(net.Conn)) {
	defer s.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if acceptAgain(err, s.closing, s.log, ln.Addr().String()) {
				continue
			}
			return
		}
		release, ok := admit(nc, lim, magic, s.refusals)
		if !ok {
			continue
		}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			release()
			nc.Close()
			return
		}
		s.mu.conns[nc] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				release()
				nc.Close()
				s.mu.Lock()
				delete(s.mu.conns, nc)
				s.mu.Unlock()
			}()
			serve(nc)
		}()
	}
}

// mappingIdle is how long a file sent from a cached mapping keeps it
// without another send.
const mappingIdle = 10 * time.Second

// janitor releases handles nobody claimed in time and file mappings
// nobody uses.
func (s *Sender) janitor() {
	defer s.wg.Done()
	tick := time.NewTicker(min(s.cfg.HandleTTL/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-s.closing:
			return
		case now := <-tick.C:
			netio.SweepMappings(mappingIdle)
			var dead []*exposed
			s.mu.Lock()
			for tok, e := range s.mu.handles {
				if !e.pending && now.After(e.expires) {
					delete(s.mu.handles, tok)
					dead = append(dead, e)
				}
			}
			s.mu.Unlock()
			for _, e := range dead {
				if e.err == nil && !e.inline {
					s.expired.Add(1)
				}
				e.release()
			}
		}
	}
}

// expose puts src under a handle: the receiver's token if it chose one
// (pipelined pull), else a new random one.
func (s *Sender) expose(src Source, memfd *os.File, tok *token) (*exposed, error) {
	e := &exposed{id: s.nextID.Add(1), src: src, memfd: memfd}
	if tok != nil {
		e.tok = *tok
	} else {
		_, _ = rand.Read(e.tok[:])
	}
	if err := s.put(e); err != nil {
		return nil, err
	}
	return e, nil
}

// put files e under its token and wakes a pull waiting for it.
func (s *Sender) put(e *exposed) error {
	e.expires = time.Now().Add(s.cfg.HandleTTL)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return fmt.Errorf("dtl sender is closed: %w", pdc.ErrClosed)
	}
	if old, dup := s.mu.handles[e.tok]; dup && !old.pending {
		return fmt.Errorf("handle token reused: %w", ErrBadPack)
	}
	s.mu.handles[e.tok] = e
	if ch := s.mu.waiters[e.tok]; ch != nil {
		close(ch)
		delete(s.mu.waiters, e.tok)
	}
	return nil
}

// claim takes the handle a request names, once. A pipelined pull (wait)
// waits for the handle until the handle lifetime passes.
func (s *Sender) claim(r *request, wait bool) (*exposed, error) {
	var timer *time.Timer
	for {
		s.mu.Lock()
		e := s.mu.handles[r.token]
		pending := e != nil && e.pending
		if e != nil && !pending && (r.id == 0 || e.id == r.id) {
			delete(s.mu.handles, r.token)
			s.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			if e.err == nil && !e.inline { // a payload, not a pipelined pull's outcome
				s.pulls.Add(1)
			}
			return e, nil
		}
		if !wait || s.mu.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("handle %d: no such payload (never exposed, already taken, expired, or a wrong token): %w", r.id, ErrNotFound)
		}
		ch := s.mu.waiters[r.token]
		if ch == nil {
			ch = make(chan struct{})
			s.mu.waiters[r.token] = ch
		}
		s.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(s.cfg.HandleTTL)
		}
		// A token whose fetch is being answered waits as long as that
		// takes (the fetch always settles it); one never announced waits
		// a handle's lifetime.
		expired := timer.C
		if pending {
			expired = nil
		}
		select {
		case <-ch:
		case <-expired:
			s.mu.Lock()
			if s.mu.waiters[r.token] == ch {
				delete(s.mu.waiters, r.token)
			}
			s.mu.Unlock()
			return nil, fmt.Errorf("pull of a payload that was never exposed within %v: %w", s.cfg.HandleTTL, ErrNotFound)
		case <-s.closing:
			timer.Stop()
			return nil, fmt.Errorf("dtl sender is closed: %w", pdc.ErrClosed)
		}
	}
}

// handleFetch answers a wire.FetchRequest.
func (s *Sender) handleFetch(ctx context.Context, req *rpc.Request) (resp *rpc.Response, err error) {
	var fr wire.FetchRequest
	if err := fr.Unmarshal(req.Header); err != nil {
		return nil, fmt.Errorf("fetch request: %w: %w", ErrBadPack, err)
	}
	// A receiver that pulls without waiting for this answer (it chose the
	// handle's token) learns of a failure, or of a payload that went in the
	// answer, on its bulk connection too.
	var pullTok *token
	if fr.Mode == uint32(ModePull) && len(fr.PullToken) == tokenSize {
		pullTok = new(token)
		copy(pullTok[:], fr.PullToken)
		if err := s.put(&exposed{tok: *pullTok, pending: true}); err != nil {
			return nil, fmt.Errorf("fetch %s: %w", showKey(fr.Key), err)
		}
		defer func() {
			if p := recover(); p != nil {
				// A bug in a resolver: answer with an internal error, and
				// tell the waiting pull too, or it waits for ever.
				s.log.Error("dtl: fetch handler panicked", "key", string(fr.Key), "panic", p, "stack", string(debug.Stack()))
				resp, err = nil, fmt.Errorf("fetch %s: server bug (panic: %v): %w", showKey(fr.Key), p, pdc.ErrInternal)
			}
			if err != nil {
				_ = s.put(&exposed{tok: *pullTok, err: err})
			} else if resp != nil && len(resp.Payload) > 0 { // eager answers always carry a payload slice
				_ = s.put(&exposed{tok: *pullTok, inline: true})
			}
		}()
	}
	mode := Mode(min(fr.Mode, 255))
	if fr.Mode > 255 || !mode.valid() || mode == ModeAuto {
		return nil, fmt.Errorf("fetch %s: transport %s: %w (the receiver picks one of stream, pull, push, shm)", showKey(fr.Key), mode, ErrBadMode)
	}
	if mode == ModeShm && !SameHost(req.Remote) && req.Remote != "" && req.Remote != "@" {
		return nil, fmt.Errorf("fetch %s: shm from %s, which is not on this host: %w", showKey(fr.Key), req.Remote, ErrBadMode)
	}
	src, err := s.cfg.Resolve(ctx, fr.Key)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", showKey(fr.Key), err)
	}
	sec, err := src.section(fr.Off, fr.Len)
	if err != nil {
		src.release()
		return nil, fmt.Errorf("fetch %s: %w", showKey(fr.Key), err)
	}
	size := uint64(sec.Size())
	if fr.Cap != 0 && size > fr.Cap {
		src.release()
		return nil, fmt.Errorf("fetch %s: the payload has %d bytes and the receiver takes at most %d: %w", showKey(fr.Key), size, fr.Cap, ErrBadBuffer)
	}
	reply := wire.FetchReply{Size: size, Mode: uint32(mode)}

	if size <= EagerLimit {
		if sec.File == nil {
			// Released once the server has written (copied) the answer.
			return &rpc.Response{Header: reply.Marshal(nil), Payload: [][]byte{sec.Buf}, Done: sec.release}, nil
		}
		defer sec.release()
		b := make([]byte, size)
		if err := sec.readAt(b, 0); err != nil {
			return nil, fmt.Errorf("fetch %s: reading %s: %w", showKey(fr.Key), sec.File.Name(), err)
		}
		return &rpc.Response{Header: reply.Marshal(nil), Payload: [][]byte{b}}, nil
	}

	if err := s.transports[mode].Send(ctx, req, &fr, sec, &reply); err != nil {
		return nil, fmt.Errorf("fetch %s: %w", showKey(fr.Key), err)
	}
	return rpc.Respond(&reply), nil
}

// servePull answers pull requests on one bulk connection until it ends.
func (s *Sender) servePull(nc net.Conn) {
	netio.Tune(nc, s.cfg.Stall)
	var hb [requestSize]byte
	for {
		// Idle connections wait here for the receiver's next pull; Close
		// ends them.
		if err := readHeader(nc, hb[:], s.cfg.Stall, func(b []byte) error {
			_, err := io.ReadFull(nc, b)
			return err
		}); err != nil {
			return
		}
		var r request
		if err := r.decode(hb[:], magicPull); err != nil {
			s.refuse(nc, magicPullAck, err)
			return
		}
		e, err := s.claim(&r, hb[5]&flagWait != 0)
		if err == nil && e.err != nil {
			err = e.err
		}
		if err != nil {
			if _, werr := nc.Write(errAnswer(magicPullAck, err)); werr != nil {
				return
			}
			continue
		}
		if e.inline {
			a := answer{off: offInline}
			if _, err := nc.Write(a.put(make([]byte, 0, answerSize), magicPullAck)); err != nil {
				return
			}
			continue
		}
		ok := s.sendPulled(nc, e, &r)
		e.release()
		if !ok {
			return
		}
	}
}

// A pull request's flags (byte 5 of its header).
const flagWait = 1 // pipelined: wait for the payload to be exposed

// offInline in a pull answer's offset says the payload went in the fetch
// answer and no bytes follow.
const offInline = 1

// sendPulled writes the answer and the claimed bytes; false if the
// connection is no longer usable. A size of 0 asks for the whole payload.
func (s *Sender) sendPulled(nc net.Conn, e *exposed, r *request) bool {
	src, err := e.src.section(r.off, r.size)
	if err != nil {
		_, werr := nc.Write(errAnswer(magicPullAck, err))
		return werr == nil
	}
	// No bound on the whole transfer, which may be long and moving: a
	// receiver that stops reading is caught by the socket's user timeout
	// (netio.Tune), Close by s.ctx.
	ctx := s.ctx
	a := answer{size: uint64(src.Size())}
	hdr := a.put(make([]byte, 0, answerSize), magicPullAck)
	if src.File == nil {
		_, err = netio.WriteFull(ctx, nc, hdr, src.Buf)
	} else {
		if _, err = netio.WriteFull(ctx, nc, hdr); err == nil {
			_, err = netio.SendFile(ctx, nc, src.File, src.Off, src.Len)
		}
	}
	if err == nil {
		s.pullBytes.Add(a.size)
	}
	return err == nil
}

// refuse answers a peer that broke the protocol and logs it.
func (s *Sender) refuse(nc net.Conn, magic string, err error) {
	s.refusals.Warn("dtl: refusing peer", "remote", nc.RemoteAddr().String(), "err", err)
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write(errAnswer(magic, err))
}

// defaultStall bounds how long a side channel's sent data may go
// unacknowledged when nothing else is configured.
const defaultStall = 60 * time.Second
