package dtl

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

func dialPush(ctx context.Context, addr string, stall time.Duration) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	netio.Tune(nc, stall)
	return nc, nil
}

// readAnswer reads one answer. remote is the peer's error answer (the
// connection stays usable); err means the connection is not.
func readAnswer(ctx context.Context, nc net.Conn, magic string) (a answer, remote, err error) {
	var b [answerSize]byte
	if _, err := netio.ReadFull(ctx, nc, b[:]); err != nil {
		return a, nil, err
	}
	if err := a.decode(b[:], magic); err != nil {
		return a, nil, err
	}
	if a.code == wire.CodeOK {
		return a, nil, nil
	}
	msg := make([]byte, a.msgLen)
	if _, err := netio.ReadFull(ctx, nc, msg); err != nil {
		return a, nil, err
	}
	return a, fmt.Errorf("peer %s: %s: %w", nc.RemoteAddr(), msg, a.code.Err()), nil
}

// push writes src into the receiver's registration: the header and the
// bytes in one go, then the receiver's acknowledgement (or refusal).
func (s *Sender) push(ctx context.Context, fr *wire.FetchRequest, src Source) error {
	if fr.PushAddr == "" || len(fr.Token) != tokenSize {
		return fmt.Errorf("push request without an address or with a %d-byte token: %w", len(fr.Token), ErrBadPack)
	}
	r := request{id: fr.PushID, size: uint64(src.Size())}
	copy(r.token[:], fr.Token)
	hdr := r.put(make([]byte, 0, requestSize), magicPush)
	return s.eps.run(ctx, fr.PushAddr, func(ep *endpoint) (remote, err error) {
		remote, err = pushOn(ctx, ep.nc, hdr, src)
		if err != nil || remote != nil {
			s.eps.put(ep, false)
			return remote, err
		}
		// Sent. The receiver acknowledges once the bytes are in its sink;
		// the connection is reused only after that, so that a later push
		// never queues behind one that may still fail. The ack is awaited
		// off the answer's path.
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			s.eps.put(ep, false)
			return nil, nil
		}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.awaitAck(ep)
		return nil, nil
	})
}

// awaitAck reads a push's acknowledgement and returns the connection to
// the cache if all went well. Close interrupts it.
func (s *Sender) awaitAck(ep *endpoint) {
	defer s.wg.Done()
	_, remote, err := readAnswer(s.ctx, ep.nc, magicPushAck)
	s.eps.put(ep, err == nil && remote == nil)
}

// errNoAnswer marks a push or pull whose connection failed before the
// peer said anything.
var errNoAnswer = errors.New("connection failed before the peer answered")

// pushOn writes one push on nc: its header and payload. A receiver that
// refuses answers at once and closes; one that takes the push acknowledges
// it once the bytes are in its sink (see awaitAck). The fetch's answer tells
// the receiver that everything is sent.
func pushOn(ctx context.Context, nc net.Conn, hdr []byte, src Source) (remote, err error) {
	var werr error
	if src.File == nil {
		_, werr = netio.WriteFull(ctx, nc, hdr, src.Buf)
	} else if _, werr = netio.WriteFull(ctx, nc, hdr); werr == nil {
		_, werr = netio.SendFile(ctx, nc, src.File, src.Off, src.Len)
	}
	if werr == nil || ctx.Err() != nil {
		return nil, werr
	}
	// A receiver that refused answered before closing: report that.
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, remote, err := readAnswer(rctx, nc, magicPushAck); err == nil && remote != nil {
		return remote, nil
	}
	return nil, fmt.Errorf("%w: %w", errNoAnswer, werr)
}

// pushListener is the receiver's end of push: registrations waiting for
// their bytes, and the connections senders push on.
type pushListener struct {
	ln       net.Listener
	addr     string
	log      *slog.Logger
	limit    netio.ConnLimit
	refusals *netio.RateLog // refused peers

	nextID  atomic.Uint64
	wg      sync.WaitGroup
	closing chan struct{} // closed by close

	mu struct {
		sync.Mutex
		regs   map[uint64]*registration
		conns  map[net.Conn]struct{}
		closed bool
	}
}

// registration is a sink waiting for one push.
type registration struct {
	id   uint64
	tok  token
	sink Sink
	// done receives the outcome once the push into sink has ended; after
	// it, nothing touches sink.
	done chan pushResult
	// nc is the connection filling sink, once claimed.
	nc net.Conn
}

type pushResult struct {
	n   int64
	err error
}

func listenPush(addr string, log *slog.Logger) (*pushListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("push listener on %s: %w", addr, err)
	}
	p := &pushListener{ln: ln, addr: ln.Addr().String(), log: log, closing: make(chan struct{}),
		limit:    netio.ConnLimit{Max: defaultMaxConns, PerPeer: defaultMaxConnsPerPeer},
		refusals: netio.NewRateLog(log, logBurst, logInterval)}
	p.mu.regs = map[uint64]*registration{}
	p.mu.conns = map[net.Conn]struct{}{}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *pushListener) register(sink Sink) *registration {
	r := &registration{id: p.nextID.Add(1), sink: sink, done: make(chan pushResult, 1)}
	_, _ = rand.Read(r.tok[:])
	p.mu.Lock()
	p.mu.regs[r.id] = r
	p.mu.Unlock()
	return r
}

// cancel withdraws r. If a push into it is under way, that push is cut off
// and cancel waits until it no longer touches the sink.
func (p *pushListener) cancel(r *registration) {
	p.mu.Lock()
	_, waiting := p.mu.regs[r.id]
	delete(p.mu.regs, r.id)
	nc := r.nc
	p.mu.Unlock()
	if waiting {
		return
	}
	if nc != nil {
		nc.Close()
	}
	<-r.done
}

// claim takes the registration a push names, once, and records the
// connection filling it under the same lock, so that cancel always finds
// one or the other.
func (p *pushListener) claim(req *request, nc net.Conn) *registration {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.mu.regs[req.id]
	if r == nil || subtle.ConstantTimeCompare(r.tok[:], req.token[:]) != 1 {
		return nil
	}
	delete(p.mu.regs, req.id)
	r.nc = nc
	return r
}

// finish records that the push into r is over and reports its outcome.
func (p *pushListener) finish(r *registration, res pushResult) {
	p.mu.Lock()
	r.nc = nil
	p.mu.Unlock()
	r.done <- res
}

func (p *pushListener) close() {
	p.ln.Close()
	p.mu.Lock()
	if !p.mu.closed {
		close(p.closing)
	}
	p.mu.closed = true
	for nc := range p.mu.conns {
		nc.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *pushListener) accept() {
	defer p.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			if acceptAgain(err, p.closing, p.log, p.addr) {
				continue
			}
			return
		}
		release, ok := admit(nc, &p.limit, magicPushAck, p.refusals)
		if !ok {
			continue
		}
		p.mu.Lock()
		if p.mu.closed {
			p.mu.Unlock()
			release()
			nc.Close()
			return
		}
		p.mu.conns[nc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer release()
			p.serve(nc)
			nc.Close()
			p.mu.Lock()
			delete(p.mu.conns, nc)
			p.mu.Unlock()
		}()
	}
}

// serve takes pushes on one connection until it ends.
func (p *pushListener) serve(nc net.Conn) {
	netio.Tune(nc, defaultStall)
	var hb [requestSize]byte
	for {
		if err := readHeader(nc, hb[:], defaultStall, func(b []byte) error {
			_, err := io.ReadFull(nc, b)
			return err
		}); err != nil {
			return
		}
		var req request
		if err := req.decode(hb[:], magicPush); err != nil {
			p.refusals.Warn("dtl: refusing push peer", "remote", nc.RemoteAddr().String(), "err", err)
			_, _ = nc.Write(errAnswer(magicPushAck, err))
			return
		}
		// The payload follows the header at once: a refused push cannot
		// be skipped, so a refusal ends the connection after its answer.
		r := p.claim(&req, nc)
		if r == nil {
			err := fmt.Errorf("push registration %d: none waiting (never made, already filled, withdrawn, or a wrong token): %w", req.id, ErrNotFound)
			_, _ = nc.Write(errAnswer(magicPushAck, err))
			return
		}
		if err := r.sink.fits(req.size); err != nil {
			_, _ = nc.Write(errAnswer(magicPushAck, err))
			p.finish(r, pushResult{err: err})
			return
		}
		w := sinkWriter{s: r.sink}
		pr := newPayloadReader(nc, int64(req.size))
		err := w.readFrom(pr, int64(req.size))
		pr.done()
		if err != nil {
			if !errors.Is(err, ErrBadBuffer) {
				err = fmt.Errorf("push from %s cut off after %d of %d bytes: %w: %w", nc.RemoteAddr(), w.n, req.size, ErrPeerFailed, err)
			}
			_, _ = nc.Write(errAnswer(magicPushAck, err))
			p.finish(r, pushResult{n: w.n, err: err})
			return
		}
		p.finish(r, pushResult{n: w.n})
		ok := (&answer{}).put(make([]byte, 0, answerSize), magicPushAck)
		if _, err := nc.Write(ok); err != nil {
			return
		}
	}
}

// push writes payloads into registrations the receiver made.
type (
	pushSend struct{ s *Sender }
	pushRecv struct{ r *Receiver }
)

func (*pushSend) Mode() Mode { return ModePush }
func (*pushRecv) Mode() Mode { return ModePush }

func (t *pushSend) Send(ctx context.Context, _ *rpc.Request, req *wire.FetchRequest, src Source, _ *wire.FetchReply) error {
	defer src.release()
	n := uint64(src.Size())
	if err := t.s.push(ctx, req, src); err != nil {
		return fmt.Errorf("push to %s: %w", req.PushAddr, err)
	}
	t.s.pushes.Add(1)
	t.s.pushBytes.Add(n)
	return nil
}

type pushState struct {
	pl  *pushListener
	reg *registration
}

func (t *pushRecv) Prepare(ctx context.Context, peer Peer, req *wire.FetchRequest, sink Sink) (*Transfer, error) {
	pl, err := t.r.pushListener(peer.Local)
	if err != nil {
		return nil, err
	}
	reg := pl.register(sink)
	req.PushAddr, req.PushID, req.Token = pl.addr, reg.id, reg.tok[:]
	abort := func() { pl.cancel(reg) }
	return &Transfer{sink: sink, state: &pushState{pl: pl, reg: reg}, abort: abort, eager: func(context.Context) { abort() }}, nil
}

func (t *pushRecv) Receive(ctx context.Context, tr *Transfer, rep *wire.FetchReply) (int64, error) {
	st := tr.state.(*pushState)
	select {
	case res := <-st.reg.done:
		tr.abort = nil
		if res.err == nil && uint64(res.n) != rep.Size {
			res.err = fmt.Errorf("push delivered %d of %d bytes: %w", res.n, rep.Size, ErrBadPack)
		}
		return res.n, res.err
	case <-ctx.Done():
		return 0, ctx.Err() // Abort withdraws the registration
	}
}
