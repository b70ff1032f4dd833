package rpc

import (
	"context"
	"io"
	"sync"
	"testing"

	"github.com/pdcgo/pdc/internal/wire"
)

const methodTurns wire.Method = 112

// Requests of a TryHere method take turns in the order they came:
// a here handler sees that an earlier request it declined has not ended
// its turn (Behind), and the later request's h waits for it (WaitTurn)
// even though it runs on a goroutine of its own; a turn ends when its h
// returns.
func TestTurnsKeepArrivalOrder(t *testing.T) {
	var mu sync.Mutex
	var log []string
	note := func(s string) {
		mu.Lock()
		log = append(log, s)
		mu.Unlock()
	}
	gate := make(chan struct{})
	secondDeclined := make(chan bool, 1)
	ts := startServer(t, "mem", ServerConfig{}, func(ts *testServer) {
		ts.Handle(methodTurns, func(ctx context.Context, req *Request) (*Response, error) {
			defer req.Release()
			if string(req.Header) == "first" {
				<-gate // the first one's turn stays open until the test says
			} else if err := req.WaitTurn(ctx); err != nil {
				return nil, err
			}
			note(string(req.Header))
			return &Response{}, nil
		}, TryHere(func(ctx context.Context, req *Request) (*Response, error) {
			if string(req.Header) == "first" {
				return nil, ErrElsewhere
			}
			behind := req.Behind()
			secondDeclined <- behind
			if behind {
				return nil, ErrElsewhere
			}
			_, _ = io.Copy(io.Discard, req.Body)
			note(string(req.Header))
			return &Response{}, nil
		}))
	})
	c := dial(t, ts.addr, DialOptions{})
	first, err := c.Send(ctx10(t), methodTurns, []byte("first"), [][]byte{[]byte("a")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Send(ctx10(t), methodTurns, []byte("second"), [][]byte{[]byte("b")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !<-secondDeclined {
		t.Fatal("the second request's here handler did not see the first one's turn open")
	}
	mu.Lock()
	early := len(log)
	mu.Unlock()
	if early != 0 {
		t.Fatalf("%d requests handled while the first one's turn was open", early)
	}
	close(gate)
	for _, p := range []*Pending{first, second} {
		if _, err := p.Wait(ctx10(t)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	got := append([]string(nil), log...)
	mu.Unlock()
	if len(got) != 2 || got[0] != "first" || got[1] != "second" {
		t.Fatalf("handled in the order %v, want [first second]", got)
	}
	// With no turn open, here answers at once.
	third, err := c.Send(ctx10(t), methodTurns, []byte("third"), [][]byte{[]byte("c")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if <-secondDeclined {
		t.Fatal("a request was declined with no earlier turn open")
	}
	if _, err := third.Wait(ctx10(t)); err != nil {
		t.Fatal(err)
	}
}
