package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// DirWatch wakes a waiter when files in a directory are created or
// replaced. It uses inotify, which sees local writes only; a slow fallback
// timer covers shared filesystems, where another node's write raises no
// event. One goroutine at a time may Wait.
type DirWatch struct {
	f        *os.File // nil when inotify is unavailable
	fallback time.Duration
}

// WatchDir watches dir, or, if it cannot, wakes its waiter every
// fallback. Close releases it.
func WatchDir(dir string, fallback time.Duration) *DirWatch {
	w := &DirWatch{fallback: fallback}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return w
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE); err != nil {
		unix.Close(fd)
		return w
	}
	// A non-blocking descriptor in os.NewFile joins Go's poller, so reads
	// park the goroutine and honour deadlines.
	w.f = os.NewFile(uintptr(fd), "inotify:"+dir)
	return w
}

// Wait returns when the directory changed, the fallback interval passed,
// or ctx ended (with its error).
func (w *DirWatch) Wait(ctx context.Context) error {
	if w.f == nil {
		t := time.NewTimer(w.fallback)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	_ = w.f.SetReadDeadline(time.Now().Add(w.fallback))
	stop := context.AfterFunc(ctx, func() { _ = w.f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var buf [4096]byte
	_, err := w.f.Read(buf[:])
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("watch directory: %w", err)
	}
	return nil
}

// Close releases the watch.
func (w *DirWatch) Close() {
	if w.f != nil {
		w.f.Close()
	}
}

// WaitForRendezvous waits until dir holds a rendezvous record of a rank 0
// that answers at its address as the instance the record names. If the
// first look finds none, it calls waiting (if not nil) once with what it
// found instead, before it waits: a rank started before rank 0 says what
// it waits for.
func WaitForRendezvous(ctx context.Context, dir string, waiting func(why error)) (Rendezvous, error) {
	w := WatchDir(dir, time.Second)
	defer w.Close()
	var last error
	for {
		r, err := ReadRendezvous(dir)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if Alive(pctx, Server{Addr: r.Addr, Instance: r.Instance}) {
				cancel()
				return r, nil
			}
			cancel()
			err = fmt.Errorf("rank 0 at %s (pid %d) does not answer", r.Addr, r.PID)
		} else if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("rank 0 has not started (no %s in %s)", Rank0File, dir)
		}
		if last == nil && waiting != nil {
			waiting(err)
		}
		last = err
		if werr := w.Wait(ctx); werr != nil {
			return Rendezvous{}, fmt.Errorf("wait for rank 0: %w; last seen: %v", werr, last)
		}
	}
}

// WaitForLiveList waits until dir holds the server list of a cluster that
// runs (one of its servers at least answers), or ctx ends. The list a
// killed cluster left behind is waited past: servers starting in dir
// replace it, possibly after the waiter started.
func WaitForLiveList(ctx context.Context, dir string) (*List, error) {
	w := WatchDir(dir, time.Second)
	defer w.Close()
	for {
		l, err := ReadList(dir)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			live := LiveServers(pctx, l)
			cancel()
			if len(live) > 0 {
				return l, nil
			}
			err = fmt.Errorf("none of the %d servers of the list in %s answers (a dead cluster's list)", l.Size, dir)
			if l.Size == 1 {
				err = fmt.Errorf("the 1 server of the list in %s does not answer (a dead cluster's list)", dir)
			}
		}
		if werr := w.Wait(ctx); werr != nil {
			return nil, fmt.Errorf("wait for the server list: %w; last seen: %w", werr, err)
		}
	}
}

// WaitForList waits until dir holds a complete server list, or ctx ends.
func WaitForList(ctx context.Context, dir string) (*List, error) {
	w := WatchDir(dir, time.Second)
	defer w.Close()
	for {
		l, err := ReadList(dir)
		if err == nil {
			return l, nil
		}
		if werr := w.Wait(ctx); werr != nil {
			return nil, fmt.Errorf("wait for the server list: %w; last seen: %w", werr, err)
		}
	}
}
