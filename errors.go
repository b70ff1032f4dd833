package pdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"
)

// Sentinel errors. Each maps to exactly one wire code (internal/wire) and back,
// so errors.Is holds across processes.
var (
	// ErrNotFound: a container, object, tag, file, method target or server does not exist.
	ErrNotFound = errors.New("pdc: not found")
	// ErrExists: the thing being created already exists.
	ErrExists = errors.New("pdc: already exists")
	// ErrInvalid: an argument is malformed (bad name, bad dims, bad flag value).
	ErrInvalid = errors.New("pdc: invalid argument")
	// ErrOutOfRange: a region, index or size lies outside what is allowed.
	ErrOutOfRange = errors.New("pdc: out of range")
	// ErrUnavailable: a server cannot be reached, died, or is shutting down.
	ErrUnavailable = errors.New("pdc: server unavailable")
	// ErrTimeout: the caller's deadline passed before the work finished.
	// errors.Is(ErrTimeout, context.DeadlineExceeded) holds too.
	ErrTimeout error = &ctxSentinel{"pdc: deadline exceeded", context.DeadlineExceeded}
	// ErrCanceled: the caller canceled the work.
	// errors.Is(ErrCanceled, context.Canceled) holds too.
	ErrCanceled error = &ctxSentinel{"pdc: canceled", context.Canceled}
	// ErrPermission: the peer did not prove it knows the cluster secret.
	ErrPermission = errors.New("pdc: permission denied")
	// ErrUnimplemented: the server does not know the requested method.
	ErrUnimplemented = errors.New("pdc: unknown method")
	// ErrVersion: the peer speaks a protocol or file format version we do not.
	ErrVersion = errors.New("pdc: unsupported version")
	// ErrTooLarge: a length exceeds a configured bound.
	ErrTooLarge = errors.New("pdc: too large")
	// ErrProtocol: the peer sent bytes that do not follow the protocol.
	ErrProtocol = errors.New("pdc: protocol error")
	// ErrClosed: the client, server or connection was closed by its owner.
	ErrClosed = errors.New("pdc: closed")
	// ErrChecksum: stored or transferred bytes do not match their checksum.
	ErrChecksum = errors.New("pdc: checksum mismatch")
	// ErrStale: the caller acted on an old view of an object (its dims
	// changed since it looked); refresh and retry.
	ErrStale = errors.New("pdc: stale object layout")
	// ErrCorrupt: bytes read back from a server's own files fail their
	// checksum or format (a bad disk, a stray write, or a crash between a
	// write and its checksum). ErrChecksum is for bytes in transit and for
	// files a peer hands over.
	ErrCorrupt = errors.New("pdc: stored data is corrupt")
	// ErrInternal: a server failed in a way that is not the caller's fault.
	ErrInternal = errors.New("pdc: internal error")
	// ErrNoSpace: a server's file system (or quota) is full, so a write was
	// not done. What was acknowledged before is kept and still reads; the
	// server takes writes again once space is freed.
	// errors.Is(ErrNoSpace, syscall.ENOSPC) holds too.
	ErrNoSpace error = &errnoSentinel{"pdc: no space left on a server's disk", []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT}}
	// ErrIO: a server's storage failed a read or write (EIO): a failing
	// disk, or a file system that went away. The operation was not done;
	// other files and earlier writes may still be readable.
	// errors.Is(ErrIO, syscall.EIO) holds too.
	ErrIO error = &errnoSentinel{"pdc: I/O error on a server's storage", []syscall.Errno{syscall.EIO}}
)

// errnoSentinel is a sentinel that also matches the system errors it
// stands for, so a caller may test for either, on either side of the wire.
type errnoSentinel struct {
	msg    string
	errnos []syscall.Errno
}

func (e *errnoSentinel) Error() string { return e.msg }

func (e *errnoSentinel) Is(target error) bool {
	n, ok := target.(syscall.Errno)
	return ok && slices.Contains(e.errnos, n)
}

// NoSpaceOrIO returns ErrNoSpace or ErrIO when err is (or wraps) the
// system error one of them stands for, else nil. Servers use it to map a
// failed write to its sentinel once, at the wire.
func NoSpaceOrIO(err error) error {
	for _, s := range []error{ErrNoSpace, ErrIO} {
		for _, n := range s.(*errnoSentinel).errnos {
			if errors.Is(err, n) {
				return s
			}
		}
	}
	return nil
}

// ServerError is an error reported by a server. It keeps the server's own
// message and unwraps to the sentinel that the wire code named, so
// errors.Is(err, ErrNotFound) holds on the client.
type ServerError struct {
	// Server names the server: its rank and address.
	Server string
	// Method is the RPC method that failed.
	Method string
	// Msg is the server's message, which names the object, region or path.
	Msg string
	// Err is the sentinel the wire code maps to.
	Err error
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("server %s: %s: %s", e.Server, e.Method, e.Msg)
}

func (e *ServerError) Unwrap() error { return e.Err }

// ctxSentinel is a sentinel that also matches a context error, so callers
// may test for either whether the deadline passed here or on a server.
type ctxSentinel struct {
	msg string
	ctx error
}

func (e *ctxSentinel) Error() string { return e.msg }

func (e *ctxSentinel) Is(target error) bool { return target == e.ctx }

// CtxErr turns a finished context into ErrTimeout or ErrCanceled (which
// also match the context errors), keeping its cause; nil if ctx is live
// and its deadline, if any, is still ahead.
func CtxErr(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		// The deadline can pass a moment before the context's timer
		// fires: that is a timeout already.
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			return ErrTimeout
		}
		return nil
	}
	sentinel := ErrCanceled
	if errors.Is(err, context.DeadlineExceeded) {
		sentinel = ErrTimeout
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", sentinel, cause)
	}
	return sentinel
}
