package hosts_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/bed"
)

// TestIndexDeliveryAcrossCut (issue 26, item 5): with two servers cut off
// from each other, tag puts go on (the client reaches both), their DART
// index entries for the other wait in the outboxes, and after the cut
// heals every acknowledged tag is found by an index query.
func TestIndexDeliveryAcrossCut(t *testing.T) {
	b := bed.Start(t, 4)
	h := startHosts(t, b, 3)
	c := h.client(b.Nodes[3], time.Minute)
	c.ok("setup")
	n1, n2 := b.Nodes[0], b.Nodes[1]
	if err := n1.Cut(n2); err != nil {
		t.Fatal(err)
	}
	const n = 60
	l := c.do(fmt.Sprintf("tag 1 %d", n))
	t.Logf("tag 1 %d, ranks 0 and 1 cut: %.200s", n, l)
	res, ok := strings.CutPrefix(l, "ok ")
	if !ok {
		t.Fatalf("tag puts with ranks 0 and 1 cut from each other (the client reaches both): %s", l)
	}
	acked := strings.Split(res, ",")
	if len(acked) != n {
		t.Fatalf("%d tags acknowledged, want %d", len(acked), n)
	}
	if err := n1.Uncut(n2); err != nil {
		t.Fatal(err)
	}
	// At once: a query fences the outboxes, and finds every tag
	// acknowledged before it, however long the cut was.
	c.ok(fmt.Sprintf("find 1 %d", n))
}
