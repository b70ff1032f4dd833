package rpc

import (
	"errors"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func isTooManyFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// tuneConn sets what a pdc connection wants of a TCP socket: no Nagle delay,
// keepalives, and a bound on how long sent data may stay unacknowledged
// (including a peer's zero window), after which the kernel fails the
// connection. Unix sockets need none of it.
func tuneConn(nc net.Conn, stall time.Duration) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return
	}
	_ = tc.SetNoDelay(true)
	_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 10 * time.Second, Count: 3})
	if rc, err := tc.SyscallConn(); err == nil && stall > 0 {
		ms := int(stall / time.Millisecond)
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, ms)
		})
	}
}
