package rpc

import (
	"context"
	"errors"
	"net"
	"strings"
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
