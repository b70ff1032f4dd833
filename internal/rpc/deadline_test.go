package rpc

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
)

// passedDeadline is a context whose deadline has passed and whose timer
// has not fired yet: Err is still nil, as a real context's is for a
// moment after its deadline.
type passedDeadline struct{ context.Context }

func (passedDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Second), true }

// A dial or handshake cut by the caller's deadline is a timeout of the
// caller's (pdc dial --timeout 1ms), even when it ends before the
// context's timer fires: not "server unavailable", which sends users to
// restart a server that is up, and not "no answer within" the handshake
// timeout, which did not pass.
func TestCallersDeadlineIsATimeout(t *testing.T) {
	ctx := passedDeadline{context.Background()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := Dial(ctx, ln.Addr().String(), DialOptions{Label: "rank 0"})
	if err == nil {
		c.Close()
		t.Fatal("a dial past its deadline succeeded")
	}
	if !errors.Is(err, pdc.ErrTimeout) || errors.Is(err, pdc.ErrUnavailable) {
		t.Errorf("dial past the caller's deadline: %v; want a timeout, not unavailable", err)
	}

	client, server := net.Pipe()
	defer server.Close()
	c, err = NewConn(ctx, client, DialOptions{Label: "rank 0", HandshakeTimeout: 10 * time.Second})
	if err == nil {
		c.Close()
		t.Fatal("a handshake past its deadline succeeded")
	}
	if !errors.Is(err, pdc.ErrTimeout) || strings.Contains(err.Error(), "no answer within") {
		t.Errorf("handshake past the caller's deadline: %v; want a timeout that does not blame the 10s handshake timeout", err)
	}
}

// brokenWrites is a connection whose writes fail with EPIPE once broken,
// as a socket's do when the server's host reset it, while its reads
// still wait: the write, not the read, is where the call learns.
type brokenWrites struct {
	net.Conn
	broken atomic.Bool
}

func (b *brokenWrites) Write(p []byte) (int, error) {
	if b.broken.Load() {
		return 0, syscall.EPIPE
	}
	return b.Conn.Write(p)
}

// A call whose write finds the connection broken fails as unavailable
// naming the server by its label (rank and address), as one whose read
// does: users and the client's retry logic go by which rank it was.
// Before, it named only the socket's remote address.
func TestBrokenWriteNamesTheServer(t *testing.T) {
	ts := startServer(t, "tcp", ServerConfig{})
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	bw := &brokenWrites{Conn: nc}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewConn(ctx, bw, DialOptions{Label: "rank 7 (" + ts.addr + ")"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Call(ctx, methodEcho, []byte("h"), nil, nil); err != nil {
		t.Fatalf("echo before the break: %v", err)
	}
	bw.broken.Store(true)
	for i := range 2 { // the failing call, then one on the failed connection
		_, err = c.Call(ctx, methodEcho, []byte("h"), nil, nil)
		if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "rank 7 ("+ts.addr+")") {
			t.Fatalf("call %d after the write broke: %v; want ErrUnavailable naming rank 7 (%s)", i, err, ts.addr)
		}
	}
}
