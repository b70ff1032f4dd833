package dtl

import (
	"context"
	"fmt"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// pull exposes payloads under handles for the receiver to pull
// over bulk connections.
type (
	pullSend struct{ s *Sender }
	pullRecv struct{ r *Receiver }
)

func (*pullSend) Mode() Mode { return ModePull }
func (*pullRecv) Mode() Mode { return ModePull }

func (t *pullSend) Send(_ context.Context, rreq *rpc.Request, req *wire.FetchRequest, src Source, reply *wire.FetchReply) error {
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

func (t *pullRecv) Prepare(ctx context.Context, peer Peer, req *wire.FetchRequest, sink Sink) (*Transfer, error) {
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

func (t *pullRecv) Receive(ctx context.Context, tr *Transfer, rep *wire.FetchReply) (int64, error) {
	st := tr.state.(*pullState)
	if rep.Addr != "" {
		t.r.mu.Lock()
		t.r.mu.bulk[st.peer] = rep.Addr
		t.r.mu.Unlock()
	}
	if st.pipe != nil && rep.Addr != "" && rep.Addr != st.pipe.addr {
		// The pull went ahead to the bulk address learned before: the
		// sender has since moved (restarted at the same RPC address), and
		// whatever listens there now never exposes this payload. Pull it
		// where the answer says.
		t.r.bulkConns.put(st.pipe, false)
		st.pipe = nil
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
