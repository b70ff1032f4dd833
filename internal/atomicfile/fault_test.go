package atomicfile

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
)

// A replace that fails at any of its operations leaves the old contents
// (or the new if only the last, the directory's fsync, failed) and no
// temporary file; a power loss at any point leaves the old
// contents or the new, never a mix or nothing.
func TestWriteFaultsAndCrashes(t *testing.T) {
	const path = "/d/f"
	setup := func() (*vfs.MemFS, *vfs.Faulty) {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/d", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteFS(mem, path, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		return mem, vfs.NewFaulty(mem)
	}
	// Count the operations of one replace.
	_, fsys := setup()
	before := fsys.Ops()
	if err := WriteFS(fsys, path, []byte("new contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	ops := int(fsys.Ops() - before)
	if ops < 5 {
		t.Fatalf("a replace took %d operations", ops)
	}
	faults, crashes := 0, 0
	for n := range ops {
		for _, errno := range []error{syscall.ENOSPC, syscall.EIO} {
			mem, fsys := setup()
			fsys.Inject(vfs.Rule{Ops: vfs.OpAll, After: n, Count: 1, Err: errno, Short: true})
			err := WriteFS(fsys, path, []byte("new contents"), 0o644)
			got, rerr := vfs.ReadFile(mem, path)
			if rerr != nil {
				t.Fatalf("fault at op %d: %v", n, rerr)
			}
			names, _ := mem.List("/d")
			switch {
			case err != nil && !errors.Is(err, errno):
				t.Fatalf("fault at op %d: %v, want %v", n, err, errno)
			case err != nil && string(got) != "old" && !(n == ops-1 && string(got) == "new contents"):
				t.Fatalf("fault at op %d failed the write but left %q", n, got)
			case err == nil && string(got) != "new contents":
				t.Fatalf("fault at op %d: write succeeded but left %q", n, got)
			case !slices.Equal(names, []string{"f"}):
				t.Fatalf("fault at op %d: the dir holds %q", n, names)
			}
			faults++
		}
		mem, fsys := setup()
		var crashed *vfs.MemFS
		seen := 0
		fsys.OnOp(func(vfs.Op, string) {
			if seen == n {
				crashed = mem.CrashClone()
			}
			seen++
		})
		if err := WriteFS(fsys, path, []byte("new contents"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := vfs.ReadFile(crashed, path)
		if err != nil || (string(got) != "old" && string(got) != "new contents") {
			t.Fatalf("crash before op %d: %q, %v", n, got, err)
		}
		crashes++
	}
	// After the last operation the new contents are durable.
	mem, _ := setup()
	if err := WriteFS(mem, path, []byte("new contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := vfs.ReadFile(mem.CrashClone(), path); string(got) != "new contents" {
		t.Fatalf("crash after the replace returned: %q", got)
	}
	t.Logf("%d faults injected, %d crash points", faults, crashes)
}
