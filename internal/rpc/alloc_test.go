package rpc

import (
	"context"
	"testing"
)

// startInline serves an inline echo, as pdc's ping is, and dials it.
func startInline(tb testing.TB) *Conn { return startInlineWith(tb, nil) }

// startInlineWith is startInline with obs as the server's Observer.
func startInlineWith(tb testing.TB, obs Observer) *Conn {
	tb.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	secret := []byte("0123456789abcdef")
	s := NewServer(ServerConfig{Secret: secret, Observer: obs})
	s.Handle(methodInline, func(ctx context.Context, req *Request) (*Response, error) {
		return &Response{Payload: [][]byte{req.Payload}}, nil
	}, Inline(), WithPayload())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(ln)
	}()
	c, err := Dial(context.Background(), Addr(ln.Addr()), DialOptions{Secret: secret})
	if err != nil {
		s.Close()
		<-served
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.Close()
		s.Close()
		<-served
	})
	return c
}

// TestInlineRoundTripAllocs counts what one small round trip to an inline
// handler allocates, client and server together: the request as the
// server keeps it (one), its payload (one) and the handler's answer (two,
// the handler's own). Each allocation is paid on the round trip's
// critical path, and their garbage by collections that take a core.
// Before: 18 (the frame prefix on both sides, a receive-mark closure on
// both, the request's context, its closure, its remote address formatted
// twice, the payload reader, the write's interrupt flag).
func TestInlineRoundTripAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	c := startInline(t)
	msg, into := make([]byte, 64), make([]byte, 64)
	call := func() {
		if _, err := c.Call(context.Background(), methodInline, nil, [][]byte{msg}, into); err != nil {
			t.Fatal(err)
		}
	}
	call()
	// Counted over the whole process: what the server's goroutines
	// allocate for the call is the call's.
	if n := testing.AllocsPerRun(2000, call); n > 5 {
		t.Errorf("a 64-byte round trip to an inline handler allocates %v times; want at most 5 (4: the request, its payload, the handler's answer)", n)
	}
}

func BenchmarkInlineRoundTrip(b *testing.B) {
	c := startInline(b)
	msg, into := make([]byte, 64), make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Call(context.Background(), methodInline, nil, [][]byte{msg}, into); err != nil {
			b.Fatal(err)
		}
	}
}
