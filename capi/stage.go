package capi

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
)

// StageProduce is pdc_stage_produce: it records a file written in the
// producer dir so that consumers anywhere can get it.
func (l *Lib) StageProduce(pdcID uint64, path string) int {
	return l.run(fmt.Sprintf("pdc_stage_produce(pdc %d, %q)", pdcID, path), func() error { return l.stageProduce(pdcID, path) })
}

// errNoPath is the error of a NULL or empty path, which C passes as "".
var errNoPath = fmt.Errorf("no path (NULL or empty): %w", pdc.ErrInvalid)

func (l *Lib) stageProduce(pdcID uint64, path string) error {
	if path == "" {
		return errNoPath
	}
	h, err := l.get(pdcID, kindConn)
	if err != nil {
		return err
	}
	ctx, cancel := h.conn.ctx()
	defer cancel()
	_, err = h.conn.c.Produce(ctx, path)
	return err
}

// StageConsume is pdc_stage_consume: it waits until path has been
// produced, up to timeoutSeconds (0: the connection's timeout; +Inf: no
// limit), and places it in the consumer dir.
func (l *Lib) StageConsume(pdcID uint64, path string, timeoutSeconds float64) int {
	return l.run(fmt.Sprintf("pdc_stage_consume(pdc %d, %q, %gs)", pdcID, path, timeoutSeconds), func() error {
		_, err := l.stageConsume(pdcID, path, timeoutSeconds)
		return err
	})
}

// StageConsumeLocal is pdc_stage_consume_local: StageConsume that also
// returns the absolute path of the local copy ("" on failure).
func (l *Lib) StageConsumeLocal(pdcID uint64, path string, timeoutSeconds float64) (string, int) {
	var local string
	rc := l.run(fmt.Sprintf("pdc_stage_consume_local(pdc %d, %q, %gs)", pdcID, path, timeoutSeconds), func() (err error) {
		local, err = l.stageConsume(pdcID, path, timeoutSeconds)
		return err
	})
	return local, rc
}

// StageConsumeNewer is pdc_stage_consume_newer: StageConsume that waits
// for a version of path newer than version, even if that one has been
// produced (client.WithNewerThan).
func (l *Lib) StageConsumeNewer(pdcID uint64, path string, version uint64, timeoutSeconds float64) int {
	return l.run(fmt.Sprintf("pdc_stage_consume_newer(pdc %d, %q, version %d, %gs)", pdcID, path, version, timeoutSeconds), func() error {
		_, err := l.stageConsume(pdcID, path, timeoutSeconds, client.WithNewerThan(version))
		return err
	})
}

func (l *Lib) stageConsume(pdcID uint64, path string, timeoutSeconds float64, more ...client.ConsumeOption) (string, error) {
	if path == "" {
		return "", errNoPath
	}
	h, err := l.get(pdcID, kindConn)
	if err != nil {
		return "", err
	}
	timeout := h.conn.timeout
	if timeoutSeconds != 0 {
		if timeout, err = seconds(timeoutSeconds, "timeout_seconds"); err != nil {
			return "", err
		}
	}
	ctx, cancel := withTimeout(timeout)
	defer cancel()
	start := time.Now()
	opts := more
	if h.conn.dtl != "" {
		opts = append(opts, client.WithTransport(h.conn.dtl))
	}
	got, err := h.conn.c.Consume(ctx, path, opts...)
	if err != nil {
		// The deadline may pass here or, a little earlier, on the server
		// that waits for the produce on the call's behalf.
		if ctx.Err() != nil || errors.Is(err, pdc.ErrTimeout) {
			return "", fmt.Errorf("gave up after %v: %w", time.Since(start).Round(time.Millisecond), err)
		}
		return "", err
	}
	return got.Local, nil
}

// StagePreloadConsume is the consume of libpdc_preload.so, the interposer:
// StageConsume under the connection's timeout that returns 0 or the errno
// the intercepted call (open, stat, ...) fails with, so that the program
// sees a reason it knows. The failure is also reported, as every call's.
func (l *Lib) StagePreloadConsume(pdcID uint64, path string) int {
	var err error
	l.run(fmt.Sprintf("pdc_stage_consume(pdc %d, %q) for LD_PRELOAD", pdcID, path), func() error {
		_, err = l.stageConsume(pdcID, path, 0)
		return err
	})
	return int(Errno(err))
}

// StagePreloadProduce is the interposer's produce: StageProduce returning 0
// or the errno the intercepted close fails with.
func (l *Lib) StagePreloadProduce(pdcID uint64, path string) int {
	var err error
	l.run(fmt.Sprintf("pdc_stage_produce(pdc %d, %q) for LD_PRELOAD", pdcID, path), func() error {
		err = l.stageProduce(pdcID, path)
		return err
	})
	return int(Errno(err))
}

// Errno is the errno a failed staging call stands for in an intercepted
// libc call: ETIMEDOUT when the wait ran out, ENOENT for a path that is
// not there, EINVAL for one the dirs refuse, EACCES for the cluster's
// secret, EIO for the rest (servers, transport, checksum). nil is 0.
func Errno(err error) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pdc.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return syscall.ETIMEDOUT
	case errors.Is(err, pdc.ErrNotFound):
		return syscall.ENOENT
	case errors.Is(err, pdc.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, pdc.ErrPermission):
		return syscall.EACCES
	}
	return syscall.EIO
}
