package rpc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdcgo/pdc"
	"golang.org/x/sys/unix"
)

const methodMapped = 0x7ff0

// An answer whose payload is a mapping of a file cut since (a data
// server's view of an object shrunk while the answer waited to be sent)
// fails that request with ErrStale: before, copying it into the
// connection's buffer faulted and killed the server.
func TestPayloadOfACutMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mapped")
	if err := os.WriteFile(path, make([]byte, 1<<16), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 1<<16, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			ts := startServer(t, network, ServerConfig{}, func(ts *testServer) {
				ts.Handle(methodMapped, func(ctx context.Context, req *Request) (*Response, error) {
					if err := f.Truncate(0); err != nil {
						return nil, err
					}
					return &Response{Header: []byte("h"), Payload: [][]byte{m[100:4196]}}, nil
				})
			})
			c := dial(t, ts.addr, DialOptions{})
			_, err := c.Call(ctx10(t), methodMapped, nil, nil, nil)
			if !errors.Is(err, pdc.ErrStale) {
				t.Fatalf("an answer from a cut mapping: %v, want ErrStale", err)
			}
			if r, err := c.Call(ctx10(t), methodEcho, []byte("after"), nil, nil); err != nil || string(r.Header) != "after" {
				t.Fatalf("the connection after: %q, %v", r.Header, err)
			}
		})
	}
}
