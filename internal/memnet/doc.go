// Package memnet is an in-memory network for tests: a net.Listener whose
// Dial makes a connection of two in-process pipes, with no port, file or
// system call. It behaves like a local socket where tests look: a bounded
// buffer each way (a writer waits for a slow reader), read and write
// deadlines (one already past fails at once, and moving one wakes a
// blocked call), and a close that the peer reads as io.EOF and writes to
// as syscall.EPIPE. It has no kernel under it, so tests of what only a
// kernel does (resets, keepalives, the send queue seen by the peer
// watch, sendfile) stay on real sockets. grpc's bufconn and tailscale's
// memnet are the models.
package memnet
