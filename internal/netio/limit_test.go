package netio

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
)

type fakeConn struct {
	net.Conn
	remote net.Addr
}

func (c fakeConn) RemoteAddr() net.Addr { return c.remote }

func tcpFrom(ip string, port int) net.Conn {
	return fakeConn{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: port}}
}

func TestConnLimit(t *testing.T) {
	l := ConnLimit{Max: 3, PerPeer: 2}
	r1, err := l.Admit(tcpFrom("10.0.0.1", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Admit(tcpFrom("10.0.0.1", 2)); err != nil {
		t.Fatal(err)
	}
	// Another port of the same host is the same peer.
	if _, err := l.Admit(tcpFrom("10.0.0.1", 3)); !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "from 10.0.0.1") {
		t.Fatalf("third from one peer: %v, want refused per peer", err)
	}
	if _, err := l.Admit(tcpFrom("10.0.0.2", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Admit(tcpFrom("10.0.0.3", 1)); !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "(3, the limit)") {
		t.Fatalf("fourth in all: %v, want refused in total", err)
	}
	r1()
	r1() // once only
	if l.Open() != 2 {
		t.Fatalf("%d open after a release, want 2", l.Open())
	}
	if _, err := l.Admit(tcpFrom("10.0.0.3", 1)); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

func TestPeerKey(t *testing.T) {
	for _, c := range []struct {
		a    net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 9}, "127.0.0.1"},
		{&net.UnixAddr{Name: "@x", Net: "unix"}, "local"},
		{nil, "unknown"},
	} {
		if got := PeerKey(c.a); got != c.want {
			t.Errorf("PeerKey(%v) = %q, want %q", c.a, got, c.want)
		}
	}
}

func TestRateLog(t *testing.T) {
	var buf bytes.Buffer
	r := NewRateLog(slog.New(slog.NewTextHandler(&buf, nil)), 3, time.Hour)
	logged := 0
	for range 10 {
		if r.Warn("refused") {
			logged++
		}
	}
	if logged != 3 || strings.Count(buf.String(), "refused") != 3 {
		t.Fatalf("%d of 10 logged, want the burst of 3:\n%s", logged, buf.String())
	}
	// A new interval reports what the last one left out.
	r.window = time.Now().Add(-2 * time.Hour)
	r.Warn("refused")
	if !strings.Contains(buf.String(), "7 more like it") {
		t.Fatalf("the next line does not count the 7 left out:\n%s", buf.String())
	}
}
