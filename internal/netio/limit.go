package netio

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
)

// PeerKey names the peer of a connection for per-peer limits: its IP
// address for TCP (every port of a host is the same peer), and "local"
// for a Unix socket, whose peers are all on this host.
func PeerKey(a net.Addr) string {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case *net.UnixAddr:
		return "local"
	case nil:
		return "unknown"
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// ConnLimit bounds the connections a listener keeps open, in total and
// per peer (PeerKey), so that a peer that opens connections without end
// runs into a refusal, not the process's descriptor limit. Safe for
// concurrent use. The zero ConnLimit admits everything.
type ConnLimit struct {
	// Max bounds the connections open at once; 0: no bound.
	Max int
	// PerPeer bounds those of one peer; 0: no bound.
	PerPeer int

	mu    sync.Mutex
	total int
	peers map[string]int
}

// Admit counts nc in, or refuses it with an error wrapping
// pdc.ErrUnavailable that says which bound it hit. An admitted
// connection is counted until release is called (once).
func (l *ConnLimit) Admit(nc net.Conn) (release func(), err error) {
	peer := PeerKey(nc.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Max > 0 && l.total >= l.Max {
		return nil, fmt.Errorf("too many connections (%d, the limit): %w", l.Max, pdc.ErrUnavailable)
	}
	if l.PerPeer > 0 && l.peers[peer] >= l.PerPeer {
		return nil, fmt.Errorf("too many connections from %s (%d, the limit per peer): %w", peer, l.PerPeer, pdc.ErrUnavailable)
	}
	if l.peers == nil {
		l.peers = make(map[string]int)
	}
	l.total++
	l.peers[peer]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.peers[peer]--; l.peers[peer] <= 0 {
				delete(l.peers, peer)
			}
		})
	}, nil
}

// Open returns the connections counted in now.
func (l *ConnLimit) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// RateLog logs a kind of event that a broken or hostile peer can repeat
// at will (refused connections, protocol errors, timeouts) at most burst
// times per interval, so that a flood of them cannot flood the log too.
// The lines it leaves out are counted, and the next line it writes says
// how many there were. Safe for concurrent use.
type RateLog struct {
	log      *slog.Logger
	burst    int
	interval time.Duration

	mu         sync.Mutex
	window     time.Time // when the current interval began
	lines      int       // written in it
	suppressed int       // left out since the last line written
}

// NewRateLog returns a RateLog writing to log at most burst lines per
// interval.
func NewRateLog(log *slog.Logger, burst int, interval time.Duration) *RateLog {
	return &RateLog{log: log, burst: max(burst, 1), interval: interval}
}

// Warn logs msg with args at warning level, unless the interval's lines
// are spent. It reports whether it logged.
func (r *RateLog) Warn(msg string, args ...any) bool {
	return r.emit(slog.LevelWarn, msg, args)
}

// Info is Warn at info level.
func (r *RateLog) Info(msg string, args ...any) bool {
	return r.emit(slog.LevelInfo, msg, args)
}

func (r *RateLog) emit(level slog.Level, msg string, args []any) bool {
	now := time.Now()
	r.mu.Lock()
	if now.Sub(r.window) >= r.interval {
		r.window, r.lines = now, 0
	}
	if r.lines >= r.burst {
		r.suppressed++
		r.mu.Unlock()
		return false
	}
	r.lines++
	n := r.suppressed
	r.suppressed = 0
	r.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", fmt.Sprintf("%d more like it since the last such line", n))
	}
	r.log.Log(context.Background(), level, msg, args...)
	return true
}
