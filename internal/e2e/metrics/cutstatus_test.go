package metrics_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

// TestStatusShowsCutsWaiting: with a data server down, a shrink's cut
// waits on its metadata server, and the next set dims of the object is
// refused until it is applied; pdc status says so (and its JSON counts
// them), and says nothing once the cut is applied.
func TestStatusShowsCutsWaiting(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "cuts", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	var obj *client.Object
	for i := 0; obj == nil; i++ {
		o, err := ct.CreateObject(ctx, fmt.Sprintf("o%d", i), client.ObjectProps{Dims: []uint64{16, 8}, Type: region.Int32})
		if err != nil {
			t.Fatal(err)
		}
		if o.Info().Server == 0 {
			obj = o
		}
	}
	ones := make([]byte, 16*8*4)
	for i := range ones {
		ones[i] = 1
	}
	if err := obj.Write(ctx, region.Shape(16, 8), ones); err != nil {
		t.Fatal(err)
	}
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	pid := list.Servers[1].PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(ctx, pid); err != nil {
		t.Fatal(err)
	}
	// Answered once the data servers' dims leases ended (6 s): the cut
	// waits on rank 0 for rank 1.
	if err := obj.SetDims(ctx, []uint64{4, 8}); err != nil {
		t.Fatalf("shrink with rank 1 down: %v", err)
	}
	const line = "rank 0 holds 1 dims cut "
	r := e2e.Run(t, nil, "status", "--tmpdir", tmpdir)
	if !strings.Contains(r.Stdout, line) {
		t.Errorf("pdc status with a cut waiting for rank 1 does not say %q:\n%s%s", line, r.Stdout, r.Stderr)
	}
	// One JSON object per server, a line each.
	type status struct {
		Rank        int    `json:"rank"`
		CutsWaiting uint64 `json:"cuts_waiting"`
	}
	var sts []status
	r = e2e.Run(t, nil, "status", "--tmpdir", tmpdir, "--json")
	for line := range strings.Lines(r.Stdout) {
		var s status
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("pdc status --json: %v\n%s%s", err, r.Stdout, r.Stderr)
		}
		sts = append(sts, s)
	}
	if len(sts) != 2 || sts[0].CutsWaiting != 1 {
		t.Errorf("pdc status --json with a cut waiting on rank 0: %+v, want cuts_waiting 1 on rank 0", sts)
	}

	e2e.MustRun(t, "up", "--restart-dead", "--tmpdir", tmpdir)
	// The regrow delivers the cut first; the retrier then forgets it
	// at its next round, which the status below may come before.
	if err := obj.SetDims(ctx, []uint64{16, 8}); err != nil {
		t.Fatalf("regrow with rank 1 back: %v", err)
	}
	got := make([]byte, 16*8*4)
	if err := obj.Read(ctx, region.Shape(16, 8), got); err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		want := byte(0)
		if i < 4*8*4 {
			want = 1
		}
		if b != want {
			t.Fatalf("after the regrow, byte %d (row %d) reads %d: rows 0-3 keep their 1s, rows 4-15 read 0", i, i/(8*4), b)
		}
	}
}
