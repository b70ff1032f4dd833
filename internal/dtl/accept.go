package dtl

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/pdcgo/pdc/internal/netio"
)

// acceptAgain reports whether an accept loop that got err should accept
// again: after a timeout at once; after a closed listener, or closing
// being closed, never; after anything else (out of descriptors and the
// like) once a moment has passed, for a connection to end rather than
// spin. A listener that peers were told of must go on accepting.
func acceptAgain(err error, closing <-chan struct{}, log *slog.Logger, addr string) bool {
	select {
	case <-closing:
		return false
	default:
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	log.Warn("dtl: accept failed", "addr", addr, "err", err)
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-closing:
		return false
	}
}

// Bounds on a side channel's connections when nothing else is configured:
// the RPC server's defaults.
const (
	defaultMaxConns        = 4096
	defaultMaxConnsPerPeer = 1024
)

// admit counts nc against lim, or answers it with the refusal (an answer
// of magic, in place of the one its peer will wait for) and closes it,
// logging through refusals. The answer fits in a fresh socket's buffer.
func admit(nc net.Conn, lim *netio.ConnLimit, magic string, refusals *netio.RateLog) (release func(), ok bool) {
	release, err := lim.Admit(nc)
	if err == nil {
		return release, true
	}
	refusals.Warn("dtl: refused connection: "+err.Error(), "local", nc.LocalAddr().String(), "remote", nc.RemoteAddr().String())
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write(errAnswer(magic, err))
	_ = nc.Close()
	return nil, false
}

// readHeader reads a side channel's fixed-size header into hb with
// first, which reads its first byte: waiting for a header to begin is not
// bounded (a cached connection waits for its next use), but once it has
// begun the rest must come within stall.
func readHeader(nc net.Conn, hb []byte, stall time.Duration, first func([]byte) error) error {
	if err := first(hb[:1]); err != nil {
		return err
	}
	_ = nc.SetReadDeadline(time.Now().Add(stall))
	_, err := io.ReadFull(nc, hb[1:])
	_ = nc.SetReadDeadline(time.Time{})
	return err
}

// Logs of what peers can make happen at will come at most logBurst lines
// per logInterval each.
const (
	logBurst    = 10
	logInterval = 10 * time.Second
)
