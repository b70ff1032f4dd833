package transfer

import (
	"io"
	"net"
	"sync"
	"testing"
)

// testProxy forwards connections to a server, so that a test can fail
// the network between the engine and the server at a chosen moment:
// while gate is write-locked, what the server sends is held back; once
// armed (armCut), the first bytes the server sends next on any
// connection (the answer to a request it has done) are not passed on,
// and both sides of that connection are closed instead; dropAll closes
// every connection.
type testProxy struct {
	ln   net.Listener
	gate sync.RWMutex // held (write-locked) while answers are held back

	mu    sync.Mutex
	conns []net.Conn
	armed bool
	cut   int // answers cut
	wg    sync.WaitGroup
}

func startTestProxy(t *testing.T, target string) *testProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &testProxy{ln: ln}
	p.wg.Go(func() {
		for {
			cn, err := ln.Accept()
			if err != nil {
				return
			}
			sn, err := net.Dial("tcp", target)
			if err != nil {
				cn.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, cn, sn)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(sn, cn); sn.Close() })
			p.wg.Go(func() { p.back(cn, sn) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.dropAll()
		p.wg.Wait()
	})
	return p
}

// back passes on what the server sends, held while the gate is, unless
// an answer is to be cut.
func (p *testProxy) back(cn, sn net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := sn.Read(buf)
		if n > 0 {
			p.mu.Lock()
			cut := p.armed
			if cut {
				p.armed = false
				p.cut++
			}
			p.mu.Unlock()
			if cut {
				cn.Close()
				sn.Close()
				return
			}
			p.gate.RLock()
			_, werr := cn.Write(buf[:n])
			p.gate.RUnlock()
			if werr != nil {
				return
			}
		}
		if err != nil {
			cn.Close()
			return
		}
	}
}

// armCut has the next answer the server sends cut.
func (p *testProxy) armCut() {
	p.mu.Lock()
	p.armed = true
	p.mu.Unlock()
}

// cuts is how many answers were cut.
func (p *testProxy) cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// dropAll closes every connection the proxy carries, as a network that
// fails does.
func (p *testProxy) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
