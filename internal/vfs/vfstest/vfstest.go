// Package vfstest gives tests real small file systems to fill: a tmpfs
// of a few MiB mounted for the test (which needs root, as in CI; a test
// skips with a clear message where mounting is not permitted), and a
// filler that takes all the space left and gives it back.
package vfstest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// SmallFS mounts a tmpfs of size bytes on a new directory and returns it;
// it is unmounted when the test ends. Skips the test if mounting is not
// permitted here.
func SmallFS(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10)+",mode=0755"); err != nil {
		t.Skipf("cannot mount a tmpfs of %d bytes to fill (needs root, as in CI): %v", size, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// GrowFS makes the SmallFS at dir size bytes large, keeping what it
// holds: an operator adding space.
func GrowFS(t testing.TB, dir string, size int64) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10)+",mode=0755"); err != nil {
		t.Fatalf("grow the tmpfs at %s to %d bytes: %v", dir, size, err)
	}
}

// Free is the space left on the file system holding dir, in bytes.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// Filler holds the space it took on a file system.
type Filler struct {
	path string
	n    int64
}

// Fill takes all the space left on the file system holding dir but keep
// bytes, in a file under dir, and returns it.
func Fill(t testing.TB, dir string, keep int64) *Filler {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = 0xF1 // not zeros: a sparse hole must not stand in for it
	}
	n := st.Size()
	for {
		left := Free(t, dir) - keep
		if left <= 0 {
			break
		}
		k, err := f.Write(buf[:min(int64(len(buf)), left)])
		n += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &Filler{path: path, n: n}
}

// Release gives back all the filler's space.
func (f *Filler) Release(t testing.TB) {
	t.Helper()
	if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// Bytes is how much the filler holds.
func (f *Filler) Bytes() int64 { return f.n }
