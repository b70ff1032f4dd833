// Package atomicfile replaces files crash-safely: a reader finds the old
// contents or the new, never a mix, and the new survives power loss once
// Write returns.
package atomicfile

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/pdcgo/pdc/internal/vfs"
)

// Write replaces path with data: write a temp file in the same directory,
// fsync it, rename it over path, fsync the directory.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFS(vfs.Default, path, data, perm)
}

// WriteFS is Write on fsys. On error the temporary file is gone (unless
// removing it failed too) and path holds its old contents, or the new ones
// if only the directory's fsync failed: then they may not survive a power
// loss.
func WriteFS(fsys vfs.FS, path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.tmp%08x", filepath.Base(path), rand.Uint32()))
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// The mode is perm whatever the umask, as the caller asked.
	if c, ok := f.(interface{ Chmod(os.FileMode) error }); ok {
		err = c.Chmod(perm)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := SyncDirFS(fsys, dir); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// SyncDir fsyncs a directory, making renames and removals in it durable.
func SyncDir(dir string) error { return SyncDirFS(vfs.Default, dir) }

// SyncDirFS is SyncDir on fsys.
func SyncDirFS(fsys vfs.FS, dir string) error {
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
