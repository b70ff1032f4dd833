package staging

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A hard-linked copy (asked for) of a file produced again unchanged (a
// new version of the same inode) is linked again: rename(2) of one link
// over another of the same inode does nothing and succeeds, which must
// not leave the temporary link behind in the consumer dir.
func TestPlaceLocalLinkAgainLeavesNoTemp(t *testing.T) {
	proot, croot := t.TempDir(), t.TempDir()
	pdir, err := OpenDir(proot, "producer", false)
	if err != nil {
		t.Fatal(err)
	}
	cdir, err := OpenDir(croot, "consumer", false)
	if err != nil {
		t.Fatal(err)
	}
	rec := produced(t, proot, "f", []byte("linked, not copied"))
	for v := uint64(1); v <= 2; v++ {
		rec.Version, rec.Produced = v, int64(v)
		release, tmp, err := cdir.LockCopy(context.Background(), "f")
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(cdir.Real, "f")
		how, err := PlaceLocal(cdir, pdir, "f", dst, tmp, rec, true)
		release()
		if err != nil || how != Linked {
			t.Fatalf("version %d: %q, %v", v, how, err)
		}
		if !cdir.Current("f", dst, rec) {
			t.Fatalf("version %d: the link is not current", v)
		}
		if _, err := os.Lstat(tmp); err == nil {
			t.Fatalf("version %d: the temporary link %s is left in the consumer dir", v, filepath.Base(tmp))
		}
	}
}
