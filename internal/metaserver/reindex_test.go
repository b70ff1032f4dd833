package metaserver

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
)

// openOn opens and starts a one-server service whose store is on fsys.
func openOn(t *testing.T, fsys vfs.FS, noIndex bool) *Service {
	t.Helper()
	s, err := Open(Config{Dir: "meta", CheckpointDir: "checkpoints", FS: fsys, LogBytes: memLogBytes, NoIndex: noIndex, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.SetPlacement(0, 1)
	s.MovesDone()
	c := &testCluster{t: t, svcs: []*Service{s}, down: map[int]bool{}}
	if err := s.StartIndex(context.Background(), fakePeers{c}); err != nil {
		t.Fatal(err)
	}
	s.SetReady()
	return s
}

// TestReindexStoppedMidwayIsRedone: a store whose index is rebuilt at
// start (here: it had none) records how its index is built only once the
// rebuild has queued every tag. A start killed at any point of the
// rebuild leaves a store whose next start rebuilds it again, and its
// index finds the tag. Before, the record went first: a start killed
// before the rebuild's commit left a store that claimed an index it did
// not have, and searches by the index missed the tags for good.
func TestReindexStoppedMidwayIsRedone(t *testing.T) {
	mem := vfs.NewMem()
	s := openOn(t, mem, true)
	c := &testCluster{t: t, svcs: []*Service{s}, down: map[int]bool{}}
	id := c.create("obj")
	c.put(id, "key", "value")
	s.Close()

	// Every state a kill -9 could leave during a start that rebuilds
	// the index: one before each write of the store's log.
	f := vfs.NewFaulty(mem)
	var mu sync.Mutex
	var crashes []*vfs.MemFS
	f.OnOp(func(op vfs.Op, path string) {
		if op == vfs.OpWrite && strings.Contains(path, "pdc.wal") {
			mu.Lock()
			crashes = append(crashes, mem.Clone())
			mu.Unlock()
		}
	})
	s = openOn(t, f, false)
	s.Close()
	f.OnOp(nil)
	// Not the first (the open's new log, before any change) nor the
	// last (the close's): a reopen without a rebuild is tested elsewhere,
	// and each open costs seconds under the race detector.
	if len(crashes) < 3 {
		t.Fatalf("%d writes of the log in a start that rebuilds the index and its close; want 3 or more", len(crashes))
	}
	for i, crashed := range crashes[1 : len(crashes)-1] {
		i++
		s := openOn(t, crashed, false)
		c := &testCluster{t: t, svcs: []*Service{s}, down: map[int]bool{}}
		got := c.query("key=value", false)
		s.Close()
		if !slices.Equal(got, []uint64{id}) {
			t.Fatalf("after a start killed before log write %d of %d, the index finds %v, want [%d]", i+1, len(crashes), got, id)
		}
	}
}
