package capi

import (
	"context"
	"sync"
	"time"
)

// callCtx is the context of a libpdc call with a deadline: that of
// context.WithDeadline, except that the timer that closes Done at the
// deadline is made only when something asks for Done. A call whose reply
// comes at once asks for none (the RPC layer's blocking wait arms its
// interrupt only for a late reply, and looks at ctx.Done only when it must
// wait for its turn), and making and stopping a runtime timer per call was
// 3% of a tag put's CPU from Python. Err looks at the clock, so a call
// still sees its deadline pass without the timer.
//
// It implements the context package's afterFuncer, so that
// context.AfterFunc and contexts made from it register with it instead of
// starting a goroutine to wait for Done.
type callCtx struct {
	context.Context // the parent: blockingBackground, which never ends
	deadline        time.Time

	mu    sync.Mutex
	err   error         // context.Canceled or context.DeadlineExceeded once ended
	done  chan struct{} // made by Done
	timer *time.Timer   // made with done, while the context has not ended
	after []*callAfter  // AfterFunc's, not yet run nor stopped
}

type callAfter struct{ f func() }

// withDeadlineLazy is context.WithDeadline(parent, d) as a callCtx. parent
// must never end (its Done is nil).
func withDeadlineLazy(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	c := &callCtx{Context: parent, deadline: d}
	return c, func() { c.end(context.Canceled) }
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.startLocked()
	return c.done
}

// startLocked makes Done's channel and the timer that ends c at its
// deadline (at once if it has passed), if not yet made. c.mu is held.
func (c *callCtx) startLocked() {
	if c.done != nil {
		return
	}
	c.done = make(chan struct{})
	if c.err != nil {
		close(c.done)
		return
	}
	c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
}

// Err is context.Context's; a deadline passed ends c here when no timer
// has yet.
func (c *callCtx) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err == nil && !time.Now().Before(c.deadline) {
		c.end(context.DeadlineExceeded)
		c.mu.Lock()
		err = c.err
		c.mu.Unlock()
	}
	return err
}

// end ends c with err unless it has ended already: Done closes, and the
// AfterFunc's registered run, each in a goroutine of its own as
// context.AfterFunc's do.
func (c *callCtx) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.done != nil {
		close(c.done)
	}
	after := c.after
	c.after = nil
	c.mu.Unlock()
	for _, a := range after {
		go a.f()
	}
}

// AfterFunc is the context package's afterFuncer: f runs once c ends,
// unless stop is called first, which reports whether it stopped f.
func (c *callCtx) AfterFunc(f func()) (stop func() bool) {
	a := &callAfter{f: f}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.startLocked() // f must run at the deadline, without a look at Err
	c.after = append(c.after, a)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, b := range c.after {
			if b == a {
				c.after = append(c.after[:i], c.after[i+1:]...)
				return true
			}
		}
		return false
	}
}

func (c *callCtx) String() string { return "capi.callCtx(" + c.deadline.String() + ")" }

var _ interface{ AfterFunc(func()) func() bool } = (*callCtx)(nil)
