package hosts_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/bed"
)

// TestSlotMoveAcrossCut (issue 26, item 5): a cluster of three data
// servers with node-local data dirs restarts with two (the third node's
// server now metadata only), so the third node's data slot moves over
// the network to rank 0; the two nodes are cut from each other in the
// middle of the move. After the cut heals the move finishes, the cluster
// serves, and every acknowledged write reads back whole.
func TestSlotMoveAcrossCut(t *testing.T) {
	b := bed.Start(t, 4)
	h := startHosts(t, b, 3)
	// 4 objects of 4 MiB: slot 2 gets about 5 MiB, some seconds at the
	// limit below.
	rows := "16384"
	c := h.client(b.Nodes[3], time.Minute, rowsEnv+"="+rows)
	c.ok("setup")
	c.ok("write 1")
	c.ok("read 1")
	c.close()
	h.down()

	n1, n3 := b.Nodes[0], b.Nodes[2]
	if err := n3.Limit("8mbit"); err != nil {
		t.Fatal(err)
	}
	ready := h.restart(3, func(r int, node *bed.Node) []string {
		args := []string{"--listen", node.Addr.String() + ":0"}
		if r == 2 {
			args = append(args, "--roles", "metadata")
		}
		return args
	})
	incoming := filepath.Join(n1.DataDir, "data-2.incoming")
	waitFor(t, "the move of slot 2 to begin", func() bool {
		_, err := os.Stat(incoming)
		return err == nil
	})
	if err := n1.Cut(n3); err != nil {
		t.Fatal(err)
	}
	// Cut long enough for every side to notice (the client side's
	// 10 s peer timeout), then healed.
	waitFor(t, "the sender to notice the cut", func() bool {
		return strings.Contains(h.log(2), "unavailable") || strings.Contains(h.log(0), "unavailable")
	})
	if err := n1.Uncut(n3); err != nil {
		t.Fatal(err)
	}
	if err := n3.Unlimit(); err != nil {
		t.Fatal(err)
	}
	h.waitReady(ready, 3)
	for r := range 3 {
		for _, l := range strings.Split(h.log(r), "\n") {
			if strings.Contains(l, "slot") || strings.Contains(l, "unavailable") {
				t.Logf("rank %d: %.300s", r, l)
			}
		}
	}
	if !strings.Contains(h.log(2), "sent a data slot") {
		t.Fatalf("rank 2 did not send slot 2; logs:\n%s", h.logs())
	}
	c = h.client(b.Nodes[3], time.Minute, rowsEnv+"="+rows)
	c.ok("open")
	c.ok("read 1")
	c.ok("write 2")
	c.ok("read 2")
	h.alive()
}

// waitFor polls cond (there is no event to wait on: another process's
// files and logs) until it holds, failing the test after 2 min.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}
