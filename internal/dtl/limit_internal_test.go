package dtl

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
)

// A peer that opens side-channel connections without end is refused past
// the bound, with an answer saying why, and one that stops half way
// through a request header is dropped after the stall timeout.
func TestPullListenerBoundsConnections(t *testing.T) {
	s, err := NewSender(SenderConfig{ShmDir: t.TempDir(), Logger: discard(), MaxConnsPerPeer: 2, Stall: 200 * time.Millisecond,
		Resolve: func(context.Context, []byte) (Source, error) { return Bytes(nil), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var held []net.Conn
	defer func() {
		for _, nc := range held {
			nc.Close()
		}
	}()
	for range 2 {
		nc, err := net.Dial("tcp", s.BulkAddr())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, nc)
	}
	// The bound counts connections the sender has taken: wait for both.
	deadline := time.Now().Add(10 * time.Second)
	for s.bulkLimit.Open() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the sender does not take the connections")
		}
		time.Sleep(time.Millisecond)
	}
	nc, err := net.Dial("tcp", s.BulkAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	_, remote, err := readAnswer(context.Background(), nc, magicPullAck)
	if err != nil || !errors.Is(remote, pdc.ErrUnavailable) || !strings.Contains(remote.Error(), "too many connections from 127.0.0.1") {
		t.Fatalf("answer to a connection beyond the bound: %v, %v; want ErrUnavailable saying why", remote, err)
	}
	// Half a header, then nothing: dropped.
	if _, err := held[0].Write([]byte(magicPull)); err != nil {
		t.Fatal(err)
	}
	_ = held[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, held[0]); err != nil {
		t.Fatalf("a stalled header: %v, want the connection closed", err)
	}
}
