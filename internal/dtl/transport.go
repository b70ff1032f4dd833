package dtl

import (
	"context"
	"net"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// SendTransport is one backend's sending half (DYAD's dtl handle made with
// DYAD_COMM_SEND); a Sender holds one per mode. The fetch's request and
// answer are packed and unpacked by the Sender around it (rpc_pack,
// rpc_unpack); Send does the rest: respond, establish the connection and
// send: deliver src to the receiver, or expose it for the receiver to
// take, and fill in the answer. Send owns src and releases it.
//
// The halves are separate types, so asking a sending half to receive
// (DYAD's DYAD_RC_BAD_COMM_MODE at run time) does not compile.
type SendTransport interface {
	Mode() Mode
	Send(ctx context.Context, call *rpc.Request, req *wire.FetchRequest, src Source, reply *wire.FetchReply) error
}

// RecvTransport is one backend's receiving half (DYAD_COMM_RECV); a
// Receiver holds one per mode.
//
//   - Prepare, before the request goes: get the buffer ready: register
//     the sink where the backend writes into it, and add to the request
//     what the sender needs to reach it.
//   - Receive, once the answer has come: receive into the sink.
type RecvTransport interface {
	Mode() Mode
	Prepare(ctx context.Context, peer Peer, req *wire.FetchRequest, sink Sink) (*Transfer, error)
	Receive(ctx context.Context, t *Transfer, rep *wire.FetchReply) (int64, error)
}

// viewer is the optional capability of a receiving half that can hand a
// payload over to read in place, without a copy (shm maps the sender's
// memory file). The request it answers was sent with Map set.
type viewer interface {
	// canView reports whether payloads from peer can be viewed.
	canView(peer string) bool
	view(ctx context.Context, rep *wire.FetchReply) (*View, error)
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

// sendHalves makes the sending half of every mode.
func sendHalves(s *Sender) map[Mode]SendTransport {
	return map[Mode]SendTransport{ModeStream: &streamSend{s}, ModePull: &pullSend{s}, ModePush: &pushSend{s}, ModeShm: &shmSend{s}}
}

// recvHalves makes the receiving half of every mode.
func recvHalves(r *Receiver) map[Mode]RecvTransport {
	return map[Mode]RecvTransport{ModeStream: &streamRecv{r}, ModePull: &pullRecv{r}, ModePush: &pushRecv{r}, ModeShm: &shmRecv{r}}
}
