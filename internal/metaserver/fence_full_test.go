package metaserver

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// An index fence on a server whose store cannot record the deliveries its
// outbox made (its disk is full): what its destinations applied is
// delivered, so a fence that needs nothing more returns and the query
// finds the tag while the disk stays full (it used to fail, and before
// that wait until its deadline). A fence that needs a record queued
// behind, which goes nowhere until the store records again, fails at
// once, saying so, with the code of a full disk: a query fails with
// pdc.ErrNoSpace naming the server and the file, instead of a bare
// timeout at its deadline. Once the disk has room the fence delivers,
// and the index finds the tag. Server 0's metadata log is on a file
// system whose writes to it fail with ENOSPC from the moment the disk
// fills.
func TestFenceOnAFullDiskSaysSo(t *testing.T) {
	faulty := vfs.NewFaulty(vfs.NewMem())
	c := &testCluster{t: t, down: map[int]bool{}, dirs: []string{"meta0", t.TempDir()}, fs: map[int]vfs.FS{0: faulty}}
	c.open()
	t.Cleanup(c.close)
	id, key := c.createWithRemoteKey(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fence := func() error {
		_, err := c.svcs[0].indexFence(ctx, &rpc.Request{Method: wire.MethodIndexFence})
		return err
	}

	// The put is committed on server 0, and its delivery to server 1
	// waits; the disk fills before server 1 is back. Server 1 applies
	// it, and server 0 cannot record that.
	c.setDown(1, true)
	c.put(id, key, "v")
	full := faulty.Inject(vfs.Rule{Ops: vfs.OpWrites, Path: "pdc.wal"})
	c.setDown(1, false)
	if err := fence(); err != nil {
		t.Fatalf("a fence whose deliveries were all applied, on a full disk: %v", err)
	}
	if got := c.lookup(key+"=v", false); !slices.Equal(got, []uint64{id}) {
		t.Fatalf("on the full disk, the index finds %v for the tag, want [%d]", got, id)
	}
	full()
	if err := fence(); err != nil {
		t.Fatalf("the fence once the disk has room: %v", err)
	}

	// Now a second put waits behind the first's delivery, held on its
	// way to server 1 as the disk fills.
	gate, atGate := make(chan struct{}), make(chan struct{}, 1)
	c.mu.Lock()
	c.gate, c.gated, c.atGate = gate, 1, atGate
	c.mu.Unlock()
	c.put(id, key, "w")
	<-atGate
	c.put(id, key, "x")
	full = faulty.Inject(vfs.Rule{Ops: vfs.OpWrites, Path: "pdc.wal"})
	close(gate)
	err := fence()
	if ctx.Err() != nil {
		t.Fatalf("the fence waited until its deadline: %v", err)
	}
	if wire.CodeOf(err) != wire.CodeNoSpace || !strings.Contains(err.Error(), "pdc.wal") || !strings.Contains(err.Error(), "server 0") {
		t.Fatalf("a fence with deliveries that cannot be recorded: %v (code %d); want one naming server 0 and its log, with the code of a full disk", err, wire.CodeOf(err))
	}

	t.Logf("the fence on the full disk: %v", err)
	full()
	if err := fence(); err != nil {
		t.Fatalf("the fence once the disk has room: %v", err)
	}
	if got := c.query(key+"=x", false); !slices.Equal(got, []uint64{id}) {
		t.Fatalf("the index finds %v for the tag, want [%d]", got, id)
	}
}
