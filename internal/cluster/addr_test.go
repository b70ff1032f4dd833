package cluster

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
)

func TestParseAdvertise(t *testing.T) {
	for _, tc := range []struct {
		in, host, port, err string
	}{
		{in: "10.0.0.5:7000", host: "10.0.0.5", port: "7000"},
		{in: "node3", host: "node3"},
		{in: "node3:1", host: "node3", port: "1"},
		{in: "[fd00::5]:7000", host: "fd00::5", port: "7000"},
		{in: "[fd00::5]", host: "fd00::5"},
		{in: "fd00::5", host: "fd00::5"},
		{in: "", err: "empty"},
		{in: "0.0.0.0:7000", err: "wildcard"},
		{in: "[::]:7000", err: "wildcard"},
		{in: "::", err: "wildcard"},
		{in: "node3:0", err: `port "0" is not 1..65535`},
		{in: "node3:65536", err: `port "65536" is not 1..65535`},
		{in: "node3:", err: `port "" is not 1..65535`},
		{in: "node3:http", err: `port "http" is not 1..65535`},
		{in: ":7000", err: "no host"},
		{in: "a:b:c", err: "too many colons"},
		{in: "unix:/tmp/s", err: "Unix socket"},
		{in: "a b:7000", err: "not a host name"},
	} {
		host, port, err := ParseAdvertise(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, pdc.ErrInvalid) {
				t.Errorf("ParseAdvertise(%q) = %q, %q, %v; want an ErrInvalid saying %q", tc.in, host, port, err, tc.err)
			}
			continue
		}
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("ParseAdvertise(%q) = %q, %q, %v; want %q, %q", tc.in, host, port, err, tc.host, tc.port)
		}
	}
}

func TestAdvertiseAddr(t *testing.T) {
	for _, tc := range []struct {
		bound, advertise, towards, want string
	}{
		{"127.0.0.1:4000", "", "", "127.0.0.1:4000"},
		{"unix:/tmp/s.sock", "", "", "unix:/tmp/s.sock"},
		{"0.0.0.0:4000", "node3", "", "node3:4000"},
		{"0.0.0.0:4000", "node3:5000", "10.9.9.9:1", "node3:5000"},
		{"[::]:4000", "fd00::5", "", "[fd00::5]:4000"},
		// Towards a rank 0 on loopback, the route starts at loopback.
		{"0.0.0.0:4000", "", "127.0.0.1:1", "127.0.0.1:4000"},
		{"[::]:4000", "", "[::1]:1", "[::1]:4000"},
	} {
		got, err := AdvertiseAddr(tc.bound, tc.advertise, tc.towards)
		if err != nil || got != tc.want {
			t.Errorf("AdvertiseAddr(%q, %q, %q) = %q, %v; want %q", tc.bound, tc.advertise, tc.towards, got, err, tc.want)
		}
	}
	if _, err := AdvertiseAddr("unix:/tmp/s.sock", "node3", ""); err == nil || !errors.Is(err, pdc.ErrInvalid) {
		t.Errorf("--advertise on a Unix socket: %v; want ErrInvalid", err)
	}
	// A wildcard without a route to rank 0 publishes a concrete address
	// of this host, never the wildcard.
	for _, bound := range []string{"0.0.0.0:4000", "[::]:4000"} {
		got, err := AdvertiseAddr(bound, "", "")
		if err != nil {
			t.Fatal(err)
		}
		host, _, err := net.SplitHostPort(got)
		if err != nil {
			t.Fatal(err)
		}
		ip := net.ParseIP(host)
		if ip == nil || ip.IsUnspecified() || !isLocalIP(ip) {
			t.Errorf("AdvertiseAddr(%q) = %q: want one of this host's addresses", bound, got)
		}
		if bound == "0.0.0.0:4000" && ip.To4() == nil {
			t.Errorf("AdvertiseAddr(%q) = %q: an IPv4 listener published an IPv6 address", bound, got)
		}
	}
}

func isLocalIP(ip net.IP) bool {
	if ip.IsLoopback() {
		return true
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:0": true, "127.1.2.3:80": true, "[::1]:0": true, "localhost:0": true, "unix:/x": true,
		"0.0.0.0:0": false, "[::]:0": false, ":0": false, "10.0.0.1:0": false, "node3:0": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
