package hosts_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/bed"
)

// TestStaleWriteAcrossCut: a shrink whose cut cannot reach the data
// server (cut off from the metadata server, both reachable by clients)
// is acknowledged; a write through a handle opened before it, to rows the
// shrink dropped, must then not be acknowledged by the data server, which
// has seen no newer dims: once the cut heals and is delivered, the rows
// of such a write were gone (and read as zeros after a regrow), an
// acknowledged write lost.
func TestStaleWriteAcrossCut(t *testing.T) {
	b := bed.Start(t, 4)
	// Rank 0 holds every object's metadata, rank 1 its data.
	roles := []string{"metadata", "data"}
	h := startHostsWith(t, b, 2, func(r int, node *bed.Node) []string {
		return []string{"--listen", node.Addr.String() + ":0", "--roles", roles[r]}
	})
	meta, data := b.Nodes[0], b.Nodes[1]
	a := h.client(b.Nodes[2], time.Minute)
	a.ok("screate 16")
	a.ok("swrite 1 0 16")
	bc := h.client(b.Nodes[3], time.Minute)
	bc.ok("sopen")

	if err := meta.Cut(data); err != nil {
		t.Fatal(err)
	}
	// The shrink commits; its cut waits for the data server.
	bc.ok("sdims 8")
	// a's handle still holds 16 cells at the older dims version.
	l := a.do("swrite 2 8 16")
	t.Logf("write of cells 8-16 through a handle from before the shrink, during the cut: %.400s", l)
	acked := strings.HasPrefix(l, "ok")
	if acked {
		t.Errorf("a write at the dims version before an acknowledged shrink was acknowledged by a data server that could not confirm it")
	} else if !strings.HasPrefix(l, "err unavailable=true") || !strings.Contains(l, "metadata server") {
		t.Errorf("the stale write during the cut: %s; want pdc.ErrUnavailable naming the metadata server", l)
	}
	if err := meta.Uncut(data); err != nil {
		t.Fatal(err)
	}
	// The regrow delivers the pending cut first.
	bc.ok("sdims 16")
	a.ok("sread 1 0 8")
	if acked {
		if l := a.do("sread 2 8 16"); !strings.HasPrefix(l, "ok") {
			t.Errorf("the acknowledged write of cells 8-16 was lost: %s", l)
		}
	}
	h.alive()
}
