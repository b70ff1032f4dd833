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
// outbox made (its disk is full) fails at once, saying so, with the code
// of a full disk: a query fails with pdc.ErrNoSpace naming the server and
// the file. It used to wait until its deadline, and the query failed
// with a bare timeout. Once the disk has room the fence delivers, and the
// index finds the tag. Server 0's metadata log is on a file system whose
// writes to it fail with ENOSPC from the moment the disk fills.
func TestFenceOnAFullDiskSaysSo(t *testing.T) {
	faulty := vfs.NewFaulty(vfs.NewMem())
	c := &testCluster{t: t, down: map[int]bool{}, dirs: []string{"meta0", t.TempDir()}, fs: map[int]vfs.FS{0: faulty}}
	c.open()
	t.Cleanup(c.close)
	id, key := c.createWithRemoteKey(0)
	// The put is committed on server 0, and its delivery to server 1
	// waits; the disk fills before server 1 is back.
	c.setDown(1, true)
	c.put(id, key, "v")
	full := faulty.Inject(vfs.Rule{Ops: vfs.OpWrites, Path: "pdc.wal"})
	c.setDown(1, false)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fence := func() error {
		_, err := c.svcs[0].indexFence(ctx, &rpc.Request{Method: wire.MethodIndexFence})
		return err
	}
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
	if got := c.query(key+"=v", false); !slices.Equal(got, []uint64{id}) {
		t.Fatalf("the index finds %v for the tag, want [%d]", got, id)
	}
}
