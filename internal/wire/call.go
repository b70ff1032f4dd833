package wire

import "context"

// Caller makes one call to the server of rank: it sends req (nil: no
// header) and decodes the answer's header into resp (nil: the answer is
// not read). The client, the transfer engine and the servers' peers
// implement it over their connection pools.
type Caller interface {
	Call(ctx context.Context, rank int, m Method, req, resp Message) error
}

// Stub makes the calls of messages.wire over a Caller, each with the
// request and reply types the table names for its method, so callers do
// not pair a method constant with messages by hand (calls_gen.go).
type Stub struct {
	Caller Caller
}
