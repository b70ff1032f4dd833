package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// File is a replacement of a file being written as a stream: its bytes go
// to a temporary file in the same directory, which Commit fsyncs and
// renames over the destination (fsyncing the directory), as Write does.
// Until Commit succeeds the destination is untouched: a failed or
// abandoned writer leaves it as it was. Not safe for concurrent use.
type File struct {
	f    *os.File
	path string // the destination, symlinks resolved
	tmp  string
	done bool
}

// Kind names what a file that is not a regular one is, for messages:
// "a directory", where its mode's type printed as "d---------".
func Kind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t.IsRegular():
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a device"
	}
	return fmt.Sprintf("a file of type %v", m.Type())
}

// Create starts a replacement of path. A new file gets mode perm (less the
// umask, as os.Create's does); an existing one keeps its mode. If path is
// a symbolic link, the file it points to is replaced, not the link.
func Create(path string, perm os.FileMode) (*File, error) {
	dst := path
	if st, err := os.Lstat(path); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		if dst, err = filepath.EvalSymlinks(path); err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
	}
	keep := false
	if st, err := os.Stat(dst); err == nil {
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("create %s: %s, not a regular file", path, Kind(st.Mode()))
		}
		perm, keep = st.Mode().Perm(), true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp"+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if keep {
		// The umask applied to a new file; the old one's mode stays.
		if err := f.Chmod(perm); err != nil {
			f.Close()
			os.Remove(tmp)
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
	}
	return &File{f: f, path: dst, tmp: tmp}, nil
}

// Write appends p to the replacement.
func (a *File) Write(p []byte) (int, error) {
	if a.done {
		return 0, fmt.Errorf("write %s: %w", a.path, os.ErrClosed)
	}
	n, err := a.f.Write(p)
	if err != nil {
		err = fmt.Errorf("write %s (through %s): %w", a.path, a.tmp, err)
	}
	return n, err
}

// Commit fsyncs the replacement, renames it over the destination and
// fsyncs the directory. If it fails, the destination is as it was (unless
// only the directory's fsync failed) and the temporary file is gone.
func (a *File) Commit() error {
	if a.done {
		return fmt.Errorf("commit %s: %w", a.path, os.ErrClosed)
	}
	a.done = true
	err := a.f.Sync()
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(a.tmp, a.path)
	}
	if err != nil {
		os.Remove(a.tmp)
		return fmt.Errorf("write %s: %w", a.path, err)
	}
	return SyncDir(filepath.Dir(a.path))
}

// Abort drops the replacement, leaving the destination as it was. It is
// a no-op after Commit or another Abort, so it may be deferred.
func (a *File) Abort() {
	if a.done {
		return
	}
	a.done = true
	a.f.Close()
	os.Remove(a.tmp)
}
