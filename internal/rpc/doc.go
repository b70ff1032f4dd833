// Package rpc is pdc's request/response transport over TCP and Unix sockets:
// framed (package wire), multiplexed (many requests in flight on one
// connection, answered in any order), with deadlines and cancellation that
// cross the wire, a challenge-response handshake against a cluster secret,
// and error codes that come back as pdc's sentinel errors.
//
// A Server dispatches each request to the Handler registered for its method
// (Server.Handle), on its own goroutine unless the registration's options say
// otherwise (Inline, InlineUpTo, TryHere: see docs/design/0023), under a
// context that carries the client's deadline and is canceled when the client
// cancels or the connection drops. A Conn is one client connection; a Pool
// keeps a few per server and dials lazily. NewConn makes a Conn over a
// connection opened by other means, such as package memnet's in-memory
// listener in tests.
//
// Writes are combined: a goroutine that has a small frame to send appends it
// to the connection's pending buffer and, if no other goroutine is writing,
// writes everything pending in one system call. Large payloads are written
// straight from the caller's buffers with writev. Under load this batches
// many frames per system call; alone, a request costs one write.
package rpc
