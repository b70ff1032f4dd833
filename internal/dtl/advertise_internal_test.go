package dtl

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/pdcgo/pdc/internal/rpc"
)

// A sender whose bulk listener is bound to a wildcard address publishes
// the address the receiver reached it at, or the advertised host, never
// 0.0.0.0: a receiver on another host could not dial that (issue 26).
func TestPullAddrOfWildcardSender(t *testing.T) {
	ip := reachableIP(t)
	for _, advertise := range []string{"", "localhost"} {
		s, err := NewSender(SenderConfig{ShmDir: t.TempDir(), Logger: discard(), BulkAddr: "0.0.0.0:0", AdvertiseHost: advertise,
			Resolve: func(context.Context, []byte) (Source, error) { return Bytes(make([]byte, 1<<20)), nil }})
		if err != nil {
			t.Fatal(err)
		}
		srv := rpc.NewServer(rpc.ServerConfig{Logger: discard()})
		s.Register(srv)
		ln, err := rpc.Listen("0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan struct{})
		go func() { _ = srv.Serve(ln); close(served) }()
		r, err := NewReceiver(ReceiverConfig{Mode: ModePull, Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
		if _, err := r.Fetch(context.Background(), addr, []byte("k"), IntoWriter(io.Discard)); err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		got := r.mu.bulk[addr]
		r.mu.Unlock()
		wantHost := ip.String()
		if advertise != "" {
			wantHost = advertise
		}
		if want := net.JoinHostPort(wantHost, strconv.Itoa(s.bulk.Addr().(*net.TCPAddr).Port)); got != want {
			t.Errorf("advertise %q: the sender published pull address %q; want %q", advertise, got, want)
		}
		r.Close()
		srv.Close()
		<-served
		s.Close()
	}
}

// reachableIP is an address of this host other than loopback, if it has
// one: what a receiver on another host would dial.
func reachableIP(t *testing.T) net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP
		}
	}
	return net.IPv4(127, 0, 0, 1)
}
