package rpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/wire"
)

// DialOptions configure a client connection.
type DialOptions struct {
	// Secret is the cluster secret; required when the server asks for it.
	Secret []byte
	// Limits bound frame lengths from the server.
	Limits wire.Limits
	// Label names the server in errors, e.g. "rank 2 (127.0.0.1:4000)".
	// Default: the address.
	Label string
	// ClientName is sent to the server for its logs. Default: "pid@host".
	ClientName string
	// HandshakeTimeout bounds the handshake when ctx has no earlier
	// deadline. Default 10s.
	HandshakeTimeout time.Duration
	// StallTimeout fails a write that makes no progress for this long.
	// Default 60s.
	StallTimeout time.Duration
	// supersede are earlier connections to the same server that the
	// caller has given up on: the server ends them before it accepts this
	// one (Pool.dial; see Conn.Fences).
	supersede []*Conn
	// PeerTimeout is how long the server's host may leave what it was
	// sent unacknowledged (and a connection request unanswered) before
	// the connection fails with pdc.ErrUnavailable: a host that is down or
	// cut off, told from a slow server (whose kernel acknowledges at
	// once) well before a caller's deadline. Default 10s; negative: never.
	PeerTimeout time.Duration
}

func (o *DialOptions) setDefaults(addr string) {
	o.Limits = o.Limits.WithDefaults()
	if o.Label == "" {
		o.Label = addr
	}
	if o.ClientName == "" {
		host, _ := os.Hostname()
		o.ClientName = fmt.Sprintf("%d@%s", os.Getpid(), host)
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.StallTimeout == 0 {
		o.StallTimeout = 60 * time.Second
	}
	if o.PeerTimeout == 0 {
		o.PeerTimeout = defaultPeerTimeout
	}
}

// Conn is a client connection to one server. Many calls may be in flight at
// once. Safe for concurrent use.
//
// A Conn has no reader goroutine of its own. A caller waiting for its reply
// takes the read token and reads frames itself, delivering other callers'
// replies as they arrive, until its own has come; then it passes the token
// on to a waiting caller, if any. A lone caller thus reads its reply on its
// own goroutine, with no hand-off between threads, which on a small machine
// costs more than the round trip itself. Reading is resumable: a reader
// whose context ends mid-frame leaves the partial frame for the next one.
type Conn struct {
	nc    net.Conn
	rc    syscall.RawConn // for the liveness peek; nil if unsupported
	label string
	br    *bufio.Reader
	lw    netio.LowWater // guarded by the read token, as br
	lim   wire.Limits
	w     *frameWriter
	hello wire.Hello
	// id is the server's id of the connection (AuthOK.Conn; 0 from a
	// server before fencing). fenced lists the earlier connections this
	// one's handshake ended on the server (see Fences). Set by the
	// handshake, read-only after.
	id     uint64
	fenced []uint64

	nextID    atomic.Uint64
	inFlight  atomic.Int64 // calls waiting for a reply
	streaming atomic.Bool  // a CallStream owns the connection
	lastRead  atomic.Int64 // unix nanos of the last frame read

	// readTok is held by the goroutine reading from nc; rs belongs to it.
	readTok chan struct{}
	rs      readState

	dlMu sync.Mutex // orders read-deadline changes
	// readDeadline is the read deadline in unix nanoseconds (0: none),
	// for a poll(2) to honour (pollReadable); set under dlMu.
	readDeadline atomic.Int64
	// pollMode: the reader holding the read token waits in poll(2)
	// (WithBlockingWait); guarded by the token. wk wakes it.
	pollMode bool
	wk       waker
	// The reader's interrupt (lead), guarded by the token: pollCtx is the
	// context of a reader in pollMode, whose interrupt is armed lazily;
	// interruptStop and interruptFired are its interrupt once armed.
	pollCtx        context.Context
	interruptStop  func() bool
	interruptFired chan struct{}

	peerTimeout time.Duration // see DialOptions.PeerTimeout; 0: not watched
	peer        *peerWatch    // nil: not watched

	doneOnce sync.Once
	done     chan struct{} // closed when the connection has failed or closed

	mu struct {
		sync.Mutex
		pending map[uint64]*call
		err     error // why the connection ended; set once
	}
}

// Dial connects to a server at addr ("host:port" or "unix:/path") and
// completes the handshake, proving the secret if the server asks.
func Dial(ctx context.Context, addr string, opts DialOptions) (*Conn, error) {
	opts.setDefaults(addr)
	network, address := splitAddr(addr)
	d := net.Dialer{Timeout: max(opts.PeerTimeout, 0)}
	nc, err := d.DialContext(ctx, network, address)
	if err != nil {
		// ctxErr, not ctx.Err: a dial cut by ctx's deadline a moment
		// before its timer fires is a timeout, not a server unavailable.
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, fmt.Errorf("dial server %s: %w", opts.Label, cerr)
		}
		return nil, fmt.Errorf("dial server %s: %w: %w", opts.Label, pdc.ErrUnavailable, err)
	}
	return newConn(ctx, nc, opts)
}

// NewConn completes the handshake over nc, a connection just opened to a
// server by a dialer of the caller's own (an in-memory one in tests, see
// package memnet), and returns it as a Conn. nc is closed if the
// handshake fails.
func NewConn(ctx context.Context, nc net.Conn, opts DialOptions) (*Conn, error) {
	opts.setDefaults(Addr(nc.RemoteAddr()))
	return newConn(ctx, nc, opts)
}

// newConn is NewConn with opts' defaults set.
func newConn(ctx context.Context, nc net.Conn, opts DialOptions) (*Conn, error) {
	netio.Tune(nc, opts.StallTimeout)
	c := &Conn{
		nc:      nc,
		label:   opts.Label,
		lw:      netio.NewLowWater(nc),
		lim:     opts.Limits,
		w:       newFrameWriter(nc, opts.StallTimeout),
		readTok: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	c.br = bufio.NewReaderSize(connReader{c}, readBufSize)
	c.w.beforeClose = c.wk.close
	if sc, ok := nc.(syscall.Conn); ok {
		c.rc, _ = sc.SyscallConn()
	}
	if _, ok := nc.(*net.TCPConn); ok && c.rc != nil {
		c.peerTimeout = max(opts.PeerTimeout, 0)
	}
	c.peer = newPeerWatch(c)
	c.mu.pending = make(map[uint64]*call)
	if err := c.handshake(ctx, opts); err != nil {
		_ = nc.Close()
		return nil, err
	}
	c.lastRead.Store(time.Now().UnixNano())
	return c, nil
}

// Label names the server in errors.
func (c *Conn) Label() string { return c.label }

// Fences reports whether old, an earlier connection to the same server
// process that failed, was ended by the server before c was accepted,
// with every request old carried there either handled before c's
// handshake finished or dropped: nothing sent on old can be handled
// after anything sent on c. A request whose answer was lost with old may
// then be sent again on c without an old copy landing after it.
func (c *Conn) Fences(old *Conn) bool {
	return old != nil && old.id != 0 && old.hello.Instance == c.hello.Instance && slices.Contains(c.fenced, old.id)
}

// Instance is the instance of the server this connection reached, as its
// hello said: a server restarted at the same address is another one.
func (c *Conn) Instance() string { return c.hello.Instance }

// idlePeek is how long a connection must have been quiet before Broken
// checks the socket itself.
const idlePeek = 10 * time.Millisecond

// Broken reports whether the connection has ended. A connection that has
// been idle is checked for a close by the server that nobody has read yet.
func (c *Conn) Broken() bool {
	select {
	case <-c.done:
		return true
	default:
	}
	if c.rc == nil || time.Now().UnixNano()-c.lastRead.Load() < int64(idlePeek) {
		return false
	}
	select {
	case c.readTok <- struct{}{}:
	default:
		return false // someone is reading and will see a close
	}
	defer func() { <-c.readTok }()
	err := c.peek()
	if errors.Is(err, errDataWaiting) || c.br.Buffered() > 0 || c.rs.inFrame {
		// Late replies of calls that gave up are waiting, and a close may
		// be behind them: read what has arrived, then look again.
		err = c.drain()
		if err == nil {
			err = c.peek()
		}
	}
	if err != nil && !errors.Is(err, errDataWaiting) {
		c.failReading(fmt.Errorf("connection to server %s lost: %w: %w", c.label, pdc.ErrUnavailable, err))
		return true
	}
	c.lastRead.Store(time.Now().UnixNano())
	return false
}

// failed reports whether c is known to have ended, without looking at
// its socket.
func (c *Conn) failed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// errDataWaiting is peek's report that bytes are waiting to be read.
var errDataWaiting = errors.New("data waiting")

// drain reads the frames that have already arrived, delivering or dropping
// them, without blocking for more. The caller holds the read token.
func (c *Conn) drain() error {
	// A deadline already past would stop the reads before they look; one
	// just ahead lets them take what is there.
	c.dlMu.Lock()
	dl := time.Now().Add(2 * time.Millisecond)
	c.setReadDeadlineLocked(dl)
	c.dlMu.Unlock()
	defer c.clearDeadline()
	for {
		got, err := c.readFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil // all that had arrived is read
			}
			return err
		}
		if got != nil {
			got.done <- struct{}{}
		}
	}
}

// peek checks, without blocking or consuming, whether the peer closed.
func (c *Conn) peek() error {
	var perr error
	err := c.rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EAGAIN || err == unix.EWOULDBLOCK:
		case n > 0:
			perr = errDataWaiting
		case err != nil:
			perr = err
		default:
			perr = io.EOF
		}
	})
	if err != nil {
		return err
	}
	return perr
}

// Done is closed once the connection is known to have ended: by Close, or
// by a read or write that failed. A Conn has no reader goroutine of its
// own, so with no call in flight a close by the server is noticed by the
// next call (or by the pool's check before it reuses the connection).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close closes the connection; calls in flight fail with pdc.ErrClosed.
// It is idempotent and returns once no goroutine reads from it.
func (c *Conn) Close() error {
	return c.closeWith(fmt.Errorf("connection to %s: %w", c.label, pdc.ErrClosed))
}

// closeWith closes the connection as Close does; calls in flight fail with
// why, unless the connection failed before.
func (c *Conn) closeWith(why error) error {
	c.mu.Lock()
	if c.mu.err == nil {
		c.mu.err = why
	}
	err := c.mu.err
	c.mu.Unlock()
	c.wk.close()
	_ = c.nc.Close()
	c.readTok <- struct{}{} // a reader sees the close and gives the token up
	c.failReading(err)
	<-c.readTok
	return nil
}

// WaitClosed reads until the server closes the connection or ctx ends.
// Replies that arrive meanwhile are delivered.
func (c *Conn) WaitClosed(ctx context.Context) error {
	for {
		select {
		case <-c.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("server %s did not close the connection: %w", c.label, ctxErr(ctx))
		case c.readTok <- struct{}{}:
			c.lead(ctx, nil)
			<-c.readTok
		}
	}
}

// fail ends the connection with err and fails every pending call. Calls
// whose frame is being read are failed by the reader (see failReading).
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.mu.err == nil {
		c.mu.err = err
	}
	err = c.mu.err
	pending := c.mu.pending
	c.mu.pending = nil
	c.mu.Unlock()
	c.w.fail(err)
	c.peer.close()
	c.wk.close()
	_ = c.nc.Close()
	for _, cl := range pending {
		cl.err = err
		cl.done <- struct{}{}
	}
	c.doneOnce.Do(func() { close(c.done) })
}

// Probe connects to addr, reads the server's hello and hangs up without
// authenticating. It tells whether a server is there and which instance.
func Probe(ctx context.Context, addr string) (wire.Hello, error) {
	network, address := splitAddr(addr)
	d := net.Dialer{Timeout: defaultPeerTimeout}
	nc, err := d.DialContext(ctx, network, address)
	if err != nil {
		if ctx.Err() != nil {
			return wire.Hello{}, fmt.Errorf("probe %s: %w", addr, ctxErr(ctx))
		}
		return wire.Hello{}, fmt.Errorf("probe %s: %w: %w", addr, pdc.ErrUnavailable, err)
	}
	defer nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = nc.SetDeadline(deadline)
	r := newFrameReader(nc, wire.Limits{MaxHeader: 64 << 10, MaxPayload: 1})
	f, err := r.next()
	if err == nil && (f.Method != wire.MethodHello || f.Flags != 0) {
		err = fmt.Errorf("first frame is %s, not hello: %w", f.Method, pdc.ErrProtocol)
	}
	var hdr []byte
	if err == nil {
		hdr, _, err = r.body(f)
	}
	var h wire.Hello
	if err == nil {
		err = h.Unmarshal(hdr)
	}
	if err != nil {
		return wire.Hello{}, fmt.Errorf("probe %s: %w: %w", addr, pdc.ErrUnavailable, err)
	}
	return h, nil
}

// DialRaw connects to a server and completes the handshake like Dial, then
// hands over the bare connection: for tools and tests that write frames of
// their own (a protocol probe, a hostile client). Nothing is left unread:
// the server sends nothing after the handshake until asked.
func DialRaw(ctx context.Context, addr string, opts DialOptions) (net.Conn, error) {
	c, err := Dial(ctx, addr, opts)
	if err != nil {
		return nil, err
	}
	if n := c.br.Buffered(); n > 0 {
		_ = c.nc.Close()
		return nil, fmt.Errorf("server %s: %d bytes after the handshake: %w", c.label, n, pdc.ErrProtocol)
	}
	return c.nc, nil
}
