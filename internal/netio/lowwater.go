package netio

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Bounds of a raised receive low-water mark. Measured on this machine,
// reading 1 GiB over loopback TCP in 16 MiB reads: 4.4 GB/s woken at
// every arrival, 4.9 at 512 KiB, 5.5 at 1 MiB, 6.2 at 2 and 4 MiB, 5.1 at
// 8 MiB (the sender then waits on a window that opens in large steps).
const (
	minLowWater = 128 << 10
	maxLowWater = 2 << 20
)

// LowWater raises a TCP connection's receive low-water mark
// (SO_RCVLOWAT) while a large payload is read, so that the kernel wakes
// the reader once a megabyte or two has arrived instead of at every
// segment. On loopback a wake-up costs both ends more than copying the
// segment does: the sender's system call runs the receiver's TCP input
// and wakes it. The mark must never exceed the bytes the peer is certain
// to send, or the read would wait for bytes that never come: callers
// raise it only for the rest of a payload whose length the frame gave,
// and lower it before reading anything else. Other connections (Unix
// sockets, which do not honour the mark in poll) are left alone. The zero
// LowWater does nothing. Not safe for concurrent use: it belongs to the
// connection's reader.
type LowWater struct {
	rc  syscall.RawConn
	cur int
}

// NewLowWater returns nc's LowWater.
func NewLowWater(nc net.Conn) LowWater {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return LowWater{}
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return LowWater{}
	}
	return LowWater{rc: rc, cur: 1}
}

// Expect sets the mark for n more bytes that are certain to arrive: raised
// (up to 2 MiB) when n is large, lowered to 1 otherwise. Expect(0) before
// reading what may not come.
func (l *LowWater) Expect(n int64) {
	if l.rc == nil {
		return
	}
	v := 1
	if n >= minLowWater {
		v = int(min(n, maxLowWater))
	}
	if v != l.cur {
		l.set(v)
	}
}

// ExpectRead is Expect for a read of up to p of the n bytes certain to
// arrive. A reader that takes at least a raised mark per read (a file
// written a piece at a time as it arrives) is woken once its piece is
// there, not when the rest of the payload is: the first write would
// otherwise wait for the whole file. A smaller read keeps Expect's mark,
// and drains what it waited for in several reads.
func (l *LowWater) ExpectRead(n int64, p int) {
	if int64(p) >= minLowWater {
		n = min(n, int64(p))
	}
	l.Expect(n)
}

// set is Expect's change of the mark, apart so that the unchanged mark,
// Expect's usual case on every frame read, allocates nothing (the closure
// that changes it takes v's address).
func (l *LowWater) set(v int) {
	err := l.rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, v) != nil {
			v = l.cur
		}
	})
	if err == nil {
		l.cur = v
	}
}

// Queued reports how many bytes wait in the kernel's receive queue, which
// a raised mark may be holding back from a read; -1 if that is unknown.
func (l *LowWater) Queued() int {
	if l.rc == nil {
		return -1
	}
	n := -1
	_ = l.rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}
