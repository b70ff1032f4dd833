package rpc

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Methods of TestHandleOptions, one per registration.
const (
	methodPlain wire.Method = 130 + iota
	methodInlineOnly
	methodInlineUpTo
	methodOwns
	methodHereInline
)

// where answers where a request ran: "inline" on the goroutine that read
// it (its stack goes through readRequest), "own" on a goroutine of its
// own, and whether it owned its payload.
func where(ctx context.Context, req *Request) (*Response, error) {
	s := "own"
	stack := make([]byte, 64<<10)
	stack = stack[:runtime.Stack(stack, false)]
	if bytes.Contains(stack, []byte("(*serverConn).readRequest")) {
		s = "inline"
	}
	if req.Release != nil {
		req.Release()
		s += " owned"
	}
	return &Response{Header: []byte(s)}, nil
}

// Each option of Handle puts the handler where it says, and lets in the
// payloads it says; TryHere keeps the requests it declines off the reading
// goroutine even when Inline is given too.
func TestHandleOptions(t *testing.T) {
	ts := startServer(t, "mem", ServerConfig{}, func(ts *testServer) {
		ts.Handle(methodPlain, where)
		ts.Handle(methodInlineOnly, where, Inline())
		ts.Handle(methodInlineUpTo, where, InlineUpTo(8), WithPayload())
		ts.Handle(methodOwns, where, OwnsPayload())
		ts.Handle(methodHereInline, where, Inline(), TryHere(func(ctx context.Context, req *Request) (*Response, error) {
			return nil, ErrElsewhere
		}))
	})
	c := dial(t, ts.addr, DialOptions{})
	payload := [][]byte{[]byte("data")}
	for _, tc := range []struct {
		name    string
		m       wire.Method
		hdr     string
		payload [][]byte
		want    string // the answer, or the error's sentinel text
		err     error
	}{
		{"default", methodPlain, "", nil, "own", nil},
		{"default refuses a payload", methodPlain, "", payload, "", pdc.ErrInvalid},
		{"inline", methodInlineOnly, "", nil, "inline", nil},
		{"inline up to, short header", methodInlineUpTo, "12345678", nil, "inline", nil},
		{"inline up to, long header", methodInlineUpTo, "123456789", nil, "own", nil},
		{"inline up to, with a payload", methodInlineUpTo, "", payload, "own", nil},
		{"owns its payload", methodOwns, "", payload, "own owned", nil},
		{"declined here, never inline", methodHereInline, "", payload, "own owned", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.Call(ctx10(t), tc.m, []byte(tc.hdr), tc.payload, nil)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(r.Header); got != tc.want {
				t.Fatalf("ran %q, want %q", got, tc.want)
			}
		})
	}
	if strings.Contains(ts.logs.String(), "panic") {
		t.Fatalf("server logged a panic:\n%s", ts.logs)
	}
}
