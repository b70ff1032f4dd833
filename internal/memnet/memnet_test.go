package memnet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair returns both ends of a new connection of ln.
func pair(t *testing.T, ln *Listener) (client, server net.Conn) {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := ln.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() {
		client.Close()
		server.Close()
	})
	return client, server
}

// Bytes arrive whole and in order both ways, also when one side writes
// many times what the connection holds.
func TestBytesArriveInOrder(t *testing.T) {
	ln := ListenBuffer("order", 1000)
	defer ln.Close()
	client, server := pair(t, ln)
	if got := server.RemoteAddr().String(); got != "mem:client" {
		t.Errorf("server end's remote address %q", got)
	}
	if got := client.RemoteAddr().String(); got != "mem:order" {
		t.Errorf("client end's remote address %q", got)
	}
	want := make([]byte, 100_000)
	for i := range want {
		want[i] = byte(i * 7)
	}
	for _, dir := range []struct {
		name string
		w, r net.Conn
	}{{"client to server", client, server}, {"server to client", server, client}} {
		t.Run(dir.name, func(t *testing.T) {
			wrote := make(chan error, 1)
			go func() {
				_, err := dir.w.Write(want)
				wrote <- err
			}()
			got := make([]byte, len(want))
			if _, err := io.ReadFull(dir.r, got); err != nil {
				t.Fatal(err)
			}
			if err := <-wrote; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("bytes changed on the way")
			}
		})
	}
}

// A writer waits for its reader once the connection holds its buffer,
// and a write deadline ends the wait with a timeout, saying how much
// went out.
func TestFullBufferWaitsUntilDeadline(t *testing.T) {
	ln := ListenBuffer("full", 10)
	defer ln.Close()
	client, _ := pair(t, ln)
	if err := client.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := client.Write(make([]byte, 25))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if n != 10 {
		t.Fatalf("wrote %d bytes, want the 10 the buffer holds", n)
	}
}

// A read deadline already past fails the next read at once, even with
// bytes waiting (as a socket's does); one moved into the past wakes a
// read blocked on an empty connection; cleared, reads work again.
func TestReadDeadlines(t *testing.T) {
	ln := Listen("deadlines")
	defer ln.Close()
	client, server := pair(t, ln)
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = server.SetReadDeadline(time.Unix(1, 0))
	if _, err := server.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: got %v, want a timeout", err)
	}
	_ = server.SetReadDeadline(time.Time{})
	b := make([]byte, 1)
	if _, err := server.Read(b); err != nil || b[0] != 'x' {
		t.Fatalf("read %q, %v; want x", b, err)
	}

	_ = server.SetReadDeadline(time.Now().Add(time.Hour))
	read := make(chan error, 1)
	go func() {
		_, err := server.Read(b)
		read <- err
	}()
	// Nothing can tell the read has blocked; either way it must end.
	_ = server.SetReadDeadline(time.Unix(1, 0))
	if err := <-read; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("blocked read: got %v, want a timeout", err)
	}
}

// Closing one end: the peer reads what was sent, then io.EOF, and its
// writes fail with EPIPE; the closed end's own calls fail with
// net.ErrClosed. Close is idempotent.
func TestClose(t *testing.T) {
	ln := Listen("close")
	defer ln.Close()
	client, server := pair(t, ln)
	if _, err := client.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	client.Close()
	client.Close()
	got, err := io.ReadAll(server)
	if err != nil || string(got) != "last words" {
		t.Fatalf("peer read %q, %v; want the bytes sent, then EOF", got, err)
	}
	if _, err := server.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to a closed peer: got %v, want EPIPE", err)
	}
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read of a closed end: got %v, want net.ErrClosed", err)
	}
	if _, err := client.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write to a closed end: got %v, want net.ErrClosed", err)
	}
}

// A closed listener stops Accept and refuses Dial; a Dial whose context
// ends before anyone accepts returns its context's error.
func TestListenerClose(t *testing.T) {
	ln := Listen("listener")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ln.Dial(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("dial with nobody accepting and ctx canceled: got %v", err)
	}
	ln.Close()
	ln.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept on a closed listener: got %v, want net.ErrClosed", err)
	}
	if _, err := ln.Dial(context.Background()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial of a closed listener: got %v, want ECONNREFUSED", err)
	}
}
