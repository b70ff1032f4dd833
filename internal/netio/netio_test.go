package netio_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc/internal/netio"
)

// failsafe bounds every wait so that a bug fails the test instead of
// hanging it; it never orders events.
const failsafe = 10 * time.Second

// A pair is two connected ends: the tests write on a and read on b.
type pair struct {
	name string
	make func(t *testing.T) (a, b net.Conn)
}

func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		a.Close()
		t.Fatal(r.err)
	}
	t.Cleanup(func() { a.Close(); r.c.Close() })
	return a, r.c
}

func unixPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close() // FileConn holds its own duplicate
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// remoteConn is a loopback TCP connection that claims a peer on another
// host, so that SendFile takes its sendfile(2) path rather than writing
// from a mapping.
type remoteConn struct{ *net.TCPConn }

func (remoteConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 5} // TEST-NET-1
}
func (remoteConn) LocalAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 2), Port: 6} }

func remotePair(t *testing.T) (net.Conn, net.Conn) {
	a, b := tcpPair(t)
	return remoteConn{a.(*net.TCPConn)}, b
}

// pipePair has no descriptor: SendFile falls back to a copy.
func pipePair(t *testing.T) (net.Conn, net.Conn) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

var socketPairs = []pair{{"tcp", tcpPair}, {"unix", unixPair}}

var sendFilePairs = []pair{
	{"tcp-loopback", tcpPair},
	{"unix", unixPair},
	{"tcp-remote", remotePair},
	{"pipe", pipePair},
}

func pattern(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func tempFile(t *testing.T, data []byte) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// readAll reads b until end of file in the background.
func readAll(b net.Conn) <-chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		got, _ := io.ReadAll(b)
		ch <- got
	}()
	return ch
}

func recv(t *testing.T, ch <-chan []byte) []byte {
	t.Helper()
	select {
	case got := <-ch:
		return got
	case <-time.After(failsafe):
		t.Fatal("the reading side never saw the end of the stream")
		return nil
	}
}

func TestSendFile(t *testing.T) {
	const mib = 1 << 20
	data := pattern(2*mib + 4099)
	size := int64(len(data))
	f := tempFile(t, data)

	type section struct{ off, n int64 }
	ok := []section{
		{0, 0},
		{size, 0}, // empty, at the end
		{0, 1},
		{1, 1},
		{4095, 1},
		{size - 1, 1},
		{3, mib + 3},
		{4097, mib + 3},
		{size - (mib + 3), mib + 3}, // up to the last byte
		{0, size},
	}
	short := []section{
		{size - 10, 20},    // runs off the end
		{size - 1, 2},      // by one byte
		{size, 1},          // starts at the end
		{size + 4097, 1},   // starts beyond it
		{5, size},          // a big section a little too long
		{1 << 40, mib + 3}, // far beyond
	}

	for _, p := range sendFilePairs {
		t.Run(p.name, func(t *testing.T) {
			for _, s := range ok {
				a, b := p.make(t)
				got := readAll(b)
				n, err := netio.SendFile(context.Background(), a, f, s.off, s.n)
				a.Close()
				if err != nil || n != s.n {
					t.Fatalf("SendFile(off %d, n %d) = %d, %v; want %d, nil", s.off, s.n, n, err, s.n)
				}
				if g := recv(t, got); !bytes.Equal(g, data[s.off:s.off+s.n]) {
					t.Fatalf("SendFile(off %d, n %d): peer got %d bytes, not the section", s.off, s.n, len(g))
				}
			}
			for _, s := range short {
				a, b := p.make(t)
				got := readAll(b)
				n, err := netio.SendFile(context.Background(), a, f, s.off, s.n)
				a.Close()
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("SendFile(off %d, n %d) past the end (%d): %d, %v; want io.ErrUnexpectedEOF", s.off, s.n, size, n, err)
				}
				avail := max(0, min(size-s.off, s.n))
				if n < 0 || n > avail {
					t.Fatalf("SendFile(off %d, n %d) past the end: reports %d bytes sent, only %d exist", s.off, s.n, n, avail)
				}
				// Whatever went out is what the file holds there.
				g := recv(t, got)
				if int64(len(g)) != n {
					t.Fatalf("SendFile(off %d, n %d) past the end: reports %d bytes sent, the peer got %d", s.off, s.n, n, len(g))
				}
				if len(g) > 0 && !bytes.Equal(g, data[s.off:s.off+n]) {
					t.Fatalf("SendFile(off %d, n %d) past the end: the peer got %d bytes that are not the file's", s.off, s.n, len(g))
				}
			}
		})
	}
}

// sparseFile is a file of n bytes that uses no disk.
func sparseFile(t *testing.T, n int64) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
	return f
}

// waitReadable blocks until c has bytes to read: the writer has started.
func waitReadable(t *testing.T, c net.Conn) {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var perr error
	if err := rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, perr = unix.Poll(fds, int(failsafe/time.Millisecond))
			if perr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if perr != nil || n != 1 {
		t.Fatalf("poll: %d, %v: nothing ever arrived", n, perr)
	}
}

// waitDrained waits until c's receive queue is empty: the reader has taken
// what was there (and is presumably blocked for more). It only makes the
// interesting interleaving likely; the assertions hold in any.
func waitDrained(t *testing.T, c net.Conn) {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(failsafe)
	for time.Now().Before(deadline) {
		var queued int
		var qerr error
		if err := rc.Control(func(fd uintptr) { queued, qerr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil || qerr != nil {
			return // cannot tell; cancel whenever
		}
		if queued == 0 {
			return
		}
		runtime.Gosched()
	}
}

type result struct {
	n   int64
	err error
}

func wait(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(failsafe):
		t.Fatal("the operation did not return after its context ended")
		return result{}
	}
}

func TestSendFileCanceled(t *testing.T) {
	const size = 32 << 20 // far more than the socket buffers hold
	f := sparseFile(t, size)
	for _, p := range []pair{{"tcp-loopback", tcpPair}, {"unix", unixPair}, {"tcp-remote", remotePair}} {
		t.Run(p.name, func(t *testing.T) {
			a, b := p.make(t) // b never reads
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch := make(chan result, 1)
			go func() {
				n, err := netio.SendFile(ctx, a, f, 0, size)
				ch <- result{n, err}
			}()
			waitReadable(t, b)
			cancel()
			r := wait(t, ch)
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("SendFile canceled: %d, %v; want context.Canceled", r.n, r.err)
			}
			if r.n >= size {
				t.Fatalf("SendFile canceled: all %d bytes reported sent to a peer that reads nothing", r.n)
			}
		})
	}
}

func TestWriteFullReadFull(t *testing.T) {
	for _, p := range socketPairs {
		t.Run(p.name, func(t *testing.T) {
			a, b := p.make(t)
			bufs := [][]byte{[]byte("head"), {}, pattern(1<<20 + 3), []byte("tail")}
			var want []byte
			for _, buf := range bufs {
				want = append(want, buf...)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make([]byte, len(want))
			ch := make(chan result, 1)
			go func() {
				n, err := netio.ReadFull(ctx, b, got)
				ch <- result{int64(n), err}
			}()
			n, err := netio.WriteFull(ctx, a, bufs...)
			if err != nil || n != int64(len(want)) {
				t.Fatalf("WriteFull = %d, %v; want %d, nil", n, err, len(want))
			}
			r := wait(t, ch)
			if r.err != nil || r.n != int64(len(want)) || !bytes.Equal(got, want) {
				t.Fatalf("ReadFull = %d, %v (equal %v); want %d", r.n, r.err, bytes.Equal(got, want), len(want))
			}

			// A context that ends after the operations leaves the
			// connection alone: no deadline was left behind.
			cancel()
			if _, err := netio.WriteFull(context.Background(), a, []byte("again")); err != nil {
				t.Fatalf("WriteFull after a late cancel: %v", err)
			}
			var again [5]byte
			if _, err := netio.ReadFull(context.Background(), b, again[:]); err != nil || string(again[:]) != "again" {
				t.Fatalf("ReadFull after a late cancel: %q, %v", again, err)
			}

			// End of stream before p is full: io.ErrUnexpectedEOF, with
			// no context in the error.
			if _, err := netio.WriteFull(context.Background(), a, []byte("abc")); err != nil {
				t.Fatal(err)
			}
			a.Close()
			var short [10]byte
			k, err := netio.ReadFull(context.Background(), b, short[:])
			if k != 3 || !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.Canceled) {
				t.Fatalf("ReadFull at end of stream: %d, %v; want 3, io.ErrUnexpectedEOF", k, err)
			}
		})
	}
}

func TestWriteFullCanceled(t *testing.T) {
	big := make([]byte, 32<<20) // far more than the socket buffers hold
	total := int64(len(big) + 5)
	cause := errors.New("transfer abandoned")
	for _, p := range socketPairs {
		for _, withCause := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/cause=%v", p.name, withCause), func(t *testing.T) {
				a, b := p.make(t) // b never reads
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				ch := make(chan result, 1)
				go func() {
					n, err := netio.WriteFull(ctx, a, []byte("hello"), big)
					ch <- result{n, err}
				}()
				waitReadable(t, b)
				want := context.Canceled
				if withCause {
					cancel(cause)
					want = cause
				} else {
					cancel(nil)
				}
				r := wait(t, ch)
				if !errors.Is(r.err, want) {
					t.Fatalf("WriteFull canceled: %d, %v; want %v", r.n, r.err, want)
				}
				if !errors.Is(r.err, os.ErrDeadlineExceeded) {
					t.Fatalf("WriteFull canceled: %v does not carry the interrupted write's error", r.err)
				}
				if r.n >= total {
					t.Fatalf("WriteFull canceled: all %d bytes reported written to a peer that reads nothing", r.n)
				}
			})
		}
	}
}

func TestReadFullCanceled(t *testing.T) {
	for _, p := range socketPairs {
		for _, early := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/canceled-before=%v", p.name, early), func(t *testing.T) {
				a, b := p.make(t)
				// The peer sends part of what is asked for, then nothing.
				if _, err := a.Write([]byte("0123456789")); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if early {
					cancel()
				}
				buf := make([]byte, 100)
				ch := make(chan result, 1)
				go func() {
					n, err := netio.ReadFull(ctx, b, buf)
					ch <- result{int64(n), err}
				}()
				if !early {
					waitDrained(t, b)
					cancel()
				}
				r := wait(t, ch)
				if !errors.Is(r.err, context.Canceled) {
					t.Fatalf("ReadFull canceled: %d, %v; want context.Canceled", r.n, r.err)
				}
				if r.n > 10 || string(buf[:r.n]) != "0123456789"[:r.n] {
					t.Fatalf("ReadFull canceled: %d bytes %q; want a prefix of what was sent", r.n, buf[:r.n])
				}
			})
		}
	}
}

// TestCopyToFile checks CopyToFile copies exactly n bytes from any reader
// to the offset, and reports short reads, read errors and write errors.
func TestCopyToFile(t *testing.T) {
	src := pattern(10007)

	t.Run("exact", func(t *testing.T) { checkCopyToFileExact(t, src) })

	t.Run("consumes exactly n", func(t *testing.T) {
		f := newOutFile(t)
		r := bytes.NewReader(src)
		n, err := netio.CopyToFile(r, f, 0, 1000, make([]byte, 4096))
		if err != nil || n != 1000 {
			t.Fatalf("CopyToFile = %d, %v", n, err)
		}
		if r.Len() != len(src)-1000 {
			t.Fatalf("consumed %d bytes of the reader, want 1000", len(src)-r.Len())
		}
		if got := fileBytes(t, f); !bytes.Equal(got, src[:1000]) {
			t.Fatalf("file holds %d bytes", len(got))
		}
	})

	t.Run("zero", func(t *testing.T) {
		f := newOutFile(t)
		n, err := netio.CopyToFile(iotest.ErrReader(errors.New("read when nothing was asked")), f, 10, 0, make([]byte, 8))
		if err != nil || n != 0 {
			t.Fatalf("CopyToFile of 0 bytes = %d, %v", n, err)
		}
	})

	t.Run("short", func(t *testing.T) {
		f := newOutFile(t)
		n, err := netio.CopyToFile(bytes.NewReader(src[:60]), f, 3, 100, make([]byte, 16))
		if n != 60 || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("CopyToFile from a short reader = %d, %v; want 60, io.ErrUnexpectedEOF", n, err)
		}
		if got := fileBytes(t, f); !bytes.Equal(got[3:], src[:60]) {
			t.Fatal("the bytes read before the end were not written")
		}
	})

	t.Run("read error", func(t *testing.T) {
		f := newOutFile(t)
		errBroken := errors.New("broken")
		r := io.MultiReader(bytes.NewReader(src[:50]), iotest.ErrReader(errBroken))
		n, err := netio.CopyToFile(r, f, 0, 100, make([]byte, 16))
		if n != 50 || !errors.Is(err, errBroken) {
			t.Fatalf("CopyToFile = %d, %v; want 50, %v", n, err, errBroken)
		}
		n, err = netio.CopyToFile(iotest.TimeoutReader(bytes.NewReader(src)), f, 0, 100, make([]byte, 64))
		if n != 64 || !errors.Is(err, iotest.ErrTimeout) {
			t.Fatalf("CopyToFile = %d, %v; want 64, %v", n, err, iotest.ErrTimeout)
		}
	})

	t.Run("from a socket", func(t *testing.T) { checkCopyToFileFromSocket(t) })

	t.Run("write error", func(t *testing.T) {
		ro := tempFile(t, nil) // opened read-only
		n, err := netio.CopyToFile(bytes.NewReader(src), ro, 0, 100, make([]byte, 16))
		if err == nil {
			t.Fatalf("CopyToFile into a read-only file = %d, nil", n)
		}
		if n > 16 {
			t.Fatalf("CopyToFile went on reading after a failed write: consumed %d", n)
		}
	})
}

// checkCopyToFileExact checks CopyToFile writes all n bytes at the offset, whatever pieces the reader returns.
func checkCopyToFileExact(t *testing.T, src []byte) {
	for _, tc := range []struct {
		name string
		r    func() io.Reader
	}{
		{"reader", func() io.Reader { return bytes.NewReader(src) }},
		{"one-byte", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(src)) }},
		{"half", func() io.Reader { return iotest.HalfReader(bytes.NewReader(src)) }},
		{"data-with-eof", func() io.Reader { return iotest.DataErrReader(bytes.NewReader(src)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newOutFile(t)
			const off = 4099
			n, err := netio.CopyToFile(tc.r(), f, off, int64(len(src)), make([]byte, 7))
			if err != nil || n != int64(len(src)) {
				t.Fatalf("CopyToFile = %d, %v; want %d, nil", n, err, len(src))
			}
			got := fileBytes(t, f)
			if len(got) != off+len(src) || !bytes.Equal(got[off:], src) || !bytes.Equal(got[:off], make([]byte, off)) {
				t.Fatalf("file holds %d bytes, not the data at %d", len(got), off)
			}
		})
	}
}

// checkCopyToFileFromSocket checks CopyToFile copies from a socket and leaves what follows the n bytes unread.
func checkCopyToFileFromSocket(t *testing.T) {
	a, b := unixPair(t)
	f := newOutFile(t)
	want := pattern(1<<20 + 3)
	ch := make(chan error, 1)
	go func() {
		_, err := netio.WriteFull(context.Background(), a, want, []byte("trailing"))
		ch <- err
	}()
	n, err := netio.CopyToFile(b, f, 1, int64(len(want)), make([]byte, 32<<10))
	if err != nil || n != int64(len(want)) {
		t.Fatalf("CopyToFile = %d, %v", n, err)
	}
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	if got := fileBytes(t, f); !bytes.Equal(got[1:], want) {
		t.Fatal("file does not hold what was sent")
	}
	var rest [8]byte
	if _, err := io.ReadFull(b, rest[:]); err != nil || string(rest[:]) != "trailing" {
		t.Fatalf("what follows the n bytes: %q, %v", rest, err)
	}
}

// newOutFile creates an empty file for CopyToFile to write into.
func newOutFile(t *testing.T) *os.File {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// fileBytes reads back what the file holds.
func fileBytes(t *testing.T, f *os.File) []byte {
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A file sent again is sent from a cached mapping: the bytes must still be
// the file's current ones after it is rewritten in place, grown or shrunk.
func TestSendFileSeesChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data")
	send := func(n int64) []byte {
		t.Helper()
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		a, b := tcpPair(t)
		ch := readAll(b)
		k, err := netio.SendFile(context.Background(), a, f, 0, n)
		a.Close()
		got := recv(t, ch)
		if err != nil || k != n {
			t.Fatalf("SendFile of %d bytes: %d, %v", n, k, err)
		}
		return got
	}
	for i, data := range [][]byte{pattern(1 << 20), bytes.Repeat([]byte{7}, 1<<20), pattern(3 << 20), bytes.Repeat([]byte{9}, 4096)} {
		// Rewrite in place (same inode), changing the size in some rounds.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for range 2 {
			if got := send(int64(len(data))); !bytes.Equal(got, data) {
				t.Fatalf("round %d: sent bytes differ from the file's (%d bytes)", i, len(got))
			}
		}
	}
}
