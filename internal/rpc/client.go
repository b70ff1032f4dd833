package rpc

import (
	"bufio"
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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

	nextID    atomic.Uint64
	inFlight  atomic.Int64 // calls waiting for a reply
	streaming atomic.Bool  // a CallStream owns the connection
	lastRead  atomic.Int64 // unix nanos of the last frame read

	// readTok is held by the goroutine reading from nc; rs belongs to it.
	readTok chan struct{}
	rs      readState

	dlMu sync.Mutex // orders read-deadline changes

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

// Dial connects to a server at addr ("host:port" or "unix:/path") and
// completes the handshake, proving the secret if the server asks.
func Dial(ctx context.Context, addr string, opts DialOptions) (*Conn, error) {
	opts.setDefaults(addr)
	network, address := splitAddr(addr)
	d := net.Dialer{Timeout: max(opts.PeerTimeout, 0)}
	nc, err := d.DialContext(ctx, network, address)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("dial server %s: %w", opts.Label, ctxErr(ctx))
		}
		return nil, fmt.Errorf("dial server %s: %w: %w", opts.Label, pdc.ErrUnavailable, err)
	}
	netio.Tune(nc, opts.StallTimeout)
	c := &Conn{
		nc:      nc,
		label:   opts.Label,
		br:      bufio.NewReaderSize(nc, readBufSize),
		lw:      netio.NewLowWater(nc),
		lim:     opts.Limits,
		w:       newFrameWriter(nc, opts.StallTimeout),
		readTok: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
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

func (c *Conn) handshake(ctx context.Context, opts DialOptions) (err error) {
	deadline := time.Now().Add(opts.HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() {
			// ctx ended as the handshake finished: its interrupt may land
			// after any reset, so the connection cannot be trusted.
			if err == nil {
				err = fmt.Errorf("server %s: handshake: %w", c.label, ctxErr(ctx))
			}
			return
		}
		_ = c.nc.SetDeadline(time.Time{})
	}()
	r := &frameReader{br: c.br, limits: c.lim}

	fail := func(what string, err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("server %s: handshake: %s: %w", c.label, what, ctxErr(ctx))
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("server %s: handshake: %s: no answer within %v: %w", c.label, what, opts.HandshakeTimeout, pdc.ErrTimeout)
		}
		if errors.Is(err, pdc.ErrProtocol) || errors.Is(err, pdc.ErrTooLarge) || errors.Is(err, pdc.ErrPermission) || errors.Is(err, pdc.ErrVersion) {
			return fmt.Errorf("server %s: handshake: %s: %w", c.label, what, err)
		}
		return fmt.Errorf("server %s: handshake: %s: %w: %w", c.label, what, pdc.ErrUnavailable, err)
	}

	f, err := r.next()
	if err != nil {
		return fail("read hello", err)
	}
	if f.Method == wire.MethodHello && f.Flags == wire.FlagResponse|wire.FlagError && f.PayloadLen == 0 {
		// The server refused the connection (too many open) and says why.
		hdr, err := r.header(f)
		if err != nil {
			return fail("read hello", err)
		}
		var eb wire.ErrorBody
		if err := eb.Unmarshal(hdr); err != nil {
			return fail("decode refusal", err)
		}
		return &pdc.ServerError{Server: c.label, Method: "connect", Msg: eb.Message, Err: eb.Code.Err()}
	}
	if f.Method != wire.MethodHello || f.Flags != 0 {
		return fail("read hello", fmt.Errorf("first frame is %s flags %#x, not hello: %w", f.Method, uint8(f.Flags), pdc.ErrProtocol))
	}
	// Nothing large is allocated for a peer that has not proven itself.
	if f.HeaderLen > maxHelloHeader || f.PayloadLen != 0 {
		return fail("read hello", fmt.Errorf("hello of %d+%d bytes; at most %d and no payload: %w", f.HeaderLen, f.PayloadLen, maxHelloHeader, pdc.ErrProtocol))
	}
	hdr, _, err := r.body(f)
	if err != nil {
		return fail("read hello", err)
	}
	if err := c.hello.Unmarshal(hdr); err != nil {
		return fail("decode hello", err)
	}
	if c.hello.Version < wire.Version {
		return fail("hello", fmt.Errorf("server speaks protocol version %d, this client needs %d: %w", c.hello.Version, wire.Version, pdc.ErrVersion))
	}
	auth := wire.Auth{Nonce: newNonce(), Client: opts.ClientName}
	if len(opts.Secret) > 0 {
		auth.MAC = clientProof(opts.Secret, c.hello.Nonce, auth.Nonce)
	}
	if err := c.w.write(ctx, wire.Frame{Method: wire.MethodAuth}, auth.Marshal(nil), nil); err != nil {
		return fail("send auth", err)
	}
	f, err = r.next()
	if err != nil {
		return fail("read auth reply", err)
	}
	hdr, _, err = r.body(f)
	if err != nil {
		return fail("read auth reply", err)
	}
	if f.Flags&wire.FlagError != 0 {
		var eb wire.ErrorBody
		if err := eb.Unmarshal(hdr); err != nil {
			return fail("decode auth reply", err)
		}
		msg := eb.Message
		if eb.Code == wire.CodePermission && len(opts.Secret) == 0 {
			// Sent without a proof so that the server logs the refusal.
			msg += " (this client has none: give it the cluster's secret file, or the cluster's PDC_TMPDIR)"
		}
		return &pdc.ServerError{Server: c.label, Method: "auth", Msg: msg, Err: eb.Code.Err()}
	}
	var ok wire.AuthOK
	if err := ok.Unmarshal(hdr); err != nil {
		return fail("decode auth reply", err)
	}
	if c.hello.AuthRequired && !hmac.Equal(ok.MAC, serverProof(opts.Secret, c.hello.Nonce, auth.Nonce)) {
		return fail("auth", fmt.Errorf("server did not prove it knows the cluster secret: %w", pdc.ErrPermission))
	}
	return nil
}

// Label names the server in errors.
func (c *Conn) Label() string { return c.label }

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
	_ = c.nc.SetReadDeadline(time.Now().Add(2 * time.Millisecond))
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
	_ = c.nc.Close()
	for _, cl := range pending {
		cl.err = err
		cl.done <- struct{}{}
	}
	c.doneOnce.Do(func() { close(c.done) })
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

// interrupt makes a blocked read return at once; the reader checks why.
func (c *Conn) interrupt() {
	c.dlMu.Lock()
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	c.dlMu.Unlock()
}

func (c *Conn) clearDeadline() {
	c.dlMu.Lock()
	_ = c.nc.SetReadDeadline(time.Time{})
	c.dlMu.Unlock()
}

// lead reads and delivers frames until own's reply has been delivered, ctx
// ends, or the connection fails. The caller holds the read token. own may
// be nil (read until the connection ends).
func (c *Conn) lead(ctx context.Context, own *call) {
	defer c.peer.start().stop()
	if ctx.Done() != nil {
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			c.interrupt()
			close(fired)
		})
		defer func() {
			if !stop() {
				// The interrupt ran or is running: once it has, clear it
				// for the next reader.
				<-fired
				c.clearDeadline()
			}
		}()
	}
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

// readFrame reads until one frame is complete and returns its call (nil if
// the frame was discarded). It resumes a frame a previous reader left
// unfinished. The caller holds the read token.
func (c *Conn) readFrame() (*call, error) {
	rs := &c.rs
	if !rs.inFrame {
		for rs.nPrefix < wire.FrameSize {
			n, err := c.br.Read(rs.prefix[rs.nPrefix:])
			rs.nPrefix += n
			if err != nil {
				return nil, err
			}
		}
		rs.nPrefix = 0
		f, err := wire.DecodeFrame(rs.prefix[:])
		if err == nil {
			err = c.lim.Check(f)
		}
		if err != nil {
			return nil, err
		}
		if f.Flags&wire.FlagResponse == 0 {
			return nil, fmt.Errorf("server sent a request frame (%s id %d): %w", f.Method, f.ID, pdc.ErrProtocol)
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
		} else {
			rs.cl = cl
			rs.hdr = make([]byte, f.HeaderLen)
			rs.left = int64(f.PayloadLen)
			switch {
			case f.Flags&wire.FlagError == 0 && len(cl.intoV) > 0 && totalLen(cl.intoV) == f.PayloadLen:
				rs.payload, rs.segs = cl.intoV[0], cl.intoV[1:]
				cl.scattered = true
			case f.Flags&wire.FlagError == 0 && uint64(cap(cl.into)) >= f.PayloadLen:
				rs.payload = cl.into[:f.PayloadLen]
			default:
				rs.payload = make([]byte, f.PayloadLen)
			}
		}
	}
	for rs.skip > 0 {
		n, err := c.br.Discard(int(min(rs.skip, 1<<30)))
		rs.skip -= uint64(n)
		if err != nil {
			return nil, err
		}
	}
	if rs.cl != nil {
		for rs.nHdr < len(rs.hdr) {
			n, err := c.br.Read(rs.hdr[rs.nHdr:])
			rs.nHdr += n
			if err != nil {
				return nil, err
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
					return nil, err
				}
			}
			if len(rs.segs) == 0 {
				break
			}
			rs.payload, rs.segs, rs.nPay = rs.segs[0], rs.segs[1:], 0
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
			c.fail(err) // the stream may be torn
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
		c.inFlight.Add(-1)
		return c.giveUp(ctx, f, cl)
	}
	for {
		select {
		case <-cl.done:
			c.inFlight.Add(-1)
			return c.finish(ctx, f.Method, cl)
		case c.readTok <- struct{}{}:
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
		case <-ctx.Done():
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

// maxHelloHeader bounds the hello a server sends before it has proven
// anything.
const maxHelloHeader = 64 << 10

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
