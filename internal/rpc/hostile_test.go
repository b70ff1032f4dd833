package rpc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// closedWithin reads from nc until the server closes it, failing the test
// if that takes longer than d.
func closedWithin(t *testing.T, nc net.Conn, d time.Duration) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v", d)
	}
}

// logged waits (bounded) for the server's log to contain want.
func logged(t *testing.T, ts *testServer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(ts.logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("log does not say %q:\n%s", want, ts.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStalledPayloadClosesConnection(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{StallTimeout: 300 * time.Millisecond})
	nc, _ := rawConn(t, ts.addr)
	f := wire.Frame{Method: methodEcho, ID: 1, PayloadLen: 1 << 20}
	if _, err := nc.Write(append(f.Append(nil), make([]byte, 100<<10)...)); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, nc, 10*time.Second)
	logged(t, ts, "sent nothing for 300ms in the middle of a frame")
	if st := ts.Stats(); st.Slow != 1 || st.PayloadHeld != 0 {
		t.Fatalf("stats %+v, want one slow connection and no payload held", st)
	}
	// The server serves on.
	c := dial(t, ts.addr, DialOptions{})
	if _, err := c.Call(ctx10(t), methodEcho, nil, [][]byte{[]byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestTrickledPayloadBelowTheFloorClosesConnection(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{StallTimeout: 300 * time.Millisecond, MinRecvRate: 1 << 20})
	nc, _ := rawConn(t, ts.addr)
	f := wire.Frame{Method: methodEcho, ID: 1, PayloadLen: 1 << 20}
	if _, err := nc.Write(f.Append(nil)); err != nil {
		t.Fatal(err)
	}
	// A byte every 50ms never stalls, and is far below the floor.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := nc.Write([]byte{1}); err != nil {
					return
				}
			}
		}
	})
	defer wg.Wait()
	defer close(stop)
	closedWithin(t, nc, 10*time.Second)
	logged(t, ts, "below the floor of 1048576 bytes/s")
}

func TestTrickledPrefixClosesConnection(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{StallTimeout: 300 * time.Millisecond})
	nc, _ := rawConn(t, ts.addr)
	f := wire.Frame{Method: methodEcho, ID: 1}
	if _, err := nc.Write(f.Append(nil)[:20]); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, nc, 10*time.Second)
	logged(t, ts, "stall timeout")
}

func TestIdleConnectionIsNotTimedOut(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{StallTimeout: 100 * time.Millisecond})
	c := dial(t, ts.addr, DialOptions{})
	if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	// Between frames a connection may idle as long as it likes (pools
	// keep them), however short the stall timeout.
	time.Sleep(500 * time.Millisecond)
	if _, err := c.Call(ctx10(t), methodEcho, nil, [][]byte{make([]byte, 3<<20)}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestPayloadRefusedForMethodWithout(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	c := dial(t, ts.addr, DialOptions{})
	_, err := c.Call(ctx10(t), methodInline, nil, [][]byte{make([]byte, 1<<20)}, nil)
	if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "takes no payload") {
		t.Fatalf("payload to a method without one: %v, want ErrInvalid saying so", err)
	}
	if ts.Stats().PayloadHeld != 0 {
		t.Fatal("the refused payload holds budget")
	}
	rep, err := c.Call(ctx10(t), methodInline, nil, nil, nil)
	if err != nil || string(rep.Header) != "pong" {
		t.Fatalf("next call: %q, %v", rep.Header, err)
	}
}

// A payload that does not fit in the budget waits for room, and gets it
// once the connection holding it is dropped.
func TestPayloadBudgetWaitsForRoom(t *testing.T) {
	const budget = 1 << 20
	ts := startServer(t, "tcp", ServerConfig{PayloadBudget: budget, StallTimeout: time.Second})
	hog, _ := rawConn(t, ts.addr)
	f := wire.Frame{Method: methodEcho, ID: 1, PayloadLen: budget}
	if _, err := hog.Write(append(f.Append(nil), make([]byte, readBufSize)...)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ts.Stats().PayloadHeld != budget {
		if time.Now().After(deadline) {
			t.Fatalf("the claim holds %d bytes of budget, want all %d", ts.Stats().PayloadHeld, budget)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := dial(t, ts.addr, DialOptions{})
	p := bytes.Repeat([]byte{7}, 100<<10)
	into := make([]byte, len(p))
	if _, err := c.Call(ctx10(t), methodEcho, nil, [][]byte{p}, into); err != nil {
		t.Fatalf("a payload waiting for room: %v, want it served once there is room", err)
	}
	if !bytes.Equal(into, p) {
		t.Fatal("echo differs")
	}
	// The stalled claim's connection is counted as slow after its budget
	// is released, so the call can be answered first.
	closedWithin(t, hog, 10*time.Second)
	deadline = time.Now().Add(10 * time.Second)
	for st := ts.Stats(); st.BudgetWaits != 1 || st.Slow != 1; st = ts.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: want one wait for the budget, ended by dropping the stalled claim", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConnectionsPerPeerBounded(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{MaxConnsPerPeer: 3})
	var open []*Conn
	for range 3 {
		open = append(open, dial(t, ts.addr, DialOptions{}))
	}
	_, err := Dial(ctx10(t), ts.addr, DialOptions{})
	if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "too many connections from 127.0.0.1") {
		t.Fatalf("dial beyond the bound: %v, want ErrUnavailable saying why", err)
	}
	logged(t, ts, "refused connection: too many connections from 127.0.0.1")
	// One closes: there is room again, once the server has seen it go.
	open[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := Dial(ctx10(t), ts.addr, DialOptions{})
		if err == nil {
			c.Close()
			break
		}
		if !errors.Is(err, pdc.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("dial after one closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := open[1].Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestConnectionsInTotalBounded(t *testing.T) {
	ts := startServer(t, "unix", ServerConfig{MaxConns: 2})
	dial(t, ts.addr, DialOptions{})
	dial(t, ts.addr, DialOptions{})
	_, err := Dial(ctx10(t), ts.addr, DialOptions{})
	if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "too many connections: 2 open") {
		t.Fatalf("dial beyond the bound: %v, want ErrUnavailable saying why", err)
	}
}

// Connections that never complete their handshake make room for ones that
// do: the oldest is closed, and a real client gets in.
func TestHandshakesEvictOldest(t *testing.T) {
	const bound, extra = 4, 6
	ts := startServer(t, "tcp", ServerConfig{MaxHandshakes: bound, HandshakeTimeout: time.Hour})
	var silent []net.Conn
	for range bound + extra {
		nc, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		silent = append(silent, nc)
		// Accepted, in order, before the next dial.
		deadline := time.Now().Add(10 * time.Second)
		for ts.acceptedLen()+int(ts.Stats().Evicted) < len(silent) {
			if time.Now().After(deadline) {
				t.Fatal("the server does not take the connection")
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, nc := range silent[:extra] {
		closedWithin(t, nc, 10*time.Second)
	}
	c := dial(t, ts.addr, DialOptions{})
	if _, err := c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if st := ts.Stats(); st.Evicted != extra+1 {
		t.Fatalf("evicted %d, want %d", st.Evicted, extra+1)
	}
}

func TestRefusalsAreLoggedAtABoundedRate(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{MaxConnsPerPeer: 1})
	dial(t, ts.addr, DialOptions{})
	const n = 4 * logBurst
	for range n {
		if _, err := Dial(ctx10(t), ts.addr, DialOptions{}); !errors.Is(err, pdc.ErrUnavailable) {
			t.Fatalf("dial beyond the bound: %v", err)
		}
	}
	if st := ts.Stats(); st.Refused != n {
		t.Fatalf("refused %d, want %d", st.Refused, n)
	}
	if got := strings.Count(ts.logs.String(), "refused connection"); got != logBurst {
		t.Fatalf("%d refusals logged, want %d (the burst):\n%s", got, logBurst, ts.logs.String())
	}
}

// acceptedLen returns how many connections are in their handshake.
func (s *Server) acceptedLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.shaking.Len()
}

// The budget is taken only once a payload's first bytes are here: a frame
// prefix alone holds none of it.
func TestClaimWithoutBytesHoldsNoBudget(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{StallTimeout: time.Hour})
	var conns []net.Conn
	for range 8 {
		nc, _ := rawConn(t, ts.addr)
		f := wire.Frame{Method: methodEcho, ID: 1, PayloadLen: wire.DefaultMaxPayload}
		if _, err := nc.Write(f.Append(nil)); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
	}
	c := dial(t, ts.addr, DialOptions{})
	if _, err := c.Call(ctx10(t), methodEcho, nil, [][]byte{make([]byte, 1<<20)}, nil); err != nil {
		t.Fatal(err)
	}
	// The call's own payload goes back just after its answer is written.
	deadline := time.Now().Add(10 * time.Second)
	for ts.Stats().PayloadHeld != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if st := ts.Stats(); st.PayloadHeld != 0 || st.BudgetWaits != 0 {
		t.Fatalf("stats %+v: claims without bytes hold budget", st)
	}
	for _, nc := range conns {
		nc.Close()
	}
}

// A prefix claiming a large header holds no more memory than the bytes
// that came: the header grows as they arrive.
func TestClaimedHeaderGrowsAsItArrives(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	r := newFrameReader(a, wire.Limits{})
	r.pace = pace{nc: a, stall: 10 * time.Second}
	r.begin()
	go func() {
		_, _ = b.Write(make([]byte, 1000))
		b.Close()
	}()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := r.header(wire.Frame{HeaderLen: 1 << 20})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a header cut short: %v, want ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got >= 1<<20 {
		t.Fatalf("reading 1000 bytes of a header claimed to be 1 MiB allocated %d bytes", got)
	}
}

// A client does not allocate what a peer posing as a server claims in its
// hello.
func TestClientRefusesLargeHello(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		f := wire.Frame{Method: wire.MethodHello, PayloadLen: 1 << 30}
		_, _ = nc.Write(f.Append(nil))
		_, _ = io.Copy(io.Discard, nc) // until the client gives up
	}()
	_, err = Dial(ctx10(t), ln.Addr().String(), DialOptions{})
	if !errors.Is(err, pdc.ErrProtocol) || !strings.Contains(err.Error(), "no payload") {
		t.Fatalf("dial a server claiming a 1 GiB hello: %v, want ErrProtocol", err)
	}
	<-done
}
