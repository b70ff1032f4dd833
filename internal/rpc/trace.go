package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// traceKey is the context key of an operation's trace id.
type traceKey struct{}

// tracer is what a context holds under traceKey: a client's id (traceVal)
// or a server's request context, which answers with the id its request
// came with without boxing it.
type tracer interface{ traceID() uint64 }

type traceVal uint64

func (v traceVal) traceID() uint64 { return uint64(v) }

func (r *reqCtx) traceID() uint64 { return r.trace }

// WithTrace returns ctx carrying trace id id: every request sent under it
// carries the id to servers that read it (docs/design/0031), so that one
// operation that fans out over several servers shows one id in all their
// logs. A handler's context already carries its request's id, and
// requests it sends on carry it too.
func WithTrace(ctx context.Context, id uint64) context.Context {
	return context.WithValue(ctx, traceKey{}, traceVal(id))
}

// TraceOf is the trace id ctx carries; 0 if none.
func TraceOf(ctx context.Context) uint64 {
	if t, ok := ctx.Value(traceKey{}).(tracer); ok {
		return t.traceID()
	}
	return 0
}

// NewTrace returns a new random trace id, never 0.
func NewTrace() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// EnsureTrace returns ctx with a trace id: its own, or a new one.
func EnsureTrace(ctx context.Context) (context.Context, uint64) {
	if id := TraceOf(ctx); id != 0 {
		return ctx, id
	}
	id := NewTrace()
	return WithTrace(ctx, id), id
}

// FormatTrace is how logs write a trace id: 16 hex digits.
func FormatTrace(id uint64) string {
	return fmt.Sprintf("%016x", id)
}

// TraceAttr is the log attribute of a trace id.
func TraceAttr(id uint64) slog.Attr { return slog.String("trace", FormatTrace(id)) }

// Describe has the request log name what a method's request is about
// (its object, region, path), decoded from its header. describe runs only
// when a request is logged (debug level, or slower than
// ServerConfig.SlowRequest), after its handler returned; it must not
// keep hdr.
func Describe(describe func(hdr []byte) []slog.Attr) HandleOption {
	return func(e *handlerEntry) { e.describe = describe }
}

// Waits marks a method whose requests wait by design for as long as it
// takes (a consumer waiting for a file to be produced): they are logged
// at debug level as others are, but never as slow requests, which for
// them would be every one.
func Waits() HandleOption {
	return func(e *handlerEntry) { e.waits = true }
}

// logsRequests reports whether requests are timed for the log.
func (s *Server) logsRequests() bool {
	return s.cfg.SlowRequest > 0 || s.debug
}

// logRequest logs a request that took elapsed: at debug level, or as a
// warning if it took longer than SlowRequest.
func (s *Server) logRequest(in *inbound, err error, elapsed time.Duration) {
	level, msg := slog.LevelDebug, "request"
	if s.cfg.SlowRequest > 0 && elapsed >= s.cfg.SlowRequest && !in.waits {
		level, msg = slog.LevelWarn, "slow request"
	} else if !s.debug {
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs, slog.String("method", in.f.Method.String()), TraceAttr(in.f.Trace),
		slog.Duration("duration", elapsed), slog.String("client", in.c.client))
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	if in.describe != nil {
		attrs = append(attrs, in.describe(in.req.Header)...)
	}
	s.log.LogAttrs(context.Background(), level, msg, attrs...)
}
