package cluster

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
)

// A server list write that fails (full disk, I/O error) at any of its
// operations fails with an error naming the file and leaves the old list
// readable; a power loss at any point leaves the old list or the new.
func TestWriteListFaultsAndCrashes(t *testing.T) {
	old, next := testList(2), testList(3)
	setup := func() (*vfs.MemFS, *vfs.Faulty, Dir) {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/tmp", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := (Dir{Path: "/tmp", FS: mem}).WriteList(old); err != nil {
			t.Fatal(err)
		}
		f := vfs.NewFaulty(mem)
		return mem, f, Dir{Path: "/tmp", FS: f}
	}
	_, f, d := setup()
	before := f.Ops()
	if err := d.WriteList(next); err != nil {
		t.Fatal(err)
	}
	ops := int(f.Ops() - before)
	for n := range ops {
		for _, errno := range []error{syscall.ENOSPC, syscall.EIO} {
			mem, f, d := setup()
			f.Inject(vfs.Rule{Ops: vfs.OpAll, After: n, Count: 1, Err: errno, Short: true})
			err := d.WriteList(next)
			got, rerr := (Dir{Path: "/tmp", FS: mem}).ReadList()
			if rerr != nil {
				t.Fatalf("fault at op %d: the list no longer reads: %v", n, rerr)
			}
			if err == nil {
				if !sameList(got, next) {
					t.Fatalf("fault at op %d: no error, but the old list", n)
				}
				continue
			}
			if !errors.Is(err, errno) || !strings.Contains(err.Error(), "/tmp/"+ListFile) {
				t.Fatalf("fault at op %d: %v; want %v naming the list file", n, err, errno)
			}
			if !sameList(got, old) && !(n == ops-1 && sameList(got, next)) {
				t.Fatalf("fault at op %d failed the write but changed the list", n)
			}
		}
		mem, f, d := setup()
		var crashed *vfs.MemFS
		seen := 0
		f.OnOp(func(vfs.Op, string) {
			if seen == n {
				crashed = mem.CrashClone()
			}
			seen++
		})
		if err := d.WriteList(next); err != nil {
			t.Fatal(err)
		}
		got, err := (Dir{Path: "/tmp", FS: crashed}).ReadList()
		if err != nil || (!sameList(got, old) && !sameList(got, next)) {
			t.Fatalf("crash before op %d: %v, %v", n, got, err)
		}
	}
}
