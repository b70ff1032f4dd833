package cluster

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/pdcgo/pdc"
)

// ParseAdvertise checks an --advertise value: "HOST:PORT", or "HOST" to
// publish the bound port. HOST is a name or an address others can dial;
// a wildcard (0.0.0.0, ::) is refused, since it names no host.
func ParseAdvertise(s string) (host, port string, err error) {
	bad := func(why string) error {
		return fmt.Errorf("--advertise %q: %s; want HOST:PORT, or HOST to publish the bound port (e.g. 10.0.0.5:7000, node3, [fd00::5]:7000): %w", s, why, pdc.ErrInvalid)
	}
	if s == "" {
		return "", "", bad("empty")
	}
	if strings.HasPrefix(s, "unix:") {
		return "", "", bad("a Unix socket is reached by its path; --advertise is for TCP listeners")
	}
	host, port = s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", "", bad(fmt.Sprintf("port %q is not 1..65535", p))
		}
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	} else if strings.Contains(s, ":") && net.ParseIP(s) == nil {
		return "", "", bad(err.Error())
	}
	if host == "" {
		return "", "", bad("no host")
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "", "", bad("a wildcard address names no host others can reach")
	}
	if strings.ContainsAny(host, " /[]") {
		return "", "", bad("not a host name or address")
	}
	return host, port, nil
}

// AdvertiseAddr is the address a server bound to bound ("host:port", or
// "unix:/path") publishes for others to dial. advertise (checked by
// ParseAdvertise; "" for none) wins. A server bound to a wildcard address
// (0.0.0.0, ::) publishes the local address on the route to towards (rank
// 0's address; "" when unknown or this is rank 0), else the address on
// the default route, else the first address of an up interface that is not
// loopback, else loopback (a machine without a network).
func AdvertiseAddr(bound, advertise, towards string) (string, error) {
	if strings.HasPrefix(bound, "unix:") {
		if advertise != "" {
			return "", fmt.Errorf("--advertise %q: the server listens on a Unix socket (%s), which is reached by its path: %w", advertise, bound, pdc.ErrInvalid)
		}
		return bound, nil
	}
	bhost, bport, err := net.SplitHostPort(bound)
	if err != nil {
		return "", fmt.Errorf("bound address %q: %w", bound, err)
	}
	if advertise != "" {
		host, port, err := ParseAdvertise(advertise)
		if err != nil {
			return "", err
		}
		if port == "" {
			port = bport
		}
		return net.JoinHostPort(host, port), nil
	}
	bip := net.ParseIP(bhost)
	if bip == nil || !bip.IsUnspecified() {
		return bound, nil
	}
	v4only := bip.To4() != nil
	return net.JoinHostPort(ReachableIP(towards, v4only).String(), bport), nil
}

// ReachableIP is this host's address others can reach: the local address
// on the route to towards ("host:port"; "" when unknown), else on the
// default route, else the first non-loopback address of an up interface,
// else 127.0.0.1. v4only leaves out IPv6 addresses (a listener on
// 0.0.0.0 cannot be reached at them). It sends nothing: a UDP "connect"
// only looks up the route.
func ReachableIP(towards string, v4only bool) net.IP {
	usable := func(ip net.IP) bool {
		return ip != nil && !ip.IsUnspecified() && !ip.IsLinkLocalUnicast() && (!v4only || ip.To4() != nil)
	}
	if towards != "" && !strings.HasPrefix(towards, "unix:") {
		if ip := routeFrom(towards); usable(ip) {
			return ip
		}
	}
	// Documentation addresses (RFC 5737, RFC 3849): the route lookup
	// follows the default route, and nothing is sent.
	probes := []string{"192.0.2.1:9"}
	if !v4only {
		probes = append(probes, "[2001:db8::1]:9")
	}
	for _, p := range probes {
		if ip := routeFrom(p); usable(ip) && !ip.IsLoopback() {
			return ip
		}
	}
	if ip := firstInterfaceIP(usable); ip != nil {
		return ip
	}
	return net.IPv4(127, 0, 0, 1)
}

// routeFrom is the local address of the route to addr, or nil.
func routeFrom(addr string) net.IP {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return nil
	}
	defer c.Close()
	if ua, ok := c.LocalAddr().(*net.UDPAddr); ok {
		return ua.IP
	}
	return nil
}

// firstInterfaceIP is the first usable address, IPv4 before IPv6, of an
// up interface that is not loopback, or nil.
func firstInterfaceIP(usable func(net.IP) bool) net.IP {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var v6 net.IP
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || !usable(n.IP) || n.IP.IsLoopback() {
				continue
			}
			if n.IP.To4() != nil {
				return n.IP
			}
			if v6 == nil {
				v6 = n.IP
			}
		}
	}
	return v6
}

// IsLoopback reports whether a listen address ("host:port", "unix:/path")
// can only be reached from this host: a Unix socket, or a loopback
// address (127.0.0.0/8, ::1, localhost).
func IsLoopback(listen string) bool {
	if strings.HasPrefix(listen, "unix:") {
		return true
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
