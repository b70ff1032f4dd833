package rpc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// A reply whose header is longer than a client accepts fails that call
// with ErrTooLarge naming the method, and the connection serves the next
// call. Before, the client refused the frame and dropped the connection,
// failing every call on it ("frame header of ... bytes exceeds the
// limit").
func TestOversizedReplyFailsOnlyItsCall(t *testing.T) {
	const methodBig wire.Method = 110
	done := make(chan struct{}, 1)
	ts := startServer(t, "mem", ServerConfig{}, func(ts *testServer) {
		ts.Handle(methodBig, func(ctx context.Context, req *Request) (*Response, error) {
			return &Response{Header: make([]byte, wire.DefaultMaxHeader+1), Done: func() { done <- struct{}{} }}, nil
		})
	})
	c := dial(t, ts.addr, DialOptions{})
	_, err := c.Call(ctx10(t), methodBig, nil, nil, nil)
	if !errors.Is(err, pdc.ErrTooLarge) || !strings.Contains(err.Error(), "reply header of 1048577 bytes") {
		t.Fatalf("oversized reply: %v", err)
	}
	select {
	case <-done:
	case <-ctx10(t).Done():
		t.Fatal("the dropped reply's Done was not called")
	}
	rep, err := c.Call(ctx10(t), methodEcho, []byte("next"), nil, nil)
	if err != nil || string(rep.Header) != "next" {
		t.Fatalf("the call after: %q, %v", rep.Header, err)
	}
}
