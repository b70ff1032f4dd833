package lane

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
)

// TestHandOver passes a lane over a real Unix socket and checks that both
// mappings see each other's bytes, and that the client cannot shrink it.
func TestHandOver(t *testing.T) {
	const size = 1 << 20
	f, mem, err := Create("test", size)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(mem)
	path := filepath.Join(t.TempDir(), "lane.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	token := bytes.Repeat([]byte{7}, TokenSize)
	done := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer nc.Close()
		hello := make([]byte, HelloSize)
		if _, err := nc.Read(hello); err != nil {
			done <- err
			return
		}
		if !bytes.Equal(hello[len(Magic):], token) {
			_, _ = nc.Write([]byte{AnswerUnknown})
			done <- nil
			return
		}
		done <- Send(nc.(*net.UnixConn), f)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := Fetch(ctx, path, token)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer got.Close()
	if err := got.Truncate(4096); err == nil {
		t.Fatal("the client shrank a sealed lane")
	}
	cmem, err := Map(got, size)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(cmem)
	copy(cmem[size-5:], "hello")
	if string(mem[size-5:]) != "hello" {
		t.Fatalf("the server's mapping reads %q", mem[size-5:])
	}
	if _, err := Map(got, size/2); !errors.Is(err, pdc.ErrProtocol) {
		t.Fatalf("mapping with the wrong size: %v, want ErrProtocol", err)
	}

	// A wrong token gets a clear refusal, not a hang.
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		hello := make([]byte, HelloSize)
		_, _ = nc.Read(hello)
		_, _ = nc.Write([]byte{AnswerUnknown})
	}()
	if _, err := Fetch(ctx, path, make([]byte, TokenSize)); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("unknown token: %v, want ErrNotFound", err)
	}
}
