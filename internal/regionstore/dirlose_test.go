package regionstore

import (
	"bytes"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// dirLoseCase is a store over a MemFS whose directory fsyncs can fail and
// lose the names they could not write (vfs.Rule.Lose), as Linux may: a
// later fsync of the directory then succeeds without writing them.
type dirLoseCase struct {
	mem  *vfs.MemFS
	fsys *vfs.Faulty
	s    *Store
	sync bool
	want map[uint64][]byte // objects' contents, by id
}

var dirLoseLayout = Layout{Dims: []uint64{8, 512}, Elem: 4, Mode: ByOffset}

func newDirLoseCase(t *testing.T, sync bool) *dirLoseCase {
	t.Helper()
	c := &dirLoseCase{mem: vfs.NewMem(), sync: sync, want: map[uint64][]byte{}}
	c.fsys = vfs.NewFaulty(c.mem)
	var err error
	if c.s, err = Open(Options{Dir: faultDir, FS: c.fsys, Sync: sync}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.s.Close() })
	return c
}

// write writes all of object obj under l, filled with b.
func (c *dirLoseCase) write(t *testing.T, obj uint64, l Layout, b byte) error {
	t.Helper()
	data := bytes.Repeat([]byte{b}, int(region.Shape(l.Dims...).Volume())*l.Elem)
	err := c.s.Write(obj, l, region.Shape(l.Dims...), data)
	if err == nil {
		c.want[obj] = data
	}
	return err
}

// failNextDirSync makes the next fsync of the directory fail, losing
// what it could not write.
func (c *dirLoseCase) failNextDirSync(loss vfs.Loss) {
	c.fsys.Inject(vfs.Rule{Ops: vfs.OpSyncDir, Count: 1, Err: syscall.EIO, Lose: loss})
}

// durable fails unless a power loss now leaves object obj as written.
func (c *dirLoseCase) durable(t *testing.T, obj uint64, l Layout, when string) {
	t.Helper()
	s, err := Open(Options{Dir: faultDir, FS: c.mem.CrashClone()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := make([]byte, len(c.want[obj]))
	if err := s.Read(obj, l, region.Shape(l.Dims...), got); err != nil {
		t.Fatalf("%s: read of object %d after a power loss: %v", when, obj, err)
	}
	if !bytes.Equal(got, c.want[obj]) {
		i := firstDiff(got, c.want[obj])
		t.Fatalf("%s: after a power loss, byte %d of object %d reads %#x, want %#x: its file's name was reported durable and was not", when, i, obj, got[i], c.want[obj][i])
	}
}

// A flush after one whose directory fsync failed and lost the new file's
// name must not report the name durable on the word of an fsync that did
// not write it: it makes the name again. Before, the file was gone after
// a power loss, its data with it.
func TestFlushAfterFailedDirSyncLostTheName(t *testing.T) {
	c := newDirLoseCase(t, false)
	if err := c.write(t, 7, dirLoseLayout, 0x11); err != nil {
		t.Fatal(err)
	}
	c.failNextDirSync(vfs.LoseClean)
	if err := c.s.Flush(7); err == nil {
		t.Fatal("a flush whose directory fsync failed succeeded")
	}
	if err := c.s.Flush(7); err != nil {
		t.Fatalf("flush after one whose directory fsync failed: %v", err)
	}
	c.durable(t, 7, dirLoseLayout, "flushed again")
}

// The failed fsync may have dropped every name not yet durable, not
// only the name of the object whose flush it was: another object's first
// flush after it must make its own name again too.
func TestFailedDirSyncLosesOtherObjectsNames(t *testing.T) {
	c := newDirLoseCase(t, false)
	for _, obj := range []uint64{7, 8} {
		if err := c.write(t, obj, dirLoseLayout, byte(obj)); err != nil {
			t.Fatal(err)
		}
	}
	c.failNextDirSync(vfs.LoseClean)
	if err := c.s.Flush(7); err == nil {
		t.Fatal("a flush whose directory fsync failed succeeded")
	}
	if err := c.s.Flush(8); err != nil {
		t.Fatalf("flush of another object after the failed directory fsync: %v", err)
	}
	c.durable(t, 8, dirLoseLayout, "the other object flushed")
}

// With Options.Sync a write is on disk when acknowledged, its file's
// name too: after a relayout whose directory fsync failed and lost the
// rename, the next write must not be acknowledged into a file a power
// loss takes away (bringing back the one the relayout replaced).
func TestSyncWriteAfterARelayoutLostItsName(t *testing.T) {
	c := newDirLoseCase(t, true)
	if err := c.write(t, 7, dirLoseLayout, 0x11); err != nil {
		t.Fatal(err)
	}
	wide := dirLoseLayout
	wide.Dims, wide.Version = []uint64{8, 600}, 1
	c.failNextDirSync(vfs.LoseClean)
	if err := c.write(t, 7, wide, 0x22); err == nil {
		t.Fatal("a write whose relayout's directory fsync failed succeeded")
	}
	if err := c.write(t, 7, wide, 0x33); err != nil {
		t.Fatalf("write after the failed relayout: %v", err)
	}
	c.durable(t, 7, wide, "written again with Sync")
}

// Where the kernel dropped the name from the directory it reads too
// (LoseEvict), the file cannot be made again from it: the flush fails,
// and never reports durable what a power loss takes.
func TestFlushAfterFailedDirSyncEvictedTheName(t *testing.T) {
	c := newDirLoseCase(t, false)
	if err := c.write(t, 7, dirLoseLayout, 0x11); err != nil {
		t.Fatal(err)
	}
	c.failNextDirSync(vfs.LoseEvict)
	if err := c.s.Flush(7); err == nil {
		t.Fatal("a flush whose directory fsync failed succeeded")
	}
	for range 2 {
		if err := c.s.Flush(7); err == nil {
			t.Fatal("a flush of an object whose file's name the kernel dropped succeeded")
		}
	}
}
