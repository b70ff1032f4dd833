package dtl

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Direction is the side of a transfer a transport serves: DYAD's
// DYAD_COMM_SEND (the producer) or DYAD_COMM_RECV (the consumer).
type Direction uint8

const (
	DirSend Direction = iota + 1
	DirRecv
)

func (d Direction) String() string {
	switch d {
	case DirSend:
		return "send"
	case DirRecv:
		return "recv"
	}
	return fmt.Sprintf("direction(%d)", uint8(d))
}

// Transport is one backend in one direction: the Go form of DYAD's dtl
// handle. A Sender holds one per mode in DirSend (dtl_init with
// DYAD_COMM_SEND), a Receiver one per mode in DirRecv. The fetch's request
// and answer are packed and unpacked by the Sender and Receiver around
// them (rpc_pack, rpc_unpack); a transport does the rest:
//
//   - Send (sender): respond, establish the connection and send: deliver
//     src to the receiver or expose it, and fill in the answer.
//   - Prepare (receiver, before the request goes): get the buffer ready:
//     register the sink where the backend writes into it, and add to the
//     request what the sender needs to reach it.
//   - Receive (receiver, once the answer has come): recv into the sink.
//   - Close: close connections and finalize.
//
// Calling a half of the other direction fails with ErrBadMode (DYAD's
// DYAD_RC_BAD_COMM_MODE).
type Transport interface {
	Mode() Mode
	Direction() Direction
	Send(ctx context.Context, call *rpc.Request, req *wire.FetchRequest, src Source, reply *wire.FetchReply) error
	Prepare(ctx context.Context, peer Peer, req *wire.FetchRequest, sink Sink) (*Transfer, error)
	Receive(ctx context.Context, t *Transfer, rep *wire.FetchReply) (int64, error)
	Close() error
}

// Peer is the sender a receive is from.
type Peer struct {
	// Addr is the sender's RPC address.
	Addr string
	// Local is this host's end of the RPC connection to it: where a
	// receiver listens for pushes.
	Local net.Addr
}

// Transfer is one receive in progress, from Prepare to Receive or Abort.
type Transfer struct {
	sink Sink
	// chunk, if set, consumes the answer's streamed chunks (stream mode).
	chunk rpc.ChunkFunc
	// abort releases what Prepare took when the transfer ends without
	// Receive: a registration, a bulk connection.
	abort func()
	// eager settles what Prepare took when the payload came in the answer.
	eager func(ctx context.Context)
	state any
}

// Abort ends a transfer that will not be received. Idempotent.
func (t *Transfer) Abort() {
	if t.abort != nil {
		t.abort()
		t.abort = nil
	}
}

func wrongDirection(m Mode, d Direction, half string) error {
	return fmt.Errorf("%s transport set up to %s cannot %s: %w", m, d, half, ErrBadMode)
}

// base carries what every transport has.
type base struct {
	mode Mode
	dir  Direction
	s    *Sender   // DirSend
	r    *Receiver // DirRecv
}

func (b *base) Mode() Mode           { return b.mode }
func (b *base) Direction() Direction { return b.dir }

func (b *base) checkSend() error {
	if b.dir != DirSend {
		return wrongDirection(b.mode, b.dir, "send")
	}
	return nil
}

func (b *base) checkRecv() error {
	if b.dir != DirRecv {
		return wrongDirection(b.mode, b.dir, "receive")
	}
	return nil
}

// newTransport makes the transport of mode m for a sender or a receiver.
func newTransport(m Mode, s *Sender, r *Receiver) Transport {
	b := base{mode: m, s: s, r: r, dir: DirRecv}
	if s != nil {
		b.dir = DirSend
	}
	switch m {
	case ModeStream:
		return &streamTransport{b}
	case ModePull:
		return &pullTransport{b}
	case ModePush:
		return &pushTransport{b}
	case ModeShm:
		return &shmTransport{b}
	}
	return nil
}

// streamTransport sends chunks on the fetch's RPC connection.
type streamTransport struct{ base }

func (t *streamTransport) Send(ctx context.Context, call *rpc.Request, req *wire.FetchRequest, src Source, _ *wire.FetchReply) error {
	if err := t.checkSend(); err != nil {
		return err
	}
	defer src.release()
	size := src.Size()
	chunk := int64(t.s.cfg.ChunkSize)
	for off := int64(0); off < size; off += chunk {
		n := min(chunk, size-off)
		var err error
		if src.File != nil {
			err = call.ChunkFile(ctx, nil, src.File, src.Off+off, n)
		} else {
			err = call.Chunk(ctx, nil, src.Buf[off:off+n])
		}
		if err != nil {
			return fmt.Errorf("stream: %w", err)
		}
	}
	return nil
}

func (t *streamTransport) Prepare(_ context.Context, _ Peer, _ *wire.FetchRequest, sink Sink) (*Transfer, error) {
	if err := t.checkRecv(); err != nil {
		return nil, err
	}
	w := &sinkWriter{s: sink}
	return &Transfer{sink: sink, state: w, chunk: func(_ []byte, rd io.Reader, n uint64) error {
		return w.readFrom(rd, int64(n))
	}}, nil
}

func (t *streamTransport) Receive(_ context.Context, tr *Transfer, rep *wire.FetchReply) (int64, error) {
	if err := t.checkRecv(); err != nil {
		return 0, err
	}
	w := tr.state.(*sinkWriter)
	if uint64(w.n) != rep.Size {
		return w.n, fmt.Errorf("stream ended after %d of %d bytes: %w", w.n, rep.Size, ErrBadPack)
	}
	return w.n, nil
}

func (t *streamTransport) Close() error { return nil }

// pullTransport exposes payloads under handles for the receiver to pull
// over bulk connections.
type pullTransport struct{ base }

func (t *pullTransport) Send(_ context.Context, rreq *rpc.Request, req *wire.FetchRequest, src Source, reply *wire.FetchReply) error {
	if err := t.checkSend(); err != nil {
		return err
	}
	var tok *token
	if len(req.PullToken) == tokenSize {
		tok = new(token)
		copy(tok[:], req.PullToken)
	}
	e, err := t.s.expose(src, nil, tok)
	if err != nil {
		src.release()
		return err
	}
	reply.Addr, reply.Handle, reply.Token, reply.TTL = t.s.bulkAddrFor(rreq), e.id, e.tok[:], uint64(t.s.cfg.HandleTTL)
	return nil
}

// pullState is a receive's pipelined pull, if any.
type pullState struct {
	peer string
	pipe *endpoint
}

func (t *pullTransport) Prepare(ctx context.Context, peer Peer, req *wire.FetchRequest, sink Sink) (*Transfer, error) {
	if err := t.checkRecv(); err != nil {
		return nil, err
	}
	st := &pullState{peer: peer.Addr}
	tr := &Transfer{sink: sink, state: st}
	// A pull from a sender whose bulk address we know goes out with the
	// request, under a token we choose: the payload comes one round trip
	// sooner.
	if !sink.small() {
		var tok token
		if st.pipe, tok = t.r.startPull(ctx, peer.Addr); st.pipe != nil {
			req.PullToken = tok[:]
			tr.abort = func() {
				if st.pipe != nil {
					t.r.bulkConns.put(st.pipe, false) // not read to its end
					st.pipe = nil
				}
			}
			tr.eager = func(ctx context.Context) {
				// The sender says on the bulk connection too that the
				// payload came in the answer: read that to keep it in step.
				a, remote, err := readAnswer(ctx, st.pipe.nc, magicPullAck)
				t.r.bulkConns.put(st.pipe, err == nil && remote == nil && a.off == offInline)
				st.pipe = nil
			}
		}
	}
	return tr, nil
}

func (t *pullTransport) Receive(ctx context.Context, tr *Transfer, rep *wire.FetchReply) (int64, error) {
	if err := t.checkRecv(); err != nil {
		return 0, err
	}
	st := tr.state.(*pullState)
	if rep.Addr != "" {
		t.r.mu.Lock()
		t.r.mu.bulk[st.peer] = rep.Addr
		t.r.mu.Unlock()
	}
	if st.pipe == nil {
		return t.r.pull(ctx, rep, tr.sink)
	}
	pipe := st.pipe
	st.pipe = nil
	n, remote, err := readPulled(ctx, pipe.nc, rep.Size, tr.sink)
	t.r.bulkConns.put(pipe, err == nil)
	if err != nil {
		return n, fmt.Errorf("bulk connection to %s: %w: %w", pipe.addr, ErrPeerFailed, err)
	}
	return n, remote
}

func (t *pullTransport) Close() error { return nil }

// pushTransport writes payloads into registrations the receiver made.
type pushTransport struct{ base }

func (t *pushTransport) Send(ctx context.Context, _ *rpc.Request, req *wire.FetchRequest, src Source, _ *wire.FetchReply) error {
	if err := t.checkSend(); err != nil {
		return err
	}
	defer src.release()
	if err := t.s.push(ctx, req, src); err != nil {
		return fmt.Errorf("push to %s: %w", req.PushAddr, err)
	}
	t.s.pushes.Add(1)
	return nil
}

type pushState struct {
	pl  *pushListener
	reg *registration
}

func (t *pushTransport) Prepare(ctx context.Context, peer Peer, req *wire.FetchRequest, sink Sink) (*Transfer, error) {
	if err := t.checkRecv(); err != nil {
		return nil, err
	}
	pl, err := t.r.pushListener(peer.Local)
	if err != nil {
		return nil, err
	}
	reg := pl.register(sink)
	req.PushAddr, req.PushID, req.Token = pl.addr, reg.id, reg.tok[:]
	abort := func() { pl.cancel(reg) }
	return &Transfer{sink: sink, state: &pushState{pl: pl, reg: reg}, abort: abort, eager: func(context.Context) { abort() }}, nil
}

func (t *pushTransport) Receive(ctx context.Context, tr *Transfer, rep *wire.FetchReply) (int64, error) {
	if err := t.checkRecv(); err != nil {
		return 0, err
	}
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

func (t *pushTransport) Close() error { return nil }

// shmTransport hands over a memory file's descriptor on this host.
type shmTransport struct{ base }

func (t *shmTransport) Send(_ context.Context, _ *rpc.Request, req *wire.FetchRequest, src Source, reply *wire.FetchReply) error {
	if err := t.checkSend(); err != nil {
		return err
	}
	// A buffer goes into a sealed memory file. A file goes as it is (read
	// by the receiver: a file that shrinks meanwhile is a short read, an
	// error), unless the receiver maps it and it is not sealed against
	// shrinking: then a sealed copy goes.
	var memfd *os.File
	var err error
	name := fmt.Sprintf("pdc-dtl-%s", req.Key)
	switch {
	case src.File == nil:
		memfd, err = memfdWith(name, src.Buf)
	case req.Map && !isSealed(src.File):
		memfd, err = memfdCopy(name, src.File, src.Off, src.Len)
	}
	if err != nil {
		src.release()
		return fmt.Errorf("shm: %w", err)
	}
	e, err := t.s.expose(src, memfd, nil)
	if err != nil {
		(&exposed{src: src, memfd: memfd}).release()
		return err
	}
	reply.Addr, reply.Handle, reply.Token, reply.TTL = t.s.shmPath, e.id, e.tok[:], uint64(t.s.cfg.HandleTTL)
	return nil
}

func (t *shmTransport) Prepare(_ context.Context, _ Peer, _ *wire.FetchRequest, sink Sink) (*Transfer, error) {
	if err := t.checkRecv(); err != nil {
		return nil, err
	}
	return &Transfer{sink: sink}, nil
}

func (t *shmTransport) Receive(ctx context.Context, tr *Transfer, rep *wire.FetchReply) (int64, error) {
	if err := t.checkRecv(); err != nil {
		return 0, err
	}
	return readShm(ctx, rep, tr.sink)
}

func (t *shmTransport) Close() error { return nil }
