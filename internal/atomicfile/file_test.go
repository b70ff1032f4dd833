package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFileCommitReplacesKeepingMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := os.WriteFile(path, []byte("old contents"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old contents" {
		t.Fatalf("the destination changed before Commit: %q", got)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort() // a no-op now
	if got, _ := os.ReadFile(path); string(got) != "new" {
		t.Fatalf("read %q after Commit, want %q", got, "new")
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v after Commit, want the old file's 0640", st.Mode())
	}
	onlyEntries(t, dir, "out")
}

func TestFileAbortLeavesDestination(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	f.Abort()
	if got, _ := os.ReadFile(path); string(got) != "keep me" {
		t.Fatalf("read %q after Abort, want the old contents", got)
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Fatal("Write after Abort succeeded")
	}
	if err := f.Commit(); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
	onlyEntries(t, dir, "out")

	// A new file is not created at all by an aborted replacement.
	f, err = Create(filepath.Join(dir, "new"), 0o666)
	if err != nil {
		t.Fatal(err)
	}
	f.Abort()
	onlyEntries(t, dir, "out")
}

func TestFileThroughSymlinkReplacesTarget(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", link); err != nil {
		t.Fatal(err)
	}
	f, err := Create(link, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("new"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", st, err)
	}
	if got, _ := os.ReadFile(target); string(got) != "new" {
		t.Fatalf("target holds %q, want %q", got, "new")
	}
}

func TestFileRefusesNonRegular(t *testing.T) {
	if _, err := Create(t.TempDir(), 0o666); err == nil {
		t.Fatal("Create over a directory succeeded")
	}
}

func onlyEntries(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("dir holds %v, want %v", got, names)
	}
	for i := range got {
		if got[i] != names[i] {
			t.Fatalf("dir holds %v, want %v", got, names)
		}
	}
}
