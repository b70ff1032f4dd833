package metaserver

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/rpc"
)

// TestFenceWaitsForARestartedServer: a tag acknowledged while the server
// of its index entries was down is found by a query once that server is
// back. The server comes back at once reachable and refusing index
// updates until it has started, then serves queries: a fence that took
// the refused try for the delivery it waits for let the query look there
// before the entries arrived (found by the crash loop: a search right
// after a restarted server rejoined missed a tag acknowledged while it
// was down).
func TestFenceWaitsForARestartedServer(t *testing.T) {
	c := newTestCluster(t, 2)
	id, key := c.createWithRemoteKey(0)
	c.setDown(1, true)
	c.put(id, key, "value")

	// Server 1 restarts: reachable, not started yet.
	c.svcs[1].Close()
	s, err := Open(Config{Dir: c.dirs[1], CheckpointDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c.svcs[1] = s
	s.SetPlacement(1, 2)
	c.setDown(1, false)

	// A client's query fences every server; server 0's fence tries its
	// delivery to server 1 again at once.
	fenced := make(chan error, 1)
	go func() {
		_, err := c.svcs[0].indexFence(context.Background(), &rpc.Request{})
		fenced <- err
	}()
	select {
	case err := <-fenced:
		fenced <- err
	case <-time.After(100 * time.Millisecond):
	}
	// Server 1 starts and serves (the client's fence there waits for it).
	if err := s.StartIndex(context.Background(), fakePeers{c}); err != nil {
		t.Fatal(err)
	}
	s.SetReady()
	if err := <-fenced; err != nil {
		t.Fatal(err)
	}
	if got := c.lookup(key+"=value", false); !slices.Equal(got, []uint64{id}) {
		t.Fatalf("after the fence, the index finds %v, want [%d]", got, id)
	}
}
