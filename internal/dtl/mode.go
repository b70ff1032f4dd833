package dtl

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// Mode is a transport backend.
type Mode uint8

// Modes. Values travel in wire.FetchRequest: never renumber.
const (
	// ModeAuto is shm when both ends share the host, pull otherwise.
	ModeAuto Mode = iota
	ModeStream
	ModePull
	ModePush
	ModeShm
)

var modeNames = [...]string{ModeAuto: "auto", ModeStream: "stream", ModePull: "pull", ModePush: "push", ModeShm: "shm"}

// Modes lists the concrete modes.
var Modes = []Mode{ModeStream, ModePull, ModePush, ModeShm}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

func (m Mode) valid() bool { return int(m) < len(modeNames) }

// EnvMode names the environment variable that selects the mode.
const EnvMode = "PDC_DTL"

// ParseMode reads a mode name; an unknown one is an error that lists the
// valid ones.
func ParseMode(s string) (Mode, error) {
	for m, name := range modeNames {
		if strings.EqualFold(s, name) {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("transport mode %q: %w (valid: %s)", s, ErrBadMode, strings.Join(modeNames[:], ", "))
}

// ModeFromEnv is the mode PDC_DTL selects: auto when unset.
func ModeFromEnv() (Mode, error) {
	s := os.Getenv(EnvMode)
	if s == "" {
		return ModeAuto, nil
	}
	m, err := ParseMode(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", EnvMode, err)
	}
	return m, nil
}

// resolve turns auto into a concrete mode for a peer at addr.
func (m Mode) resolve(addr string) Mode {
	if m != ModeAuto {
		return m
	}
	if SameHost(addr) {
		return ModeShm
	}
	return ModePull
}

// SameHost reports whether an RPC address ("host:port" or "unix:/path")
// is on this host: a Unix socket, a loopback address or one of this
// host's interface addresses.
func SameHost(addr string) bool {
	if strings.HasPrefix(addr, "unix:") {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return false
		}
		ip = ips[0]
	}
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}
