package rpc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/wire"
)

// countObserver records what the server tells its Observer.
type countObserver struct {
	mu      sync.Mutex
	served  map[[2]uint32]int // method, code
	refused map[[2]uint32]int
	zero    int // served with no elapsed time
	started int
}

func newCountObserver() *countObserver {
	return &countObserver{served: map[[2]uint32]int{}, refused: map[[2]uint32]int{}}
}

func (o *countObserver) Served(m wire.Method, code wire.Code, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.served[[2]uint32{uint32(m), uint32(code)}]++
	if d <= 0 {
		o.zero++
	}
}

func (o *countObserver) Started(m wire.Method) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started++
}

func (o *countObserver) Refused(m wire.Method, code wire.Code) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused[[2]uint32{uint32(m), uint32(code)}]++
}

// TestObserverSeesEveryRequest checks that each request reaches the
// Observer once, with its method and outcome: on a goroutine of its own,
// inline, failed with a code, and refused before any handler.
func TestObserverSeesEveryRequest(t *testing.T) {
	obs := newCountObserver()
	ts := startServer(t, "mem", ServerConfig{Observer: obs})
	c := dial(t, ts.addr, DialOptions{})
	for range 3 {
		if _, err := c.Call(ctx10(t), methodEcho, nil, [][]byte{[]byte("x")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Call(ctx10(t), methodInline, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	eb := wire.ErrorBody{Code: wire.CodeNotFound, Message: "x"}
	if _, err := c.Call(ctx10(t), methodFail, eb.Marshal(nil), nil, nil); err == nil {
		t.Fatal("methodFail succeeded")
	}
	if _, err := c.Call(ctx10(t), 9999, nil, nil, nil); err == nil {
		t.Fatal("an unknown method succeeded")
	}
	// A payload to a method that takes none.
	if _, err := c.Call(ctx10(t), methodInline, nil, [][]byte{[]byte("x")}, nil); err == nil {
		t.Fatal("a payload to methodInline was taken")
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	want := map[[2]uint32]int{
		{uint32(methodEcho), uint32(wire.CodeOK)}:       3,
		{uint32(methodInline), uint32(wire.CodeOK)}:     1,
		{uint32(methodFail), uint32(wire.CodeNotFound)}: 1,
	}
	for k, n := range want {
		if obs.served[k] != n {
			t.Errorf("served method %d code %d: %d times, want %d", k[0], k[1], obs.served[k], n)
		}
	}
	if len(obs.served) != len(want) {
		t.Errorf("served %v, want only %v", obs.served, want)
	}
	wantRefused := map[[2]uint32]int{
		{9999, uint32(wire.CodeUnimplemented)}:           1,
		{uint32(methodInline), uint32(wire.CodeInvalid)}: 1,
	}
	for k, n := range wantRefused {
		if obs.refused[k] != n {
			t.Errorf("refused method %d code %d: %d times, want %d", k[0], k[1], obs.refused[k], n)
		}
	}
	if obs.started != 5 {
		t.Errorf("%d requests started, want the 5 served", obs.started)
	}
	if obs.zero != 0 {
		t.Errorf("%d requests served in no time: the start was not taken", obs.zero)
	}
	st := ts.Stats()
	if st.BytesIn == 0 || st.BytesOut == 0 || st.Conns != 1 {
		t.Errorf("stats %+v: want bytes both ways and one connection", st)
	}
}

// nopObserver is an Observer as cheap as the metrics' (atomic adds).
type nopObserver struct{ n [2]int64 }

func (o *nopObserver) Served(m wire.Method, code wire.Code, d time.Duration) { o.n[0] += int64(d) }
func (o *nopObserver) Refused(m wire.Method, code wire.Code)                 { o.n[1]++ }
func (o *nopObserver) Started(m wire.Method)                                 { o.n[1]++ }

// TestInlineRoundTripAllocsObserved holds the round trip's allocations
// with an Observer to what they are without one.
func TestInlineRoundTripAllocsObserved(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	c := startInlineWith(t, &nopObserver{})
	msg, into := make([]byte, 64), make([]byte, 64)
	call := func() {
		if _, err := c.Call(context.Background(), methodInline, nil, [][]byte{msg}, into); err != nil {
			t.Fatal(err)
		}
	}
	call()
	if n := testing.AllocsPerRun(2000, call); n > 5 {
		t.Errorf("an observed 64-byte round trip to an inline handler allocates %v times; want at most 5, as unobserved", n)
	}
}
