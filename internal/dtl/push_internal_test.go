package dtl

import (
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// A push listener whose accept fails for want of descriptors (EMFILE) must
// go on accepting once there are some again: it stays registered for the
// receiver's pushes, and a listener that stopped accepting leaves every
// later push unread, its fetch waiting until its deadline.
func TestPushListenerSurvivesTooManyFiles(t *testing.T) {
	r, err := NewReceiver(ReceiverConfig{Mode: ModePush, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pl, err := r.pushListener(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}

	restore := lowerFileLimit(t)
	defer restore()
	// Use up every descriptor, then free one for the dial: the listener's
	// accept of that connection finds none left.
	var fill []*os.File
	defer func() {
		for _, f := range fill {
			f.Close()
		}
	}()
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		fill = append(fill, f)
	}
	if len(fill) == 0 {
		t.Fatal("no descriptor to free for the dial")
	}
	fill[len(fill)-1].Close()
	fill = fill[:len(fill)-1]
	nc, err := net.Dial("tcp", pl.addr)
	if err != nil {
		t.Fatalf("dial the push listener with one descriptor free: %v", err)
	}
	defer nc.Close()
	// Give the listener's accept the moment it needs to fail.
	time.Sleep(100 * time.Millisecond)
	for _, f := range fill {
		f.Close()
	}
	fill = nil
	restore()

	// A bad header: a listener serving the connection refuses it and
	// closes; one that stopped accepting says nothing.
	if _, err := nc.Write(make([]byte, requestSize)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(nc)
	if len(b) < answerSize {
		t.Fatalf("the push listener did not serve a connection after an accept failed for want of descriptors: read %q, %v", b, err)
	}
}

// lowerFileLimit lowers the descriptor limit to a few above those open now
// so the test can use them all up cheaply; the returned restore puts the
// old limit back and may be called more than once.
func lowerFileLimit(t *testing.T) (restore func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	low := old
	low.Cur = uint64(len(ents) + 32)
	if low.Cur > old.Cur {
		t.Skipf("the descriptor limit %d is too low already", old.Cur)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip("cannot lower the descriptor limit:", err)
	}
	restored := false
	restore = func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
				t.Fatal(err)
			}
		}
	}
	return restore
}
