package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Request is one call as a handler sees it. Header belongs to the handler.
// Payload does too if the handler owns it (OwnsPayload, until it calls
// Release); otherwise it is the handler's until its answer is written,
// and may be returned in the answer without copying.
type Request struct {
	Method  wire.Method
	Header  []byte
	Payload []byte
	// Body, set instead of Payload for a handler tried on the reading
	// goroutine (TryHere), reads the payload's BodyLen bytes (of
	// which there may be none) from the connection as they arrive. What
	// the handler leaves unread is skipped after it returns.
	Body    io.Reader
	BodyLen int64
	// Client is the name the client gave in its handshake.
	Client string
	// Remote is the client's address.
	Remote string
	// Local is the address the client reached this server at (the
	// listener's own for a Unix socket).
	Local string
	// Trace is the id of the operation the request is part of: the
	// client's (wire.FlagTrace), or one the server made for a client
	// that sends none. The handler's context carries it (TraceOf).
	Trace uint64
	// Release, set for a handler that owns its payload (OwnsPayload,
	// TryHere), gives the payload back: to bufpool, and its share
	// of the server's payload budget. The handler calls it once nothing
	// refers to the payload any more, which may be after it returns.
	// Safe to call from any goroutine, and more than once.
	Release func()

	conn   *serverConn
	id     uint64
	inline bool
	ticket uint64 // its place in the connection's turns; 0: none
}

// Chunk sends one chunk of a streamed answer: a response frame marked
// FlagMore, which the client receives before the final response (the
// handler's return, which ends the stream). Chunks keep their order. Only
// handlers that run on their own goroutine (not Inline) may stream.
func (r *Request) Chunk(ctx context.Context, hdr []byte, payload ...[]byte) error {
	if err := r.canStream(); err != nil {
		return err
	}
	f := wire.Frame{Flags: wire.FlagResponse | wire.FlagMore, Method: r.Method, ID: r.id}
	return r.conn.w.write(ctx, f, hdr, payload)
}

// ChunkFile sends n bytes of file from off as one chunk, from the page
// cache to the socket without passing through user space where the OS
// allows.
func (r *Request) ChunkFile(ctx context.Context, hdr []byte, file *os.File, off, n int64) error {
	if err := r.canStream(); err != nil {
		return err
	}
	f := wire.Frame{Flags: wire.FlagResponse | wire.FlagMore, Method: r.Method, ID: r.id}
	return r.conn.w.writeFile(ctx, f, hdr, file, off, n)
}

func (r *Request) canStream() error {
	if r.conn == nil || r.inline {
		return fmt.Errorf("%s: only a handler on its own goroutine can stream its answer: %w", r.Method, pdc.ErrInternal)
	}
	return nil
}

// Response is a handler's answer. The server owns it once the handler
// returns: the handler must not change the payload buffers afterwards.
type Response struct {
	Header  []byte
	Payload [][]byte
	// Done, if set, is called once the response has been written or
	// queued (its buffers copied), or dropped: the handler's buffers are
	// free again.
	Done func()
}

// Respond returns a response whose header is m.
func Respond(m wire.Message) *Response { return &Response{Header: m.Marshal(nil)} }

// Handler serves one method. It runs on its own goroutine; ctx carries the
// client's deadline and is canceled when the client cancels, the connection
// drops or the server closes. An error is sent to the client as its wire
// code and message.
type Handler func(ctx context.Context, req *Request) (*Response, error)

type handlerEntry struct {
	h         Handler
	here      Handler // tried first on the reading goroutine (TryHere)
	owned     bool    // the handler owns the request's payload (OwnsPayload)
	payload   bool    // requests may carry a payload
	inline    bool
	inlineMax uint32 // run inline when the header is at most this long
	describe  func(hdr []byte) []slog.Attr
	waits     bool
}

// A HandleOption qualifies a registration: where its handler runs and
// what becomes of its requests' payloads.
type HandleOption func(*handlerEntry)

// WithPayload lets the method's requests carry a payload (Request.Payload),
// which is the handler's until its answer has been written (it goes back
// to bufpool then). A request of a method registered without it (or
// OwnsPayload, or TryHere) that carries one is refused with
// pdc.ErrInvalid, its bytes skipped as they arrive and never kept: a
// client cannot make the server hold memory for a method that ignores it.
func WithPayload() HandleOption { return func(e *handlerEntry) { e.payload = true } }

// OwnsPayload is WithPayload handing the request's payload to the
// handler: it comes from bufpool, and the handler gives it back with
// Request.Release once nothing refers to it any more (which may be after
// it returns). For methods that carry bulk data.
func OwnsPayload() HandleOption {
	return func(e *handlerEntry) { e.owned, e.payload = true, true }
}

// ErrElsewhere is returned by a handler tried on the reading goroutine
// (TryHere) that leaves the request to its handler on a goroutine of its
// own.
var ErrElsewhere = errors.New("rpc: run the request on a goroutine of its own")

// TryHere is OwnsPayload with here to try first on the goroutine that
// read the request's header, before the connection reads on. here gets
// the payload as Request.Body, to read as it arrives, and either answers
// the request or returns ErrElsewhere without having read from Body: the
// payload is then read whole and the method's handler gets the request on
// a goroutine of its own. here may do bounded work, such as storing the
// payload as it arrives, but must not wait on other requests: the
// connection reads nothing else, not even its client's cancellations,
// while it runs. A read of Body that waits longer than the stall timeout
// fails, and a failed read ends the connection once here returns. For
// bulk requests: the payload is stored from a buffer that stays in the
// CPU cache, with no hand-off between threads, while the next bytes wait
// in the socket. It overrides Inline and InlineUpTo.
//
// The requests of such a method on one connection take turns in the
// order they arrived (see turns): here can tell with Request.Behind that
// an earlier request it declined has not ended its turn yet, and declines
// this one too if it must not overtake it; the handler waits with
// Request.WaitTurn and lets the later ones go with Request.EndTurn.
func TryHere(here Handler) HandleOption {
	return func(e *handlerEntry) { e.here, e.owned, e.payload = here, true, true }
}

// Inline runs the handler on the goroutine that read the request, before
// the connection reads on. The handler must not block: no I/O, no
// waiting on other requests, no long locks. It saves a hand-off between
// threads per request, which on an idle server doubles a small round
// trip. An inline handler cannot stream its answer.
func Inline() HandleOption { return func(e *handlerEntry) { e.inline = true } }

// InlineUpTo runs the handler inline (see Inline) for requests whose
// header is at most maxHeader bytes and that carry no payload, and on a
// goroutine of its own otherwise: for batch methods whose cost grows with
// the batch.
func InlineUpTo(maxHeader uint32) HandleOption {
	return func(e *handlerEntry) { e.inlineMax = maxHeader }
}

// Handle registers h for m. By default h runs on a goroutine of its own
// and its requests carry no payload; opts say otherwise. It must be
// called before Serve.
func (s *Server) Handle(m wire.Method, h Handler, opts ...HandleOption) {
	e := handlerEntry{h: h}
	for _, o := range opts {
		o(&e)
	}
	if e.here != nil {
		// here already runs on the reading goroutine; h is for the
		// requests it declines, which must not hold that goroutine too.
		e.inline, e.inlineMax = false, 0
	}
	s.handlers[m] = e
}
