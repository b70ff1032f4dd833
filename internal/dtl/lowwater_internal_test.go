package dtl

import (
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// markWatcher is a sink that records the receive low-water mark of the
// connection the payload arrives on, at each write.
type markWatcher struct {
	nc   *net.TCPConn
	max  int
	n    int64
	errs []error
}

func (m *markWatcher) mark() int {
	rc, err := m.nc.SyscallConn()
	if err != nil {
		m.errs = append(m.errs, err)
		return 0
	}
	v := 0
	_ = rc.Control(func(fd uintptr) {
		v, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT)
	})
	if err != nil {
		m.errs = append(m.errs, err)
	}
	return v
}

func (m *markWatcher) Write(p []byte) (int, error) {
	m.max = max(m.max, m.mark())
	m.n += int64(len(p))
	return len(p), nil
}

// A pulled payload is read with the receive low-water mark raised (the
// kernel wakes the reader per megabyte or two, not per segment), and the
// mark is back to 1 before the connection reads its next answer.
func TestPulledPayloadRaisesTheLowWaterMark(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const size = 16 << 20
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		a := answer{size: size}
		if _, err := nc.Write(a.put(nil, magicPullAck)); err != nil {
			return
		}
		payload := make([]byte, 1<<20)
		for sent := 0; sent < size; sent += len(payload) {
			if _, err := nc.Write(payload); err != nil {
				return
			}
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	w := &markWatcher{nc: nc.(*net.TCPConn)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, remote, err := readPulled(ctx, nc, size, IntoWriter(w))
	if err != nil || remote != nil || n != size || w.n != size {
		t.Fatalf("read %d (sink %d) of %d: %v %v", n, w.n, size, err, remote)
	}
	if w.max < 128<<10 {
		t.Errorf("the low-water mark was at most %d while the payload was read; want it raised", w.max)
	}
	if after := w.mark(); after != 1 {
		t.Errorf("the low-water mark is %d after the payload; want 1", after)
	}
	if len(w.errs) > 0 {
		t.Fatal(w.errs)
	}
}

// A payload read a piece at a time never waits for more than a piece: a
// consume that writes each quarter of a file while the next arrives would
// otherwise wait for the whole file before its first write.
func TestLowWaterMarkNeverAboveTheRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const size, piece = 1 << 20, 256 << 10
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		_, _ = nc.Write(make([]byte, size))
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	w := &markWatcher{nc: nc.(*net.TCPConn)}
	pr := newPayloadReader(nc, size)
	buf := make([]byte, piece)
	for got := 0; got < size; {
		n, err := pr.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		got += n
		if m := w.mark(); m > piece {
			t.Fatalf("after %d bytes the low-water mark is %d, above the %d-byte read", got, m, piece)
		}
	}
	pr.done()
	if len(w.errs) > 0 {
		t.Fatal(w.errs)
	}
}
