package client

import (
	"context"

	"github.com/pdcgo/pdc/internal/rpc"
)

// WithTrace returns ctx carrying trace id id: every request made under it,
// on every server it reaches, carries the id, and the servers' logs name
// it (debug level, or a request slower than their --slow). A region
// transfer takes the id of the context it is described under
// (NewTransfer, Write, Read); without one, it makes its own.
func WithTrace(ctx context.Context, id uint64) context.Context { return rpc.WithTrace(ctx, id) }

// NewTrace returns a new random trace id.
func NewTrace() uint64 { return rpc.NewTrace() }

// TraceOf is the trace id ctx carries, 0 if none.
func TraceOf(ctx context.Context) uint64 { return rpc.TraceOf(ctx) }

// FormatTrace writes a trace id as the servers' logs do: 16 hex digits.
func FormatTrace(id uint64) string { return rpc.FormatTrace(id) }

// WithBlockingWait returns ctx under which calls wait for their replies
// in a system call rather than by parking: for callers on threads of C's
// (libpdc), see rpc.WithBlockingWait.
func WithBlockingWait(ctx context.Context) context.Context { return rpc.WithBlockingWait(ctx) }
