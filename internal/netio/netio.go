package netio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Interrupt arranges for ctx's end to make blocked reads (read) or writes
// (!read) on nc return at once, by moving nc's deadline into the past.
// done reports whether that happened; it must be called once the operation
// is over, and waits for an interrupt already running. An interrupted
// connection keeps its past deadline: the stream may be torn, so the
// caller closes it.
func Interrupt(ctx context.Context, nc net.Conn, read bool) (done func() bool) {
	if ctx.Done() == nil {
		return func() bool { return false }
	}
	var fired sync.WaitGroup
	fired.Add(1)
	stop := context.AfterFunc(ctx, func() {
		defer fired.Done()
		if read {
			_ = nc.SetReadDeadline(time.Unix(1, 0))
		} else {
			_ = nc.SetWriteDeadline(time.Unix(1, 0))
		}
	})
	return func() bool {
		if stop() {
			return false
		}
		fired.Wait()
		return true
	}
}

// ctxErr returns err, or ctx's error joined with it when ctx's end is the
// reason the operation failed.
func ctxErr(ctx context.Context, interrupted bool, err error) error {
	if interrupted && err != nil {
		return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	return err
}

// WriteFull writes every buffer to nc with writev, until done or ctx ends.
func WriteFull(ctx context.Context, nc net.Conn, bufs ...[]byte) (int64, error) {
	done := Interrupt(ctx, nc, false)
	nb := net.Buffers(bufs)
	n, err := nb.WriteTo(nc)
	if done() {
		if err == nil {
			// ctx ended just after the write: the connection is intact,
			// so leave it usable.
			_ = nc.SetWriteDeadline(time.Time{})
		}
		return n, ctxErr(ctx, true, err)
	}
	return n, err
}

// ReadFull fills p from nc, until done or ctx ends.
func ReadFull(ctx context.Context, nc net.Conn, p []byte) (int, error) {
	done := Interrupt(ctx, nc, true)
	n, err := io.ReadFull(nc, p)
	if done() {
		if err == nil {
			_ = nc.SetReadDeadline(time.Time{})
		}
		return n, ctxErr(ctx, true, err)
	}
	return n, err
}

// SendFile writes n bytes of f starting at off to nc without a copy in
// user space. To a peer on another host the bytes go from the page cache
// to the socket in the kernel (sendfile). To a peer on this host (loopback
// TCP, Unix socket) they are written from a mapping of the file instead:
// measured on this machine, sendfile into a loopback socket runs at about
// half the speed of a plain write (the receiving side copies from page
// fragments either way, and sendfile adds an internal pipe per 64 KiB).
// A file shorter than off+n is an error (io.ErrUnexpectedEOF): the peer
// was promised n bytes.
func SendFile(ctx context.Context, nc net.Conn, f *os.File, off, n int64) (int64, error) {
	done := Interrupt(ctx, nc, false)
	sent, err := sendFile(nc, f, off, n)
	return sent, ctxErr(ctx, done(), err)
}

func sendFile(nc net.Conn, f *os.File, off, n int64) (int64, error) {
	if local(nc) {
		if k, err, ok := writeMapped(nc, f, off, n); ok {
			return k, err
		}
	}
	var sent int64
	if sc, ok := nc.(syscall.Conn); ok && n > 0 {
		rc, err := sc.SyscallConn()
		fc, ferr := f.SyscallConn()
		if err == nil && ferr == nil {
			unsupported := false
			var serr error
			cerr := fc.Control(func(infd uintptr) {
				serr = rc.Write(func(outfd uintptr) bool {
					for sent < n {
						o := off + sent
						k, err := unix.Sendfile(int(outfd), int(infd), &o, int(min(n-sent, 1<<30)))
						if k > 0 {
							sent += int64(k)
						}
						switch {
						case err == unix.EINTR:
						case err == unix.EAGAIN:
							return false // wait until the socket is writable
						case (err == unix.EINVAL || err == unix.ENOSYS) && sent == 0:
							unsupported = true
							return true
						case err != nil:
							serr = err
							return true
						case k == 0:
							serr = io.ErrUnexpectedEOF
							return true
						}
					}
					return true
				})
			})
			if cerr != nil {
				return sent, cerr
			}
			if !unsupported {
				if serr == nil && sent < n {
					serr = io.ErrUnexpectedEOF
				}
				return sent, serr
			}
		}
	}
	k, err := io.Copy(nc, io.NewSectionReader(f, off+sent, n-sent))
	sent += k
	if err == nil && sent < n {
		err = io.ErrUnexpectedEOF
	}
	return sent, err
}

// CopyToFile reads exactly n bytes from r and writes them to f at off,
// through buf (which must not be empty). It returns how many bytes it
// consumed from r.
func CopyToFile(r io.Reader, f *os.File, off, n int64, buf []byte) (int64, error) {
	var done int64
	for done < n {
		k, err := r.Read(buf[:min(int64(len(buf)), n-done)])
		if k > 0 {
			if _, werr := f.WriteAt(buf[:k], off+done); werr != nil {
				return done + int64(k), werr
			}
			done += int64(k)
		}
		if err != nil {
			if errors.Is(err, io.EOF) && done < n {
				err = io.ErrUnexpectedEOF
			}
			if done == n {
				return done, nil
			}
			return done, err
		}
	}
	return done, nil
}

// local reports whether nc's peer is on this host.
func local(nc net.Conn) bool {
	switch a := nc.RemoteAddr().(type) {
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		if a.IP.IsLoopback() {
			return true
		}
		if l, ok := nc.LocalAddr().(*net.TCPAddr); ok {
			return l.IP.Equal(a.IP)
		}
	}
	return false
}

// mapWindow bounds one mapping of writeMapped.
const mapWindow = 256 << 20

// writeMapped writes the section from read-only mappings of the file, a
// window at a time. ok is false if the file cannot be mapped (a pipe, a
// special file): nothing was written and the caller falls back.
func writeMapped(nc net.Conn, f *os.File, off, n int64) (sent int64, err error, ok bool) {
	if m, size := maps.acquire(f, n); m != nil {
		defer maps.release(m)
		if off+n > size {
			return 0, io.ErrUnexpectedEOF, true
		}
		k, err := nc.Write(m.data[off : off+n])
		return int64(k), err, true
	}
	pg := int64(os.Getpagesize())
	fc, err := f.SyscallConn()
	if err != nil {
		return 0, nil, false
	}
	for sent < n {
		w := min(n-sent, mapWindow)
		o := off + sent
		aoff := o &^ (pg - 1)
		delta := o - aoff
		var m []byte
		var merr error
		if cerr := fc.Control(func(fd uintptr) {
			m, merr = unix.Mmap(int(fd), aoff, int(w+delta), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
		}); cerr != nil {
			merr = cerr
		}
		if merr != nil {
			if sent == 0 {
				return 0, nil, false
			}
			return sent, merr, true
		}
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) == nil && st.Size < o+w {
			// Touching a mapping past the end of the file faults the
			// process: never write what is not there.
			_ = unix.Munmap(m)
			return sent, io.ErrUnexpectedEOF, true
		}
		k, werr := nc.Write(m[delta : delta+w])
		_ = unix.Munmap(m)
		sent += int64(k)
		if werr != nil {
			return sent, werr, true
		}
	}
	return sent, nil, true
}

// Tune sets what a pdc connection wants of a TCP socket: no Nagle delay,
// keepalives that find a vanished peer, and a bound (stall) on how long
// sent data may stay unacknowledged, including a peer's zero window, after
// which the kernel fails the connection. A Unix socket gets a deeper send
// buffer instead (see unixBuffer).
func Tune(nc net.Conn, stall time.Duration) {
	if uc, ok := nc.(*net.UnixConn); ok {
		_ = uc.SetWriteBuffer(unixBuffer)
		return
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return
	}
	_ = tc.SetNoDelay(true)
	_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 10 * time.Second, Count: 3})
	if rc, err := tc.SyscallConn(); err == nil && stall > 0 {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(stall/time.Millisecond))
		})
	}
}

// unixBuffer is the send buffer asked for on a Unix socket (the kernel
// doubles it, and caps it at net.core.wmem_max). A Unix stream socket
// holds no more than its sender's buffer in flight, 208 KiB by default:
// a data server storing one bufferful of a request's bytes left the
// client waiting on a full socket, where TCP's buffers of several MiB
// keep it sending.
const unixBuffer = 2 << 20

// AppendAdjacent appends b to bufs, as an extension of the last buffer
// when b continues it in memory (the regions of one buffer, in order), so
// that a vectored write of thousands of them takes a few iovecs.
func AppendAdjacent(bufs [][]byte, b []byte) [][]byte {
	if k := len(bufs); k > 0 && len(b) > 0 {
		last := bufs[k-1]
		if n := len(last); n > 0 && cap(last)-n >= len(b) && &last[:n+1][n] == &b[0] {
			bufs[k-1] = last[:n+len(b)]
			return bufs
		}
	}
	return append(bufs, b)
}
