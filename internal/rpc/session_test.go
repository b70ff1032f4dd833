package rpc

import (
	"sync/atomic"
	"testing"
)

// TestSessionEndBeforeNextSession: a client that connects again while the
// end of its last session is handled (OnSessionEnd: a data server drops
// the client's transfers and lane there) is admitted only once that is
// done, so the end never runs while the client has a session, and never
// takes what the new one made. A client's waited start that meets a reset
// connection goes again at once on a new one, as the end of the old
// session is handled.
func TestSessionEndBeforeNextSession(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	live := make(chan int, 1) // c's sessions as the end of its first returned
	waiting := make(chan struct{}, 1)
	var ends atomic.Int32
	var ts *testServer
	ts = startServer(t, "tcp", ServerConfig{OnSessionEnd: func(client string) {
		if client != "c" || ends.Add(1) != 1 {
			return // only the first end is held
		}
		close(entered)
		<-release
		ts.mu.Lock()
		n := ts.mu.sessions[client]
		ts.mu.Unlock()
		live <- n
	}}, func(ts *testServer) {
		ts.admitWait = func(string) {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	})
	a := dial(t, ts.addr, DialOptions{ClientName: "c"})
	if _, err := a.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	a.Close()
	<-entered // the end of c's session is being handled
	type dialed struct {
		c   *Conn
		err error
	}
	got := make(chan dialed, 1)
	go func() {
		c, err := dialAny(ctx10(t), ts.addr, DialOptions{ClientName: "c"})
		got <- dialed{c, err}
	}()
	select {
	case d := <-got:
		close(release)
		if d.c != nil {
			d.c.Close()
		}
		t.Fatalf("a new session of c was admitted (%v) while the end of its last one was handled", d.err)
	case <-waiting:
	}
	close(release)
	if n := <-live; n != 0 {
		t.Fatalf("c had %d sessions when the end of its last one returned, want 0", n)
	}
	d := <-got
	if d.err != nil {
		t.Fatal(d.err)
	}
	defer d.c.Close()
	if _, err := d.c.Call(ctx10(t), methodEcho, nil, nil, nil); err != nil {
		t.Fatalf("the new session: %v", err)
	}
}
