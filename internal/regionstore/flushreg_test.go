package regionstore

import (
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A flush of a by-region log made without Options.Sync must make its name
// durable too, as it does a by-offset file's. A flush right after a
// periodic checkpoint (not durable, so no fsync of the directory) had no
// new index to write, fsynced the log and returned: a power loss took
// the log's name, and every flushed write with it.
func TestFlushByRegionAfterAPeriodicCheckpoint(t *testing.T) {
	old := checkpointEvery
	checkpointEvery = 1 << 10
	t.Cleanup(func() { checkpointEvery = old })
	mem := vfs.NewMem()
	s, err := Open(Options{Dir: faultDir, FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := Layout{Dims: []uint64{4096}, Elem: 1, Mode: ByRegion}
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i%251 + 1)
	}
	if err := s.Write(7, l, region.Shape(4096), data); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(7); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Options{Dir: faultDir, FS: mem.CrashClone()})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got := make([]byte, 4096)
	if err := s2.Read(7, l, region.Shape(4096), got); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(data) {
		t.Fatalf("a flushed write reads %v... after a power loss, want %v...", got[:8], data[:8])
	}
}
