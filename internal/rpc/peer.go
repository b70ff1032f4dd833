package rpc

import (
	"fmt"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"golang.org/x/sys/unix"
)

// defaultPeerTimeout is DialOptions.PeerTimeout's default. A live host's
// kernel acknowledges within milliseconds, however loaded its server;
// ten seconds of silence is a host that is down or cut off.
const defaultPeerTimeout = 10 * time.Second

// peerWatch looks, while a caller reads replies (lead), at what the
// kernel knows of the server's host: a partition or a dead host leaves
// the request's bytes unacknowledged, being retransmitted, where TCP
// itself would go on for minutes (or, with nothing unacknowledged, for
// ever) and the caller would see only its own deadline. When the host
// has acknowledged nothing for peerTimeout, the connection fails with
// pdc.ErrUnavailable naming the server: every call on it ends so, within
// its deadline when that is longer, and the pool dials afresh.
//
// It also watches while a caller writes: a write into a full socket
// blocks as long as the host acknowledges nothing, until the stall
// timeout, and a failed connection unblocks it.
//
// One per connection, its timer made once, and armed lazily: a lead or a
// write arms it only if it is not armed already, and nothing stops it
// when the last user leaves; a check that finds no user does not re-arm
// it. Resetting and stopping a runtime timer on every call cost four
// timer-heap operations per round trip, and a reset into an empty heap
// wakes another thread to poll (runtime.wakeNetPoller): on a small
// machine, a context switch per call.
type peerWatch struct {
	c     *Conn
	every time.Duration

	mu     sync.Mutex
	t      *time.Timer
	users  int       // callers reading or writing; the timer runs while any do
	armed  bool      // the timer is set (or its check is running)
	closed bool      // the connection has ended: the timer stays stopped
	since  time.Time // when the host was first seen not acknowledging; zero: it acknowledges
}

// newPeerWatch returns c's watch, stopped; nil when c is not watched
// (Unix sockets, PeerTimeout < 0).
func newPeerWatch(c *Conn) *peerWatch {
	if c.peerTimeout <= 0 {
		return nil
	}
	w := &peerWatch{c: c, every: max(c.peerTimeout/4, 10*time.Millisecond)}
	w.mu.Lock()
	w.t = time.AfterFunc(time.Hour, w.check)
	w.t.Stop()
	w.mu.Unlock()
	return w
}

// start watches while the caller reads or writes.
func (w *peerWatch) start() *peerWatch {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	if w.users++; w.users == 1 {
		w.since = time.Time{}
		if !w.armed && !w.closed {
			w.armed = true
			w.t.Reset(w.every)
		}
	}
	w.mu.Unlock()
	return w
}

// stop ends the caller's watch. The timer is left to fire: a check that
// finds nobody watching does not look, nor re-arm it.
func (w *peerWatch) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.users--
	w.mu.Unlock()
}

// close stops the timer for good: the connection has ended.
func (w *peerWatch) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.closed = true
	w.armed = false
	w.t.Stop()
	w.mu.Unlock()
}

func (w *peerWatch) check() {
	w.mu.Lock()
	if w.users == 0 || w.closed {
		w.armed = false
		w.mu.Unlock()
		return
	}
	silent, ok := w.c.unacknowledged()
	now := time.Now()
	switch {
	case !ok:
		w.since = time.Time{}
	case w.since.IsZero():
		w.since = now
	}
	// Seen silent at checks peerTimeout apart, with no acknowledgement
	// in between: not a lone retransmission after an idle spell.
	if ok && now.Sub(w.since) >= w.c.peerTimeout && silent >= w.c.peerTimeout {
		w.armed = false
		w.mu.Unlock()
		// Unlocked: failing the connection closes the watch.
		w.c.fail(fmt.Errorf("connection to server %s lost: its host has acknowledged nothing sent to it for %v: %w",
			w.c.label, silent.Round(time.Millisecond), pdc.ErrUnavailable))
		return
	}
	w.t.Reset(w.every)
	w.mu.Unlock()
}

// unacknowledged reports whether the connection has bytes or probes out
// that the peer has not acknowledged and the kernel is retransmitting,
// and how long ago the peer last acknowledged anything.
func (c *Conn) unacknowledged() (time.Duration, bool) {
	var info *unix.TCPInfo
	var err error
	if cerr := c.rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil || err != nil {
		return 0, false
	}
	waiting := info.Unacked > 0 && (info.Retransmits > 0 || info.Backoff > 0) || info.Probes > 0
	return time.Duration(info.Last_ack_recv) * time.Millisecond, waiting
}
