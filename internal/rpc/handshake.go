package rpc

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// handshake proves the client, and calls admit just before it tells the
// client it is in.
func (c *serverConn) handshake(admit func()) error {
	s := c.s
	start := time.Now()
	_ = c.nc.SetDeadline(start.Add(s.cfg.HandshakeTimeout))
	defer c.nc.SetDeadline(time.Time{})

	nonce := newNonce()
	hello := wire.Hello{
		Version:      wire.Version,
		Rank:         s.cfg.Rank,
		Size:         s.cfg.Size,
		Instance:     s.cfg.Instance,
		AuthRequired: len(s.cfg.Secret) > 0,
		Nonce:        nonce,
		Trace:        !s.noTrace,
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
	ok.Conn = c.id
	// The fence gives up at half the handshake's time, leaving the rest
	// for the answer: a client whose old handler will not end (stuck in
	// I/O) is then accepted unfenced rather than not at all.
	ok.Fenced = c.fence(auth.Supersedes, start.Add(s.cfg.HandshakeTimeout/2))
	out := wire.Frame{Flags: wire.FlagResponse, Method: wire.MethodAuth, ID: f.ID}
	return c.w.write(c.ctx, out, ok.Marshal(nil), nil)
}

// maxAuthHeader bounds the auth frame a client sends before it has proven
// anything.
const maxAuthHeader = 4 << 10

// handshake reads the server's hello, proves the cluster secret if the
// server asks for it, and checks the server's own proof, all within the
// handshake timeout or ctx, whichever ends first.
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
	h := clientHandshake{c: c, ctx: ctx, secret: opts.Secret, timeout: opts.HandshakeTimeout, r: &frameReader{br: c.br, limits: c.lim}}
	if err := h.readHello(); err != nil {
		return err
	}
	auth := wire.Auth{Nonce: newNonce(), Client: opts.ClientName}
	if len(opts.Secret) > 0 {
		auth.MAC = clientProof(opts.Secret, c.hello.Nonce, auth.Nonce)
	}
	for _, o := range opts.supersede {
		// Only the same server process knows them: a restarted one has
		// dropped whatever the old connections carried.
		if o.id != 0 && o.hello.Instance == c.hello.Instance && len(auth.Supersedes) < maxSupersede {
			auth.Supersedes = append(auth.Supersedes, o.id)
		}
	}
	if err := c.w.write(ctx, wire.Frame{Method: wire.MethodAuth}, auth.Marshal(nil), nil); err != nil {
		return h.fail("send auth", err)
	}
	ok, err := h.readAuthReply(auth.Nonce)
	if err != nil {
		return err
	}
	c.id = ok.Conn
	if ok.Fenced {
		c.fenced = auth.Supersedes
	}
	return nil
}

// maxSupersede bounds the connections one handshake fences: a pool holds
// a few.
const maxSupersede = 64

// clientHandshake is a Conn's side of the handshake in progress.
type clientHandshake struct {
	c       *Conn
	ctx     context.Context
	secret  []byte        // DialOptions.Secret
	timeout time.Duration // DialOptions.HandshakeTimeout
	r       *frameReader
}

// fail says which step of the handshake failed, and maps why to what a
// caller acts on: its own context's end, a server that does not answer
// (pdc.ErrTimeout), one that answers wrongly (kept as is), or one that
// cannot be reached (pdc.ErrUnavailable).
func (h *clientHandshake) fail(what string, err error) error {
	c := h.c
	// ctxErr, not ctx.Err: the socket's deadline, which is ctx's when
	// that comes first, can pass a moment before ctx's timer fires, and
	// the server is then not one that did not answer within the
	// handshake timeout.
	if cerr := ctxErr(h.ctx); cerr != nil {
		return fmt.Errorf("server %s: handshake: %s: %w", c.label, what, cerr)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("server %s: handshake: %s: no answer within %v: %w", c.label, what, h.timeout, pdc.ErrTimeout)
	}
	if errors.Is(err, pdc.ErrProtocol) || errors.Is(err, pdc.ErrTooLarge) || errors.Is(err, pdc.ErrPermission) || errors.Is(err, pdc.ErrVersion) {
		return fmt.Errorf("server %s: handshake: %s: %w", c.label, what, err)
	}
	return fmt.Errorf("server %s: handshake: %s: %w: %w", c.label, what, pdc.ErrUnavailable, err)
}

// readHello reads the server's hello into c.hello, or the refusal a
// server over its connection bounds sends in its place.
func (h *clientHandshake) readHello() error {
	c, r := h.c, h.r
	f, err := r.next()
	if err != nil {
		return h.fail("read hello", err)
	}
	if f.Method == wire.MethodHello && f.Flags == wire.FlagResponse|wire.FlagError && f.PayloadLen == 0 {
		// The server refused the connection (too many open) and says why.
		hdr, err := r.header(f)
		if err != nil {
			return h.fail("read hello", err)
		}
		var eb wire.ErrorBody
		if err := eb.Unmarshal(hdr); err != nil {
			return h.fail("decode refusal", err)
		}
		return &pdc.ServerError{Server: c.label, Method: "connect", Msg: eb.Message, Err: eb.Code.Err()}
	}
	if f.Method != wire.MethodHello || f.Flags != 0 {
		return h.fail("read hello", fmt.Errorf("first frame is %s flags %#x, not hello: %w", f.Method, uint8(f.Flags), pdc.ErrProtocol))
	}
	// Nothing large is allocated for a peer that has not proven itself.
	if f.HeaderLen > maxHelloHeader || f.PayloadLen != 0 {
		return h.fail("read hello", fmt.Errorf("hello of %d+%d bytes; at most %d and no payload: %w", f.HeaderLen, f.PayloadLen, maxHelloHeader, pdc.ErrProtocol))
	}
	hdr, _, err := r.body(f)
	if err != nil {
		return h.fail("read hello", err)
	}
	if err := c.hello.Unmarshal(hdr); err != nil {
		return h.fail("decode hello", err)
	}
	if c.hello.Version < wire.Version {
		return h.fail("hello", fmt.Errorf("server speaks protocol version %d, this client needs %d: %w", c.hello.Version, wire.Version, pdc.ErrVersion))
	}
	return nil
}

// readAuthReply reads the server's answer to our auth frame: a refusal,
// or its acceptance, which proves the server knows the secret when it
// asked for one (a server that did not ask proves nothing).
func (h *clientHandshake) readAuthReply(clientNonce []byte) (wire.AuthOK, error) {
	c, r := h.c, h.r
	f, err := r.next()
	if err != nil {
		return wire.AuthOK{}, h.fail("read auth reply", err)
	}
	hdr, _, err := r.body(f)
	if err != nil {
		return wire.AuthOK{}, h.fail("read auth reply", err)
	}
	if f.Flags&wire.FlagError != 0 {
		var eb wire.ErrorBody
		if err := eb.Unmarshal(hdr); err != nil {
			return wire.AuthOK{}, h.fail("decode auth reply", err)
		}
		msg := eb.Message
		if eb.Code == wire.CodePermission && len(h.secret) == 0 {
			// Sent without a proof so that the server logs the refusal.
			msg += " (this client has none: give it the cluster's secret file, or the cluster's PDC_TMPDIR)"
		}
		return wire.AuthOK{}, &pdc.ServerError{Server: c.label, Method: "auth", Msg: msg, Err: eb.Code.Err()}
	}
	var ok wire.AuthOK
	if err := ok.Unmarshal(hdr); err != nil {
		return wire.AuthOK{}, h.fail("decode auth reply", err)
	}
	if c.hello.AuthRequired && !hmac.Equal(ok.MAC, serverProof(h.secret, c.hello.Nonce, clientNonce)) {
		return wire.AuthOK{}, h.fail("auth", fmt.Errorf("server did not prove it knows the cluster secret: %w", pdc.ErrPermission))
	}
	return ok, nil
}

// maxHelloHeader bounds the hello a server sends before it has proven
// anything.
const maxHelloHeader = 64 << 10
