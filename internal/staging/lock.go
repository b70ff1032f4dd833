package staging

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
)

// Lock takes a flock on f, shared or exclusive, waiting until ctx ends.
// The lock goes with f's open file: closing f releases it.
//
// flock cannot be interrupted by a context, so a lock that is not free at
// once is waited for on a goroutine of its own; if ctx ends first, Lock
// returns its error, and the caller must close f. The goroutine then ends
// when the holder lets go (its lock, taken on f's descriptor, is dropped
// with the last reference to f). The holders in pdc are produce, which
// locks for one checksum pass, and consumers fetching one file.
func Lock(ctx context.Context, f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("lock %q: %w", f.Name(), err)
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = flock(int(fd), how|unix.LOCK_NB) }); err != nil {
		return fmt.Errorf("lock %q: %w", f.Name(), err)
	}
	if lerr == nil {
		return nil
	}
	if !errors.Is(lerr, unix.EWOULDBLOCK) {
		return fmt.Errorf("lock %q: %w", f.Name(), lerr)
	}
	done := make(chan error, 1)
	go func() {
		// Control keeps the descriptor open, even across a Close by the
		// caller, until the function returns.
		var lerr error
		err := rc.Control(func(fd uintptr) { lerr = flock(int(fd), how) })
		if err == nil {
			err = lerr
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("lock %q: %w", f.Name(), err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the lock on %q: %w", f.Name(), pdc.CtxErr(ctx))
	}
}

func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}
