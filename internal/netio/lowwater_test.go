package netio_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc/internal/netio"
)

func rcvLowat(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

// The mark follows what is certain to come: raised for a large rest,
// never past it, and back to 1 before what may be a single byte. A mark
// left above the bytes still coming would hold the last read until the
// failsafe deadline.
func TestLowWater(t *testing.T) {
	a, b := tcpPair(t)
	lw := netio.NewLowWater(b)
	_ = b.SetReadDeadline(time.Now().Add(failsafe))
	const n = 3<<20 + 12345
	payload := pattern(n)
	go func() {
		// In pieces, with the last one short, then one more byte.
		for p := payload; len(p) > 0; {
			k := min(len(p), 700<<10)
			if _, err := a.Write(p[:k]); err != nil {
				return
			}
			p = p[k:]
		}
		_, _ = a.Write([]byte{42})
	}()
	got := make([]byte, n)
	for done := 0; done < n; {
		lw.Expect(int64(n - done))
		if want := min(n-done, 2<<20); n-done >= 128<<10 && rcvLowat(t, b) != want {
			t.Fatalf("%d bytes to come: mark %d, want %d", n-done, rcvLowat(t, b), want)
		}
		k, err := b.Read(got[done:])
		if err != nil {
			t.Fatalf("after %d of %d bytes: %v", done, n, err)
		}
		done += k
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("read bytes differ from those sent")
	}
	lw.Expect(0)
	if v := rcvLowat(t, b); v != 1 {
		t.Fatalf("mark %d after Expect(0), want 1", v)
	}
	var one [1]byte
	if _, err := io.ReadFull(b, one[:]); err != nil || one[0] != 42 {
		t.Fatalf("the byte after the payload: %v %v", one, err)
	}

	// Other connections are left alone.
	u, _ := unixPair(t)
	ul := netio.NewLowWater(u)
	ul.Expect(1 << 20) // does nothing, and must not panic
}

// A Unix socket gets a send buffer of 2 MiB, as far as the system allows:
// at the default, a writer could have 208 KiB in flight.
func TestTuneDeepensUnixSendBuffer(t *testing.T) {
	u, _ := unixPair(t)
	netio.Tune(u, time.Minute)
	rc, err := u.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	if err := rc.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) }); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	want := 2 * (2 << 20) // the kernel doubles what is asked
	if b, err := os.ReadFile("/proc/sys/net/core/wmem_max"); err == nil {
		var max int
		if _, err := fmt.Sscan(string(b), &max); err == nil {
			want = min(want, 2*max)
		}
	}
	if got < want {
		t.Fatalf("send buffer %d after Tune, want %d", got, want)
	}
}
