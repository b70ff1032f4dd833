package memnet

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// DefaultBuffer is how many bytes a connection holds in each direction
// before a writer waits for its reader: about what a local socket holds.
const DefaultBuffer = 256 << 10

// Listener is a net.Listener whose connections are in-memory pipes,
// made by its Dial.
type Listener struct {
	addr   Addr
	buffer int
	conns  chan net.Conn // to Accept, from Dial
	once   sync.Once
	closed chan struct{}
}

// Listen returns a listener named name (its address is "mem:"+name)
// whose connections hold DefaultBuffer bytes each way.
func Listen(name string) *Listener { return ListenBuffer(name, DefaultBuffer) }

// ListenBuffer is Listen with connections that hold buffer bytes each
// way (at least 1).
func ListenBuffer(name string, buffer int) *Listener {
	return &Listener{addr: Addr(name), buffer: max(buffer, 1), conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept waits for a connection from Dial. Once the listener is closed it
// returns net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "accept", Net: network, Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close stops Accept and Dial. Connections already made stay open. It is
// idempotent.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.addr }

// Dial connects to the listener: it returns the client's end of a new
// connection once Accept has taken the server's. A closed listener
// refuses (syscall.ECONNREFUSED, as a socket with nobody listening does).
func (l *Listener) Dial(ctx context.Context) (net.Conn, error) {
	a2b, b2a := newPipe(l.buffer), newPipe(l.buffer)
	client := &Conn{in: b2a, out: a2b, local: Addr("client"), remote: l.addr}
	server := &Conn{in: a2b, out: b2a, local: l.addr, remote: Addr("client")}
	client.init()
	server.init()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "dial", Net: network, Addr: l.addr, Err: syscall.ECONNREFUSED}
	case <-ctx.Done():
		return nil, &net.OpError{Op: "dial", Net: network, Addr: l.addr, Err: ctx.Err()}
	}
}

const network = "mem"

// Addr is the address of a listener, or "client" for a dialing end.
type Addr string

// Network returns "mem".
func (Addr) Network() string { return network }

// String returns "mem:" and the name.
func (a Addr) String() string { return network + ":" + string(a) }

// pipe carries bytes one way, holding at most max of them.
type pipe struct {
	mu      sync.Mutex
	buf     []byte // written, not yet read
	max     int
	rclosed bool          // the reading end is closed: writes fail
	wclosed bool          // the writing end is closed: reads end at EOF
	changed chan struct{} // closed, and replaced, when any of the above changes
}

func newPipe(max int) *pipe { return &pipe{max: max, changed: make(chan struct{})} }

// signalLocked wakes everyone waiting on p. p.mu is held.
func (p *pipe) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Conn is one end of an in-memory connection. Like a socket's, its
// deadlines make a blocked Read or Write return os.ErrDeadlineExceeded,
// a deadline already past fails the next one at once, and Close makes
// the peer's reads end at io.EOF (once they have read what was sent) and
// its writes fail with syscall.EPIPE.
type Conn struct {
	in, out       *pipe
	local, remote Addr
	rd, wd        deadline
	once          sync.Once
}

func (c *Conn) init() {
	c.rd.init()
	c.wd.init()
}

// Read reads what has arrived, waiting for something to if nothing has.
func (c *Conn) Read(b []byte) (int, error) {
	p := c.in
	for {
		if c.rd.passed() {
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		p.mu.Lock()
		switch {
		case p.rclosed:
			p.mu.Unlock()
			return 0, c.opErr("read", net.ErrClosed)
		case len(p.buf) > 0:
			n := copy(b, p.buf)
			p.buf = p.buf[n:]
			if len(p.buf) == 0 {
				p.buf = p.buf[:0:0] // let a large buffer go
			}
			p.signalLocked()
			p.mu.Unlock()
			return n, nil
		case len(b) == 0:
			p.mu.Unlock()
			return 0, nil
		case p.wclosed:
			p.mu.Unlock()
			return 0, io.EOF
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-c.rd.expired():
		}
	}
}

// Write writes all of b, waiting for the peer to read when the
// connection holds as much as it may.
func (c *Conn) Write(b []byte) (int, error) {
	p := c.out
	written := 0
	for {
		if c.wd.passed() {
			return written, c.opErr("write", os.ErrDeadlineExceeded)
		}
		p.mu.Lock()
		switch {
		case p.wclosed:
			p.mu.Unlock()
			return written, c.opErr("write", net.ErrClosed)
		case p.rclosed:
			p.mu.Unlock()
			return written, c.opErr("write", syscall.EPIPE)
		case len(b) == 0:
			p.mu.Unlock()
			return written, nil
		case len(p.buf) < p.max:
			n := min(p.max-len(p.buf), len(b))
			p.buf = append(p.buf, b[:n]...)
			b, written = b[n:], written+n
			p.signalLocked()
			p.mu.Unlock()
			continue
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-c.wd.expired():
		}
	}
}

// Close closes both directions of this end. It is idempotent.
func (c *Conn) Close() error {
	c.once.Do(func() {
		for _, p := range []*pipe{c.in, c.out} {
			p.mu.Lock()
			if p == c.in {
				p.rclosed = true
				p.buf = nil
			} else {
				p.wclosed = true
			}
			p.signalLocked()
			p.mu.Unlock()
		}
		c.rd.stop()
		c.wd.stop()
	})
	return nil
}

// LocalAddr returns this end's address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the other end's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

// SetReadDeadline sets the deadline of reads; zero: none.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.rd.set(t)
	return nil
}

// SetWriteDeadline sets the deadline of writes; zero: none.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wd.set(t)
	return nil
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: network, Source: c.local, Addr: c.remote, Err: err}
}

// deadline is a settable point in time whose channel is closed once it
// has passed, waking whoever waits on it.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	gen    uint64        // which set the timer belongs to
	closed chan struct{} // closed once the deadline has passed
	done   bool          // closed has been closed
}

func (d *deadline) init() { d.closed = make(chan struct{}) }

// set moves the deadline to t (zero: none). A waiter on the old channel
// keeps waiting, now for t.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.done {
		d.closed, d.done = make(chan struct{}), false
	}
	if t.IsZero() {
		return
	}
	wait := time.Until(t)
	if wait <= 0 {
		close(d.closed)
		d.done = true
		return
	}
	gen := d.gen
	d.timer = time.AfterFunc(wait, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gen == gen && !d.done { // not moved since
			close(d.closed)
			d.done = true
		}
	})
}

// expired returns a channel closed once the deadline has passed.
func (d *deadline) expired() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// passed reports whether the deadline has passed.
func (d *deadline) passed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.done
}

// stop stops the deadline's timer, so that a closed connection leaves
// nothing behind.
func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}

var _ net.Conn = (*Conn)(nil)
