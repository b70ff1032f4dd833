package e2e

import (
	"fmt"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// OpenPTY opens a pseudo-terminal: the controlling side, and the
// terminal's side for a child's output. Where there are none the test
// is skipped, unless PDC_PTY_REQUIRED=1 (CI has them and says so: there
// the test must run, not skip).
func OpenPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if os.Getenv("PDC_PTY_REQUIRED") == "1" {
			t.Fatalf("open /dev/ptmx with PDC_PTY_REQUIRED=1: %v", err)
		}
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	ptm = os.NewFile(uintptr(fd), "/dev/ptmx")
	var unlock int32
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlockpt: %v", e)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptm.Close(); pts.Close() })
	return ptm, pts
}
