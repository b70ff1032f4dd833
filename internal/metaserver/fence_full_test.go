package metaserver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// An index fence on a server whose store cannot record the deliveries its
// outbox made (its disk is full): what its destinations applied is
// delivered, and what is queued behind it is sent meanwhile, so the fence
// returns and the query finds the tags while the disk stays full. A fence
// that needed a record queued behind an unrecorded delivery used to fail
// at once with pdc.ErrNoSpace, and every indexed query through this
// server with it, until the disk had room (before that, it waited until
// its deadline). Server 0's metadata log is on a file system whose writes
// to it fail with ENOSPC from the moment the disk fills.
func TestFenceOnAFullDisk(t *testing.T) {
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
	if err := fence(); err != nil {
		t.Fatalf("a fence behind a delivery that cannot be recorded, on the full disk: %v (code %d); want the delivery behind it made", err, wire.CodeOf(err))
	}
	if got := c.query(key+"=x", false); !slices.Equal(got, []uint64{id}) {
		t.Fatalf("on the full disk, the index finds %v for the tag put behind an unrecorded delivery, want [%d]", got, id)
	}
	if got := c.query(key+"=w", false); len(got) != 0 {
		t.Fatalf("on the full disk, the index finds %v for the tag's older value", got)
	}

	// Killed before the disk has room: the start sends again every
	// delivery it could not record, in order, so the newest is still
	// applied last.
	for _, s := range c.svcs {
		crash(s)
	}
	c.svcs = nil
	full()
	c.open()
	if err := fence(); err != nil {
		t.Fatalf("the fence after the restart: %v", err)
	}
	if got := c.query(key+"=x", false); !slices.Equal(got, []uint64{id}) {
		t.Fatalf("after the restart the index finds %v for the tag, want [%d]", got, id)
	}
	if got := c.query(key+"=w", false); len(got) != 0 {
		t.Fatalf("after the restart the index finds %v for the tag's older value", got)
	}
}
