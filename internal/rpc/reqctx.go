package rpc

import (
	"context"
	"sync"
	"time"
)

// reqCtx is a request's context: the connection's context plus the client's
// deadline and cancellation. Its timer and channel are made only when a
// handler first asks for Done. Most handlers finish without waiting on
// anything, and arming a runtime timer per request wakes the thread parked
// in the network poller, which costs more than a small request itself.
type reqCtx struct {
	parent      context.Context
	deadline    time.Time
	hasDeadline bool
	trace       uint64 // the request's trace id (TraceOf)

	mu       sync.Mutex
	ctx      context.Context // made by Done; guarded by mu
	cancel   context.CancelFunc
	canceled bool // the client canceled, or the request ended (release)
}

// init makes r a new request's context; r is not in use yet.
func (r *reqCtx) init(parent context.Context, timeout time.Duration, trace uint64) {
	r.parent, r.trace = parent, trace
	if timeout > 0 {
		r.deadline, r.hasDeadline = time.Now().Add(timeout), true
	}
}

func (r *reqCtx) Deadline() (time.Time, bool) { return r.deadline, r.hasDeadline }

func (r *reqCtx) Value(key any) any {
	if _, ok := key.(traceKey); ok && r.trace != 0 {
		return r // a tracer: the id is not boxed per request
	}
	return r.parent.Value(key)
}

func (r *reqCtx) Done() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		if r.hasDeadline {
			r.ctx, r.cancel = context.WithDeadline(r.parent, r.deadline)
		} else {
			r.ctx, r.cancel = context.WithCancel(r.parent)
		}
		if r.canceled {
			r.cancel()
		}
	}
	return r.ctx.Done()
}

func (r *reqCtx) Err() error {
	r.mu.Lock()
	ctx, canceled := r.ctx, r.canceled
	r.mu.Unlock()
	if ctx != nil {
		return ctx.Err()
	}
	if err := r.parent.Err(); err != nil {
		return err
	}
	if canceled {
		return context.Canceled
	}
	if r.hasDeadline && !time.Now().Before(r.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (r *reqCtx) String() string { return "rpc request context" }

// cancelRequest cancels the request (the client asked to).
func (r *reqCtx) cancelRequest() {
	r.mu.Lock()
	r.canceled = true
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
}

// release ends the request: its timer, if one was made, is freed, and a
// goroutine the handler left behind sees the context done.
func (r *reqCtx) release() {
	r.mu.Lock()
	r.canceled = true
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
}
