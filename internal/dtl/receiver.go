package dtl

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	// Mode is the default mode of fetches. Default: PDC_DTL, else auto.
	Mode Mode
	// Secret is the cluster secret for the RPC connections to senders.
	Secret []byte
	// ClientName names this process to senders.
	ClientName string
	// PushListen is where push connections are accepted. Default: the
	// local address this host uses to reach the sender, port chosen.
	PushListen string
	// MaxIdle bounds the idle connections kept per sender (RPC and bulk).
	// Default 4.
	MaxIdle int
	// Logger receives refused push peers. Default slog.Default().
	Logger *slog.Logger
}

// Receiver is the receiving side of every backend (DYAD_COMM_RECV): it
// fetches payloads from senders into sinks. Safe for concurrent use.
type Receiver struct {
	cfg ReceiverConfig
	log *slog.Logger

	// ctx is canceled by Close, which ends the fetches under way.
	ctx    context.Context
	cancel context.CancelFunc

	rpcConns  *connPool[*rpc.Conn]
	bulkConns *endpointCache

	transports map[Mode]RecvTransport

	mu struct {
		sync.Mutex
		push   map[string]*pushListener // by listening host
		bulk   map[string]string        // sender's bulk address by its RPC address
		closed bool
	}
}

// NewReceiver makes a receiver. The mode comes from cfg, else PDC_DTL.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	if cfg.Mode == ModeAuto {
		m, err := ModeFromEnv()
		if err != nil {
			return nil, err
		}
		cfg.Mode = m
	}
	if !cfg.Mode.valid() {
		return nil, fmt.Errorf("receiver: %w: %d", ErrBadMode, cfg.Mode)
	}
	if cfg.MaxIdle <= 0 {
		cfg.MaxIdle = 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Receiver{cfg: cfg, log: cfg.Logger}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.rpcConns = newConnPool(cfg.MaxIdle, func(c *rpc.Conn) { _ = c.Close() })
	r.bulkConns = newEndpointCache(64*cfg.MaxIdle, func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			netio.Tune(nc, defaultStall)
		}
		return nc, err
	})
	r.mu.push = map[string]*pushListener{}
	r.mu.bulk = map[string]string{}
	r.transports = recvHalves(r)
	return r, nil
}

// Mode is the receiver's default mode.
func (r *Receiver) Mode() Mode { return r.cfg.Mode }

// Close closes every connection and listener; a fetch under way fails
// with pdc.ErrClosed. A push writing into a sink at that moment is waited
// for: it owns the sink until it returns. Idempotent.
func (r *Receiver) Close() error {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil
	}
	r.mu.closed = true
	r.cancel()
	pls := r.mu.push
	r.mu.Unlock()
	for _, p := range pls {
		p.close()
	}
	r.rpcConns.close()
	r.bulkConns.close()
	return nil
}

// FetchOption qualifies one fetch.
type FetchOption func(*fetchOpts)

type fetchOpts struct {
	mode     Mode
	off, len uint64
	expect   int64 // the payload's expected size + 1; 0: unknown
}

// WithMode picks the mode of one fetch.
func WithMode(m Mode) FetchOption { return func(o *fetchOpts) { o.mode = m } }

// WithExpectedSize says how large the payload is expected to be (a staged
// file's record says). It only saves work: a payload expected to come in
// the answer (at most EagerLimit) is not also asked for over a bulk
// connection, which a pull sends along with the request once it knows the
// sender's bulk address. A wrong guess costs the round trip saved.
func WithExpectedSize(n int64) FetchOption {
	return func(o *fetchOpts) {
		if n >= 0 {
			o.expect = n + 1
		}
	}
}

// WithSection fetches n bytes from off (n 0: to the end).
func WithSection(off, n uint64) FetchOption { return func(o *fetchOpts) { o.off, o.len = off, n } }

// Fetch asks the sender at peer (its RPC address) for the payload under
// key and puts it into sink. It returns the number of bytes received,
// which is the payload's whole size.
func (r *Receiver) Fetch(ctx context.Context, peer string, key []byte, sink Sink, opts ...FetchOption) (int64, error) {
	ctx, done := r.bind(ctx)
	defer done()
	if err := sink.check(); err != nil {
		return 0, fmt.Errorf("fetch %s from %s: %w", showKey(key), peer, err)
	}
	o := fetchOpts{mode: r.cfg.Mode}
	for _, opt := range opts {
		opt(&o)
	}
	if !o.mode.valid() {
		return 0, fmt.Errorf("fetch %s from %s: %w: %d", showKey(key), peer, ErrBadMode, o.mode)
	}
	mode := o.mode.resolve(peer)
	if mode == ModeShm && !SameHost(peer) {
		return 0, fmt.Errorf("fetch %s from %s: shm needs the sender on this host: %w", showKey(key), peer, ErrBadMode)
	}
	n, err := r.fetch(ctx, peer, key, sink, mode, &o)
	if err != nil {
		return n, fmt.Errorf("fetch %s from %s by %s: %w", showKey(key), peer, mode, classify(ctx, err))
	}
	return n, nil
}

func (r *Receiver) fetch(ctx context.Context, peer string, key []byte, sink Sink, mode Mode, o *fetchOpts) (int64, error) {
	t := r.transports[mode]
	if t == nil {
		return 0, fmt.Errorf("mode %s: %w", mode, ErrBadMode)
	}
	conn, err := r.conn(ctx, peer)
	if err != nil {
		return 0, err
	}
	healthy := false
	defer func() { r.rpcConns.put(peer, conn, healthy) }()

	fr := wire.FetchRequest{Key: key, Mode: uint32(mode), Cap: sink.capacity(), Off: o.off, Len: o.len}
	sink.expect = o.expect
	tr, err := t.Prepare(ctx, Peer{Addr: peer, Local: conn.LocalAddr()}, &fr, sink)
	if err != nil {
		return 0, err
	}
	defer tr.Abort()
	hdr := fr.Marshal(nil)

	var into []byte
	if sink.Buf != nil {
		n := min(len(sink.Buf), EagerLimit)
		into = sink.Buf[:n:n] // Call reads into cap(into): never past len
	}
	var raw rpc.Reply
	if tr.chunk != nil {
		raw, err = conn.CallStream(ctx, wire.MethodFetch, hdr, nil, tr.chunk)
	} else {
		raw, err = conn.Call(ctx, wire.MethodFetch, hdr, nil, into)
	}
	if err != nil {
		var se *pdc.ServerError
		healthy = errors.As(err, &se) // an answer: the connection is fine
		return 0, err
	}
	healthy = true
	var rep wire.FetchReply
	if err := rep.Unmarshal(raw.Header); err != nil {
		return 0, fmt.Errorf("fetch answer: %w: %w", ErrBadPack, err)
	}
	if err := sink.fits(rep.Size); err != nil {
		return 0, err
	}
	if rep.Size <= EagerLimit {
		if tr.eager != nil {
			tr.eager(ctx)
			tr.abort = nil
		}
		if uint64(len(raw.Payload)) != rep.Size {
			return 0, fmt.Errorf("answer carries %d bytes of a %d-byte payload: %w", len(raw.Payload), rep.Size, ErrBadPack)
		}
		if sink.Buf != nil && len(raw.Payload) > 0 && &raw.Payload[0] == &sink.Buf[0] {
			return int64(rep.Size), nil // read straight into the caller's buffer
		}
		w := sinkWriter{s: sink}
		return int64(rep.Size), w.write(raw.Payload)
	}
	return t.Receive(ctx, tr, &rep)
}

// pull reads a payload exposed under rep.Handle over a bulk connection.
func (r *Receiver) pull(ctx context.Context, rep *wire.FetchReply, sink Sink) (int64, error) {
	if len(rep.Token) != tokenSize || rep.Addr == "" {
		return 0, fmt.Errorf("pull answer without an address or with a %d-byte token: %w", len(rep.Token), ErrBadPack)
	}
	req := request{id: rep.Handle, size: rep.Size}
	copy(req.token[:], rep.Token)
	hdr := req.put(make([]byte, 0, requestSize), magicPull)
	var n int64
	err := r.bulkConns.run(ctx, rep.Addr, func(ep *endpoint) (remote, err error) {
		n, remote, err = pullOn(ctx, ep.nc, hdr, rep.Size, sink)
		r.bulkConns.put(ep, err == nil)
		return remote, err
	})
	return n, err
}

// startPull sends a pipelined pull to peer's bulk address, if known, under
// a new token; nil if there is none or it cannot be sent.
func (r *Receiver) startPull(ctx context.Context, peer string) (*endpoint, token) {
	var tok token
	r.mu.Lock()
	addr := r.mu.bulk[peer]
	r.mu.Unlock()
	if addr == "" {
		return nil, tok
	}
	_, _ = rand.Read(tok[:])
	req := request{token: tok}
	hdr := req.putFlags(make([]byte, 0, requestSize), magicPull, flagWait)
	for attempt := 0; attempt < 2; attempt++ {
		ep, _, err := r.bulkConns.get(ctx, addr)
		if err != nil {
			return nil, tok
		}
		if _, err := netio.WriteFull(ctx, ep.nc, hdr); err == nil {
			return ep, tok
		}
		r.bulkConns.put(ep, false)
	}
	return nil, tok
}

func pullOn(ctx context.Context, nc net.Conn, hdr []byte, size uint64, sink Sink) (n int64, remote, err error) {
	if _, err := netio.WriteFull(ctx, nc, hdr); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	return readPulled(ctx, nc, size, sink)
}

// readPulled reads a pull's answer and its size bytes into sink.
func readPulled(ctx context.Context, nc net.Conn, size uint64, sink Sink) (n int64, remote, err error) {
	a, remote, err := readAnswer(ctx, nc, magicPullAck)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	if remote != nil {
		return 0, remote, nil
	}
	if a.size != size {
		return 0, nil, fmt.Errorf("pull answer of %d bytes for a %d-byte payload: %w", a.size, size, ErrBadPack)
	}
	done := netio.Interrupt(ctx, nc, true)
	w := sinkWriter{s: sink}
	pr := newPayloadReader(nc, int64(size))
	err = w.readFrom(pr, int64(size))
	pr.done()
	if done() {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	if err != nil && !errors.Is(err, ErrBadBuffer) {
		err = fmt.Errorf("cut off after %d of %d bytes: %w", w.n, size, err)
	}
	return w.n, nil, err
}

// conn returns an RPC connection to peer of the receiver's own: a stream
// needs one to itself, and the others reuse them.
func (r *Receiver) conn(ctx context.Context, peer string) (*rpc.Conn, error) {
	// An idle connection may have died with its sender (restarted since,
	// perhaps at the same address): it would fail this fetch.
	for c := r.rpcConns.get(peer); c != nil; c = r.rpcConns.get(peer) {
		if !c.Broken() {
			return c, nil
		}
		_ = c.Close()
	}
	r.mu.Lock()
	closed := r.mu.closed
	r.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("receiver is closed: %w", pdc.ErrClosed)
	}
	c, err := rpc.Dial(ctx, peer, rpc.DialOptions{Secret: r.cfg.Secret, ClientName: r.cfg.ClientName})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPeerFailed, err)
	}
	return c, nil
}

// pushListener returns the push listener on local, the address this host
// uses to reach the sender, starting it on first use.
func (r *Receiver) pushListener(local net.Addr) (*pushListener, error) {
	listen := r.cfg.PushListen
	if listen == "" {
		listen = "127.0.0.1:0"
		if ta, ok := local.(*net.TCPAddr); ok {
			listen = net.JoinHostPort(ta.IP.String(), "0")
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return nil, fmt.Errorf("receiver is closed: %w", pdc.ErrClosed)
	}
	if p := r.mu.push[listen]; p != nil {
		return p, nil
	}
	p, err := listenPush(listen, r.log)
	if err != nil {
		return nil, err
	}
	r.mu.push[listen] = p
	return p, nil
}

// View is a fetched payload to read in place: in shm mode the sender's
// memory file mapped read-only (no copy at all), otherwise a buffer.
type View struct {
	m *shmMapping
	b []byte
}

// Bytes are the payload; valid until Close.
func (v *View) Bytes() []byte {
	if v.m != nil {
		return v.m.data
	}
	return v.b
}

// Close releases the view. Idempotent.
func (v *View) Close() error {
	if v.m != nil {
		v.m.unmap()
		v.m = nil
	}
	v.b = nil
	return nil
}

// FetchView fetches the payload under key for reading in place.
func (r *Receiver) FetchView(ctx context.Context, peer string, key []byte, opts ...FetchOption) (*View, error) {
	ctx, done := r.bind(ctx)
	defer done()
	o := fetchOpts{mode: r.cfg.Mode}
	for _, opt := range opts {
		opt(&o)
	}
	mode := o.mode.resolve(peer)
	if v, ok := r.transports[mode].(viewer); ok && v.canView(peer) {
		view, err := r.fetchView(ctx, peer, key, mode, v, &o)
		if err != nil {
			return nil, fmt.Errorf("fetch %s from %s by %s: %w", showKey(key), peer, mode, classify(ctx, err))
		}
		return view, nil
	}
	var buf bytes.Buffer
	if _, err := r.Fetch(ctx, peer, key, IntoWriter(&buf), opts...); err != nil {
		return nil, err
	}
	return &View{b: buf.Bytes()}, nil
}

// fetchView asks for a payload to view in place and has v map it.
func (r *Receiver) fetchView(ctx context.Context, peer string, key []byte, mode Mode, v viewer, o *fetchOpts) (*View, error) {
	conn, err := r.conn(ctx, peer)
	if err != nil {
		return nil, err
	}
	fr := wire.FetchRequest{Key: key, Mode: uint32(mode), Off: o.off, Len: o.len, Map: true}
	raw, err := conn.Call(ctx, wire.MethodFetch, fr.Marshal(nil), nil, nil)
	var se *pdc.ServerError
	r.rpcConns.put(peer, conn, err == nil || errors.As(err, &se))
	if err != nil {
		return nil, err
	}
	var rep wire.FetchReply
	if err := rep.Unmarshal(raw.Header); err != nil {
		return nil, fmt.Errorf("fetch answer: %w: %w", ErrBadPack, err)
	}
	if rep.Size <= EagerLimit {
		if uint64(len(raw.Payload)) != rep.Size {
			return nil, fmt.Errorf("answer carries %d bytes of a %d-byte payload: %w", len(raw.Payload), rep.Size, ErrBadPack)
		}
		return &View{b: raw.Payload}, nil
	}
	return v.view(ctx, &rep)
}

// errReceiverClosed ends the fetches under way when the receiver closes.
var errReceiverClosed = fmt.Errorf("the receiver was closed: %w", pdc.ErrClosed)

// bind makes ctx end when the receiver closes, too.
func (r *Receiver) bind(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(r.ctx, func() { cancel(errReceiverClosed) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// classify adds the dtl error matching err's pdc sentinel, so that errors
// from the other side match ErrNotFound, ErrPeerFailed and the rest too.
func classify(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errReceiverClosed) {
		return fmt.Errorf("%w (%v)", cause, err)
	}
	ctxEnded := ctx.Err()
	if ctxEnded == nil {
		// A parent context ends before its children learn of it: a sink
		// that waited on the caller's context can report the deadline
		// while ours does not show it yet.
		for _, e := range []error{context.DeadlineExceeded, context.Canceled} {
			if errors.Is(err, e) {
				ctxEnded = e
				break
			}
		}
	}
	if ctxEnded != nil {
		// The caller's deadline or cancellation ended the fetch, whatever
		// the broken read or write below it says.
		sentinel := pdc.ErrCanceled
		if errors.Is(ctxEnded, context.DeadlineExceeded) {
			sentinel = pdc.ErrTimeout
		}
		if errors.Is(err, sentinel) && !errors.Is(err, ErrPeerFailed) {
			return err
		}
		return fmt.Errorf("%w (%v)", sentinel, err)
	}
	var de *dtlError
	if errors.As(err, &de) {
		return err
	}
	// A sender's error arrives as its pdc sentinel; the dtl error it was
	// is named in its message.
	var se *pdc.ServerError
	if errors.As(err, &se) {
		for _, d := range allErrors {
			if strings.Contains(se.Msg, d.Error()) {
				return &classified{d: d, err: err}
			}
		}
	}
	for _, d := range []error{ErrNotFound, ErrBadPack, ErrPeerFailed} {
		if errors.Is(err, d.(*dtlError).base) {
			return &classified{d: d, err: err}
		}
	}
	return err
}

type classified struct {
	d   error
	err error
}

func (c *classified) Error() string   { return c.err.Error() }
func (c *classified) Unwrap() []error { return []error{c.d, c.err} }
