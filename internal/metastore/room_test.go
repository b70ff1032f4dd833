package metastore

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs/vfstest"
)

// A store opened on a small disk takes at most a quarter of its free
// space for its log: a reservation that fills the disk, even for a moment, fails
// the writes of everything else on it (two servers starting on one small
// disk failed a store identity's write so).
func TestLogLeavesRoomOnASmallDisk(t *testing.T) {
	root := vfstest.SmallFS(t, 24<<20)
	free := vfstest.Free(t, root)
	dir := filepath.Join(root, "meta")
	s, err := Open(Options{Dir: dir, Durability: DurabilitySync, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fi, err := os.Stat(filepath.Join(dir, walFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > free/4+walHeaderLen {
		t.Fatalf("the log took %d bytes of a disk with %d free; want at most a quarter", fi.Size(), free)
	}
	if left := vfstest.Free(t, root); left < free/2 {
		t.Fatalf("%d bytes left of %d after the store opened", left, free)
	}
}
