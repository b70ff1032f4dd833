package bed

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy for faults a link cannot make: it forwards every
// connection made to it to one target, delaying each chunk of bytes by a
// latency plus a random jitter, and can reset every connection it
// carries at once. Its methods may be called concurrently.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	delay  time.Duration
	jitter time.Duration
	pairs  map[*pair]struct{}
	closed bool

	wg sync.WaitGroup
}

// NewProxy listens on listen ("host:port"; port 0 picks one; the bed's
// Host address to be reachable from every node) and forwards what
// connects there to target.
func NewProxy(listen, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("bed: proxy: %w", err)
	}
	p := &Proxy{ln: ln, target: target, pairs: map[*pair]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk forwarded from now on, both ways, by
// delay plus a uniformly random part of jitter; bytes keep their order.
func (p *Proxy) SetLatency(delay, jitter time.Duration) {
	p.mu.Lock()
	p.delay, p.jitter = delay, jitter
	p.mu.Unlock()
}

func (p *Proxy) latency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.delay
	if p.jitter > 0 {
		d += rand.N(p.jitter)
	}
	return d
}

// Reset cuts every connection the proxy carries now with a TCP reset on
// both sides. New connections are accepted as before.
func (p *Proxy) Reset() {
	p.mu.Lock()
	pairs := make([]*pair, 0, len(p.pairs))
	for pr := range p.pairs {
		pairs = append(pairs, pr)
	}
	p.mu.Unlock()
	for _, pr := range pairs {
		pr.abort()
	}
}

// Close stops accepting, resets every connection and waits for the
// proxy's goroutines. It may be called more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	first := !p.closed
	p.closed = true
	p.mu.Unlock()
	var err error
	if first {
		err = p.ln.Close()
	}
	p.Reset()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(c.(*net.TCPConn))
	}
}

// pair is one proxied connection: the client's and the one to the target.
type pair struct {
	a, b    *net.TCPConn
	done    chan struct{}
	once    sync.Once
	pending sync.WaitGroup
}

// abort ends the pair at once with resets on both sides.
func (pr *pair) abort() {
	pr.once.Do(func() {
		close(pr.done)
		for _, c := range []*net.TCPConn{pr.a, pr.b} {
			if c != nil {
				_ = c.SetLinger(0)
				_ = c.Close()
			}
		}
	})
}

func (p *Proxy) serve(a *net.TCPConn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", p.target)
	if err != nil {
		_ = a.SetLinger(0)
		_ = a.Close()
		return
	}
	pr := &pair{a: a, b: c.(*net.TCPConn), done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pr.abort()
		return
	}
	p.pairs[pr] = struct{}{}
	p.mu.Unlock()
	pr.pending.Add(2)
	go p.pump(pr, pr.a, pr.b)
	go p.pump(pr, pr.b, pr.a)
	pr.pending.Wait()
	// Both ways ended cleanly (or one was aborted): close what is left.
	pr.once.Do(func() {
		close(pr.done)
		_ = pr.a.Close()
		_ = pr.b.Close()
	})
	p.mu.Lock()
	delete(p.pairs, pr)
	p.mu.Unlock()
}

type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst, each chunk after its latency; src's EOF is
// passed on as a half close of dst.
func (p *Proxy) pump(pr *pair, src, dst *net.TCPConn) {
	defer pr.pending.Done()
	ch := make(chan chunk, 64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the reader, owned by this pump
		defer wg.Done()
		defer close(ch)
		var last time.Time
		for {
			buf := make([]byte, 64<<10)
			n, err := src.Read(buf)
			if n > 0 {
				due := time.Now().Add(p.latency())
				if due.Before(last) {
					due = last
				}
				last = due
				select {
				case ch <- chunk{buf[:n], due}:
				case <-pr.done:
					return
				}
			}
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				pr.abort()
				return
			}
		}
	}()
	defer wg.Wait()
	t := time.NewTimer(0)
	defer t.Stop()
	for c := range ch {
		if wait := time.Until(c.due); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-pr.done:
				return
			}
		}
		if _, err := dst.Write(c.b); err != nil {
			pr.abort()
			return
		}
	}
	select {
	case <-pr.done:
	default:
		_ = dst.CloseWrite()
	}
}
