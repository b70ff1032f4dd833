// Package dtl is the data transport layer: it moves a payload from a sender
// (the producer, which holds the bytes) to a receiver (the consumer, which
// asked for them), by one of four backends chosen per receiver or per call.
//
//   - stream: the payload follows the request's answer on an RPC connection
//     as bounded chunks, with an explicit end of stream (Flux's streaming
//     RPC).
//   - pull: the sender exposes the payload under a handle that expires; the
//     receiver pulls it over a bulk connection (Mercury/Margo bulk pull).
//   - push: the receiver registers its buffer or file and sends where it
//     listens and a capability for the registration; the sender connects
//     through an endpoint cache and writes into it (UCX RDMA put). The
//     receiver learns of completion by a signal, never by polling.
//   - shm: on one host the payload lives in a memory file whose descriptor
//     crosses a Unix socket (SCM_RIGHTS) and is mapped by the receiver.
//
// Each backend has two halves, a SendTransport and a RecvTransport: the Go
// form of DYAD's dtl handle made for one direction. They are separate
// types, so a half cannot be asked to do the other direction's work.
// DYAD's life cycle maps onto them as follows.
//
//   - init with a mode and a direction: NewSender (DYAD_COMM_SEND) makes
//     every mode's sending half and NewReceiver (DYAD_COMM_RECV) every
//     receiving half; a fetch's mode comes from PDC_DTL, the receiver's
//     config or a per-call option (WithMode);
//   - rpc pack and unpack: wire.FetchRequest, built by the receiver
//     (RecvTransport.Prepare adds what its backend needs, such as the push
//     address) and decoded by the sender's fetch handler;
//   - respond, establish the connection, send: SendTransport.Send;
//   - get a buffer, receive: RecvTransport.Prepare and Receive, under
//     Receiver.Fetch into a Sink (a caller's buffer, a file or an
//     io.Writer), or Receiver.FetchView for a read-only view: a receiving
//     half that can hand a payload over in place (shm maps the sender's
//     memory file) does so, the others copy into a buffer;
//   - close and finalize: Close on either side.
//
// Errors are values matching DYAD's codes (ErrBadMode, ErrBadBuffer,
// ErrBadPack, ErrNotFound, ErrPeerFailed, ErrTimeout) and the pdc
// sentinels they wrap.
//
// Small payloads (up to EagerLimit) travel in the answer itself whatever
// the mode, as Mercury and UCX do with their eager protocols: one round
// trip instead of two.
package dtl
