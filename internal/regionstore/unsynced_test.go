package regionstore

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// unsyncedCase is an object flushed once (old), then partly overwritten
// (new rows), in a store over a MemFS whose next fsync of the object's
// file fails with EIO and loses what it could not write, as Linux may.
type unsyncedCase struct {
	mem  *vfs.MemFS
	fsys *vfs.Faulty
	s    *Store
	l    Layout
	box  region.Box // the rows overwritten after the flush
	want []byte     // the whole object after the overwrite
}

func newUnsyncedCase(t *testing.T, mode Mode, loss vfs.Loss) *unsyncedCase {
	t.Helper()
	c := &unsyncedCase{mem: vfs.NewMem()}
	c.fsys = vfs.NewFaulty(c.mem)
	c.s = c.open(t, c.fsys)
	t.Cleanup(func() { _ = c.s.Close() })
	dims := []uint64{64, 1024}
	c.l = Layout{Dims: dims, Elem: 4, Mode: mode}
	c.want = make([]byte, 64*1024*4)
	for i := range c.want {
		c.want[i] = byte(i%251 + 1)
	}
	if err := c.s.Write(7, c.l, region.Shape(dims...), c.want); err != nil {
		t.Fatal(err)
	}
	if err := c.s.Flush(7); err != nil {
		t.Fatal(err)
	}
	c.box = region.Box{Off: []uint64{16, 0}, Size: []uint64{16, 1024}} // 64 KiB, whole pages
	c.overwrite(t, 0x5a)
	ext := ".off"
	if mode == ByRegion {
		ext = ".reg"
	}
	c.fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Path: ext, Count: 1, Err: syscall.EIO, Lose: loss})
	err := c.s.Flush(7)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("flush with its fsync failing: %v, want EIO", err)
	}
	return c
}

func (c *unsyncedCase) open(t *testing.T, fsys vfs.FS) *Store {
	t.Helper()
	s, err := Open(Options{Dir: faultDir, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// overwrite writes the box's rows with b, in the store and in want.
func (c *unsyncedCase) overwrite(t *testing.T, b byte) {
	t.Helper()
	data := bytes.Repeat([]byte{b}, int(c.box.Volume()*4))
	if err := c.s.Write(7, c.l, c.box, data); err != nil {
		t.Fatal(err)
	}
	copy(c.want[c.box.Off[0]*1024*4:], data)
}

// durable fails unless a power loss now leaves the object as want.
func (c *unsyncedCase) durable(t *testing.T, mem *vfs.MemFS, when string) {
	t.Helper()
	s := c.open(t, mem.CrashClone())
	defer s.Close()
	got, err := readAll(s, c.l.Mode, c.l.Dims)
	if err != nil {
		t.Fatalf("%s: read after a power loss: %v", when, err)
	}
	if !bytes.Equal(got, c.want) {
		i := firstDiff(got, c.want)
		t.Fatalf("%s: after a power loss, byte %d (row %d) reads %#x, want %#x: a flush reported lost bytes durable", when, i, i/4096, got[i], c.want[i])
	}
}

// A flush retried after one whose fsync failed must not report durable
// what the failed fsync lost: it rewrites the file, and then it is.
func TestFlushAfterFailedFsync(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			c := newUnsyncedCase(t, mode, vfs.LoseClean)
			if err := c.s.Flush(7); err != nil {
				t.Fatalf("flush after a failed one, with the pages still cached: %v", err)
			}
			c.durable(t, c.mem, "flushed again")
			// And the new file is no longer unsynced: writes and flushes
			// go on as before.
			c.overwrite(t, 0x77)
			if err := c.s.Flush(7); err != nil {
				t.Fatal(err)
			}
			c.durable(t, c.mem, "flushed a third time")
		})
	}
}

// When the kernel dropped the pages a failed fsync could not write, the
// bytes are gone: reads and the retried flush say so (pdc.ErrCorrupt
// naming the object), never old bytes, until the rows are written again.
func TestFlushAfterFailedFsyncLostPages(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			c := newUnsyncedCase(t, mode, vfs.LoseEvict)
			got := make([]byte, c.box.Volume()*4)
			err := c.s.Read(7, c.l, c.box, got)
			if !errors.Is(err, pdc.ErrCorrupt) {
				t.Fatalf("read of the rows the kernel dropped: %v, want ErrCorrupt", err)
			}
			for range 2 {
				err = c.s.Flush(7)
				if !errors.Is(err, pdc.ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("object 7")) {
					t.Fatalf("flush after a failed one, the pages dropped: %v, want ErrCorrupt naming object 7", err)
				}
			}
			// What the store can vouch for is still what a power loss
			// leaves: the rows as of the last good flush.
			c.overwrite(t, 0x33)
			if err := c.s.Flush(7); err != nil {
				t.Fatalf("flush once the lost rows are written again: %v", err)
			}
			c.durable(t, c.mem, "written again and flushed")
		})
	}
}

// A server restarted (not the machine) after a failed fsync finds the
// kernel's pages as they were: its first flush must not trust an fsync of
// the file either.
func TestFlushAfterFailedFsyncAndRestart(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			c := newUnsyncedCase(t, mode, vfs.LoseClean)
			after := c.mem.Clone() // the process dies; the page cache stays
			s := c.open(t, after)
			defer s.Close()
			got, err := readAll(s, mode, c.l.Dims)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.want) {
				i := firstDiff(got, c.want)
				t.Fatalf("after the restart, byte %d reads %#x, want %#x", i, got[i], c.want[i])
			}
			if err := s.Flush(7); err != nil {
				t.Fatalf("flush after the restart: %v", err)
			}
			c.durable(t, after, "flushed after the restart")
		})
	}
}

// A store whose writes are durable (Options.Sync) rewrites a file whose
// fsync failed before it acknowledges the next write, rather than take a
// second fsync of it as proof.
func TestSyncWriteAfterFailedFsync(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			fsys := vfs.NewFaulty(mem)
			s, err := Open(Options{Dir: faultDir, FS: fsys, Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			l := Layout{Dims: []uint64{64, 1024}, Elem: 4, Mode: mode}
			want := make([]byte, 64*1024*4)
			if err := s.Write(7, l, region.Shape(l.Dims...), want); err != nil {
				t.Fatal(err)
			}
			rows := func(b byte, off uint64) error {
				box := region.Box{Off: []uint64{off, 0}, Size: []uint64{16, 1024}}
				data := bytes.Repeat([]byte{b}, int(box.Volume()*4))
				err := s.Write(7, l, box, data)
				if err == nil {
					copy(want[off*4096:], data)
				}
				return err
			}
			remove := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Count: 1, Err: syscall.EIO, Lose: vfs.LoseClean})
			if err := rows(1, 0); !errors.Is(err, syscall.EIO) {
				t.Fatalf("write with its fsync failing: %v, want EIO", err)
			}
			remove()
			if err := rows(2, 32); err != nil {
				t.Fatalf("the next write: %v", err)
			}
			s2, err := Open(Options{Dir: faultDir, FS: mem.CrashClone()})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			got, err := readAll(s2, mode, l.Dims)
			if err != nil {
				t.Fatal(err)
			}
			// The failed write's rows may read old or new; the rest as
			// acknowledged.
			for i := 16 * 4096; i < len(want); i++ {
				if got[i] != want[i] {
					t.Fatalf("after a power loss, byte %d reads %#x, want %#x", i, got[i], want[i])
				}
			}
		})
	}
}
