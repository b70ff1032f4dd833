package rpc

import (
	"context"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// blockingKey is the context key of WithBlockingWait.
type blockingKey struct{}

// WithBlockingWait returns ctx under which a caller that reads its reply
// off the connection itself (Pending.Wait, Call) first waits for the
// socket in poll(2), a system call, instead of parking its goroutine on
// the runtime's network poller.
//
// It is for callers whose goroutine is locked to a thread of C's, as
// every call into libpdc is: parking such a goroutine hands the thread's
// processor to another thread and, when the reply comes, hands it back
// and wakes the C thread, two thread switches per reply that a Go
// program does not pay (docs/design/0027). A thread blocked in a system
// call is woken by the kernel itself. Other callers lose by it: the
// blocked thread is a thread the runtime cannot use meanwhile.
func WithBlockingWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, blockingKey{}, true)
}

// blockingWait reports whether ctx asks for WithBlockingWait.
func blockingWait(ctx context.Context) bool {
	if blockingAlways.Load() {
		return true
	}
	v, _ := ctx.Value(blockingKey{}).(bool)
	return v
}

// blockingAlways makes every wait a blocking one: for tests.
var blockingAlways atomic.Bool

// eventfdFails makes a waker's eventfd(2) fail, as with no descriptors
// left: for tests.
var eventfdFails atomic.Bool

// connReader is what a Conn's buffered reader reads from: the socket,
// after a wait in poll(2) while the reader holding the read token asked
// for one (Conn.pollMode).
type connReader struct{ c *Conn }

func (r connReader) Read(p []byte) (int, error) {
	c := r.c
	if c.pollMode {
		c.pollReadable()
	}
	return c.nc.Read(p)
}

var _ io.Reader = connReader{}

// waker is a Conn's eventfd, which wakes a caller blocked in poll(2) when
// the connection is interrupted (a caller giving up, a deadline) or
// closed. Made on the first blocking wait; closed once the connection has
// ended and no caller polls.
type waker struct {
	mu     sync.Mutex
	fd     int
	has    bool // fd is open
	users  int  // callers polling with it
	closed bool // the connection has ended: no new users
	woken  bool // fd has been written and not read since
}

// acquire returns the eventfd for a poll, making it if need be; false
// when the connection has ended or no eventfd can be made (the caller
// then reads as it would without a blocking wait).
func (w *waker) acquire() (int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, false
	}
	if !w.has {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err == nil && eventfdFails.Load() {
			_ = unix.Close(fd)
			err = unix.EMFILE
		}
		if err != nil {
			return 0, false
		}
		w.fd, w.has = fd, true
	}
	if w.woken {
		// A wake no poll took: an interrupt that came between polls,
		// which the reader has seen by its deadline (or will, as
		// readDeadline says), or with nobody reading. Left there, it
		// would end the next poll for nothing and park the read after
		// it. A wake from now on is this caller's.
		w.take()
	}
	w.users++
	return w.fd, true
}

// take reads the eventfd back to not woken. w.mu is held.
func (w *waker) take() {
	var b [8]byte
	_, _ = unix.Read(w.fd, b[:])
	w.woken = false
}

// taken is a poller's take of the wake that ended its poll.
func (w *waker) taken() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.take()
}

// signal writes the eventfd. w.mu is held and the eventfd open.
func (w *waker) signal() {
	one := [8]byte{1}
	_, _ = unix.Write(w.fd, one[:])
	w.woken = true
}

func (w *waker) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.users--; w.users == 0 && w.closed && w.has {
		_ = unix.Close(w.fd)
		w.has = false
	}
}

// wake makes a poll in progress, or the next one, return.
func (w *waker) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.has {
		w.signal()
	}
}

// close wakes any poller and closes the eventfd once the last one has
// left. It must run before the socket is closed: a close waits for a
// poller holding the socket's descriptor (RawConn.Control) to return.
func (w *waker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if !w.has {
		return
	}
	if w.users > 0 {
		w.signal()
		return
	}
	_ = unix.Close(w.fd)
	w.has = false
}

// lazyInterrupt is how long a reader in poll(2) waits for its reply
// before it arms the interrupt that ends the wait with its context (lead).
// A context that ends sooner is seen when the wait ends, at most this late.
const lazyInterrupt = time.Millisecond

// pollReadable blocks in poll(2) until the socket has bytes to read (as
// many as its low-water mark asks for), the read deadline passes, or the
// waker is woken. The read that follows then returns at once, with data
// or with the deadline's error. The caller holds the read token.
//
// While the reader's interrupt is not armed (lead), the first wait lasts
// at most lazyInterrupt: past it, a context already ended sets the read
// deadline in the past, so that the read returns the deadline's error as
// if interrupted; else the interrupt is armed and the wait goes on.
func (c *Conn) pollReadable() {
	efd, ok := c.wk.acquire()
	if !ok {
		// The read that follows parks on the runtime's poller: only the
		// interrupt ends it with the context.
		if ctx := c.pollCtx; ctx != nil && c.interruptStop == nil && ctx.Done() != nil {
			c.armInterrupt(ctx)
		}
		return
	}
	defer c.wk.release()
	for {
		lazy := c.pollCtx != nil && c.interruptStop == nil
		timedOut := false
		_ = c.rc.Control(func(fd uintptr) {
			fds := [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(efd), Events: unix.POLLIN}}
			for {
				timeout := -1
				if dl := c.readDeadline.Load(); dl != 0 {
					left := time.Until(time.Unix(0, dl))
					if left <= 0 {
						return
					}
					timeout = int(min((left+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
				}
				if lazy && (timeout < 0 || timeout > int(lazyInterrupt/time.Millisecond)) {
					timeout = int(lazyInterrupt / time.Millisecond)
				}
				fds[0].Revents, fds[1].Revents = 0, 0
				n, err := unix.Poll(fds[:], timeout)
				if err == unix.EINTR {
					continue
				}
				if fds[1].Revents != 0 {
					c.wk.taken()
				}
				timedOut = lazy && err == nil && n == 0
				return
			}
		})
		if !timedOut {
			return
		}
		ctx := c.pollCtx
		if ctx.Err() != nil {
			c.dlMu.Lock()
			c.setReadDeadlineLocked(time.Unix(1, 0))
			c.dlMu.Unlock()
			return
		}
		if ctx.Done() == nil {
			c.pollCtx = nil // it cannot end: nothing to arm
			continue
		}
		c.armInterrupt(ctx)
	}
}
