package lane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
)

// seals make a lane safe to map: its size is fixed for good.
const seals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// Create makes a sealed memory file of size bytes and maps it read-write.
// The caller owns both: close the file once it has been handed over, and
// Unmap the memory once nothing refers to it.
func Create(name string, size int) (*os.File, []byte, error) {
	if size <= 0 {
		return nil, nil, fmt.Errorf("lane %s: size %d: %w", name, size, pdc.ErrInvalid)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("lane %s: memfd_create: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("lane %s: sizing to %d bytes: %w", name, size, err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("lane %s: sealing: %w", name, err)
	}
	mem, err := mapShared(f, size)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("lane %s: %w", name, err)
	}
	return f, mem, nil
}

// Map maps a lane received from a data server, which must be sealed
// against shrinking (or a mapping could fault) and size bytes long.
func Map(f *os.File, size int) ([]byte, error) {
	s, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil || s&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("lane: the memory file is not sealed against shrinking: %w", pdc.ErrProtocol)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("lane: fstat: %w", err)
	}
	if size <= 0 || st.Size != int64(size) {
		return nil, fmt.Errorf("lane: the memory file holds %d bytes, the server said %d: %w", st.Size, size, pdc.ErrProtocol)
	}
	return mapShared(f, size)
}

func mapShared(f *os.File, size int) ([]byte, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap of %d bytes: %w", size, err)
	}
	return mem, nil
}

// Unmap unmaps a lane's memory; nothing may use it afterwards.
func Unmap(mem []byte) error {
	if mem == nil {
		return nil
	}
	return unix.Munmap(mem)
}

// Hello is what a client sends on a lane socket: Magic, then the token
// the server gave it for the lane.
const (
	Magic     = "PDCLANE1"
	TokenSize = 16
	HelloSize = len(Magic) + TokenSize
)

// Answer bytes: the lane's descriptor comes with AnswerOK.
const (
	AnswerOK      = 'y'
	AnswerUnknown = 'n'
)

// Send writes one answer byte on uc with f's descriptor attached.
func Send(uc *net.UnixConn, f *os.File) error {
	_, _, err := uc.WriteMsgUnix([]byte{AnswerOK}, unix.UnixRights(int(f.Fd())), nil)
	return err
}

// fetchTimeout bounds a hand-over, which on one host takes microseconds,
// for callers without a deadline.
const fetchTimeout = 10 * time.Second

// Fetch asks the lane socket at path for the lane of token and returns
// its memory file. It gives up when ctx ends, or after fetchTimeout.
func Fetch(ctx context.Context, path string, token []byte) (*os.File, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("lane socket %s: %w: %w", path, pdc.ErrUnavailable, err)
	}
	defer nc.Close()
	uc := nc.(*net.UnixConn)
	stop := context.AfterFunc(ctx, func() { _ = uc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	hello := append([]byte(Magic), token...)
	if _, err := uc.Write(hello); err != nil {
		return nil, fmt.Errorf("lane socket %s: %w", path, ctxOr(ctx, err))
	}
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(b[:], oob)
	fd := -1
	if oobn > 0 {
		fd = ReceivedFD(oob[:oobn])
	}
	if err != nil || n != 1 || b[0] != AnswerOK || fd < 0 {
		if fd >= 0 {
			unix.Close(fd)
		}
		if err == nil {
			err = fmt.Errorf("the server has no lane for this token: %w", pdc.ErrNotFound)
		}
		return nil, fmt.Errorf("lane socket %s: %w", path, ctxOr(ctx, err))
	}
	return os.NewFile(uintptr(fd), "lane"), nil
}

// ReceivedFD returns the first descriptor passed in a message's control
// bytes oob, closing any others (nobody would close them); -1 if there is
// none.
func ReceivedFD(oob []byte) int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return -1
	}
	fd := -1
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, f := range fds {
			if fd < 0 {
				fd = f
			} else {
				unix.Close(f)
			}
		}
	}
	return fd
}

func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return pdc.CtxErr(ctx)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: %w", pdc.ErrTimeout, err)
	}
	return err
}
