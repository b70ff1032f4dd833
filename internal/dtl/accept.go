package dtl

import (
	"errors"
	"log/slog"
	"net"
	"time"
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
