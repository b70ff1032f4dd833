package rpc

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
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
}

// Conn is a client connection to one server. Many calls may be in flight at
// once. Safe for concurrent use.
type Conn struct {
	nc    net.Conn
	label string
	r     *frameReader
	w     *frameWriter
	hello wire.Hello

	nextID   atomic.Uint64
	inFlight atomic.Int64  // calls waiting for a reply
	done     chan struct{} // closed when the reader stops

	mu struct {
		sync.Mutex
		pending map[uint64]*call
		err     error // why the connection ended; set once
	}
}

type call struct {
	into    []byte
	hdr     []byte
	payload []byte
	isErr   bool
	err     error         // connection failure
	done    chan struct{} // receives one value when the call ends
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// Dial connects to a server at addr ("host:port" or "unix:/path") and
// completes the handshake, proving the secret if the server asks.
func Dial(ctx context.Context, addr string, opts DialOptions) (*Conn, error) {
	opts.setDefaults(addr)
	network, address := splitAddr(addr)
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, address)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("dial server %s: %w", opts.Label, ctxErr(ctx))
		}
		return nil, fmt.Errorf("dial server %s: %w: %w", opts.Label, pdc.ErrUnavailable, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &Conn{
		nc:    nc,
		label: opts.Label,
		r:     newFrameReader(nc, opts.Limits),
		w:     newFrameWriter(nc, opts.StallTimeout),
		done:  make(chan struct{}),
	}
	c.mu.pending = make(map[uint64]*call)
	if err := c.handshake(ctx, opts); err != nil {
		_ = nc.Close()
		return nil, err
	}
	go c.readLoop()
	return c, nil
}

func (c *Conn) handshake(ctx context.Context, opts DialOptions) error {
	deadline := time.Now().Add(opts.HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.nc.SetDeadline(deadline)
	defer c.nc.SetDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	fail := func(what string, err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("server %s: handshake: %s: %w", c.label, what, ctxErr(ctx))
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("server %s: handshake: %s: no answer within %v: %w", c.label, what, opts.HandshakeTimeout, pdc.ErrTimeout)
		}
		if errors.Is(err, pdc.ErrProtocol) || errors.Is(err, pdc.ErrTooLarge) || errors.Is(err, pdc.ErrPermission) {
			return fmt.Errorf("server %s: handshake: %s: %w", c.label, what, err)
		}
		return fmt.Errorf("server %s: handshake: %s: %w: %w", c.label, what, pdc.ErrUnavailable, err)
	}

	f, err := c.r.next()
	if err != nil {
		return fail("read hello", err)
	}
	if f.Method != wire.MethodHello || f.Flags != 0 {
		return fail("read hello", fmt.Errorf("first frame is %s flags %#x, not hello: %w", f.Method, uint8(f.Flags), pdc.ErrProtocol))
	}
	hdr, _, err := c.r.body(f, nil)
	if err != nil {
		return fail("read hello", err)
	}
	if err := c.hello.Unmarshal(hdr); err != nil {
		return fail("decode hello", err)
	}
	if c.hello.Version < wire.Version {
		return fail("hello", fmt.Errorf("server speaks protocol version %d, this client needs %d: %w", c.hello.Version, wire.Version, pdc.ErrVersion))
	}
	if c.hello.AuthRequired && len(opts.Secret) == 0 {
		return fail("auth", fmt.Errorf("server requires the cluster secret and none was given (pass the secret file, or PDC_TMPDIR of the cluster): %w", pdc.ErrPermission))
	}
	auth := wire.Auth{Nonce: newNonce(), Client: opts.ClientName}
	if len(opts.Secret) > 0 {
		auth.MAC = clientProof(opts.Secret, c.hello.Nonce, auth.Nonce)
	}
	if err := c.w.write(ctx, wire.Frame{Method: wire.MethodAuth}, auth.Marshal(nil), nil); err != nil {
		return fail("send auth", err)
	}
	f, err = c.r.next()
	if err != nil {
		return fail("read auth reply", err)
	}
	hdr, _, err = c.r.body(f, nil)
	if err != nil {
		return fail("read auth reply", err)
	}
	if f.Flags&wire.FlagError != 0 {
		var eb wire.ErrorBody
		if err := eb.Unmarshal(hdr); err != nil {
			return fail("decode auth reply", err)
		}
		return &pdc.ServerError{Server: c.label, Method: "auth", Msg: eb.Message, Err: eb.Code.Err()}
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

// Hello returns what the server announced in the handshake.
func (c *Conn) Hello() wire.Hello { return c.hello }

// Label names the server in errors.
func (c *Conn) Label() string { return c.label }

// Broken reports whether the connection has ended.
func (c *Conn) Broken() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close closes the connection; calls in flight fail with pdc.ErrClosed.
// It is idempotent and waits for the reader to stop.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.mu.err == nil {
		c.mu.err = fmt.Errorf("connection to %s: %w", c.label, pdc.ErrClosed)
	}
	c.mu.Unlock()
	_ = c.nc.Close()
	<-c.done
	return nil
}

func (c *Conn) readLoop() {
	err := c.readFrames()
	c.mu.Lock()
	if c.mu.err == nil {
		c.mu.err = fmt.Errorf("connection to server %s lost: %w: %w", c.label, pdc.ErrUnavailable, err)
	}
	err = c.mu.err
	pending := c.mu.pending
	c.mu.pending = nil
	c.mu.Unlock()
	c.w.fail(err)
	_ = c.nc.Close()
	for _, cl := range pending {
		cl.err = err
		cl.done <- struct{}{}
	}
	close(c.done)
}

func (c *Conn) readFrames() error {
	for {
		f, err := c.r.next()
		if err != nil {
			return err
		}
		if f.Flags&wire.FlagResponse == 0 {
			return fmt.Errorf("server sent a request frame (%s id %d): %w", f.Method, f.ID, pdc.ErrProtocol)
		}
		c.mu.Lock()
		cl := c.mu.pending[f.ID]
		delete(c.mu.pending, f.ID)
		c.mu.Unlock()
		if cl == nil {
			// The caller gave up on it.
			if err := c.r.discard(uint64(f.HeaderLen) + f.PayloadLen); err != nil {
				return err
			}
			continue
		}
		into := cl.into
		if f.Flags&wire.FlagError != 0 {
			into = nil
		}
		hdr, payload, err := c.r.body(f, into)
		if err != nil {
			cl.err = fmt.Errorf("connection to server %s lost: %w: %w", c.label, pdc.ErrUnavailable, err)
			cl.done <- struct{}{}
			return err
		}
		cl.hdr, cl.payload, cl.isErr = hdr, payload, f.Flags&wire.FlagError != 0
		cl.done <- struct{}{}
	}
}

// Reply is a successful response. Payload aliases the caller's buffer when it
// fit there.
type Reply struct {
	Header  []byte
	Payload []byte
}

// Call sends a request and waits for its reply. hdr and payload are not
// retained after Call returns. When into is large enough for the reply's
// payload, the payload is read into it. Errors from the server come back as
// *pdc.ServerError wrapping the sentinel of its code; a lost connection as
// pdc.ErrUnavailable; ctx's end as pdc.ErrTimeout or pdc.ErrCanceled (the
// server is told to drop the request).
func (c *Conn) Call(ctx context.Context, m wire.Method, hdr []byte, payload [][]byte, into []byte) (Reply, error) {
	f := wire.Frame{Method: m, ID: c.nextID.Add(1)}
	if d, ok := ctx.Deadline(); ok {
		f.Timeout = time.Until(d)
		if f.Timeout <= 0 {
			return Reply{}, fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
		}
	}
	if ctx.Err() != nil {
		return Reply{}, fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
	}
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	cl := callPool.Get().(*call)
	cl.into = into
	c.mu.Lock()
	if c.mu.err != nil {
		err := c.mu.err
		c.mu.Unlock()
		c.release(cl)
		return Reply{}, fmt.Errorf("%s: %w", m, err)
	}
	c.mu.pending[f.ID] = cl
	c.mu.Unlock()

	if err := c.w.write(ctx, f, hdr, payload); err != nil {
		if c.forget(f.ID) {
			c.release(cl)
			if ctx.Err() != nil {
				return Reply{}, fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
			}
			return Reply{}, fmt.Errorf("server %s: %s: %w", c.label, m, err)
		}
		// The reader already failed the call; fall through to collect it.
	}

	select {
	case <-cl.done:
		return c.finish(m, cl)
	case <-ctx.Done():
	}
	if c.forget(f.ID) {
		c.release(cl)
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || f.Timeout == 0 {
			// The server's copy of a deadline fires on its own; a
			// cancellation it can only learn from us.
			cf := wire.Frame{Flags: wire.FlagCancel, Method: m, ID: f.ID}
			_ = c.w.write(context.Background(), cf, nil, nil)
		}
		return Reply{}, fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
	}
	// The reader is filling our buffer right now. Unless it finishes at
	// once, the only way to get the buffer back is to end the connection.
	select {
	case <-cl.done:
		return c.finish(m, cl)
	default:
	}
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	<-cl.done
	c.release(cl)
	return Reply{}, fmt.Errorf("server %s: %s: %w", c.label, m, ctxErr(ctx))
}

// forget removes a pending call; false if the reader has claimed it.
func (c *Conn) forget(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.pending[id]; ok {
		delete(c.mu.pending, id)
		return true
	}
	return false
}

func (c *Conn) finish(m wire.Method, cl *call) (Reply, error) {
	defer c.release(cl)
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
	return Reply{Header: cl.hdr, Payload: cl.payload}, nil
}

func (c *Conn) release(cl *call) {
	*cl = call{done: cl.done}
	callPool.Put(cl)
}

// Probe connects to addr, reads the server's hello and hangs up without
// authenticating. It tells whether a server is there and which instance.
func Probe(ctx context.Context, addr string) (wire.Hello, error) {
	network, address := splitAddr(addr)
	var d net.Dialer
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
		hdr, _, err = r.body(f, nil)
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
