package capi_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/capi"
)

// TestErrno checks the errno a failed staging call gives the libc call
// libpdc_preload.so intercepted: the program's own message (cat's,
// Python's) must name the reason.
func TestErrno(t *testing.T) {
	for _, c := range []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{fmt.Errorf("consume x: %w", pdc.ErrTimeout), syscall.ETIMEDOUT},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), syscall.ETIMEDOUT},
		{fmt.Errorf("produce x: %w", pdc.ErrNotFound), syscall.ENOENT},
		{fmt.Errorf("path leaves the dir: %w", pdc.ErrInvalid), syscall.EINVAL},
		{fmt.Errorf("secret: %w", pdc.ErrPermission), syscall.EACCES},
		{fmt.Errorf("server: %w", pdc.ErrUnavailable), syscall.EIO},
		{fmt.Errorf("copy: %w", pdc.ErrChecksum), syscall.EIO},
		{errors.New("anything else"), syscall.EIO},
	} {
		if got := capi.Errno(c.err); got != c.want {
			t.Errorf("Errno(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
