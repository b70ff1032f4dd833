package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// osFS is the operating system's file system.
type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return osFS{}.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
}

func (osFS) Open(name string) (File, error) { return osFS{}.OpenFile(name, os.O_RDONLY, 0) }

// OpenFile opens with one system call: os.OpenFile also tries to register
// a regular file with the network poller, four failing system calls per
// open.
func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	for {
		fd, err := unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return osFile{os.NewFile(uintptr(fd), name)}, nil
	}
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) Link(oldname, newname string) error          { return os.Link(oldname, newname) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	err = unix.Fsync(fd)
	unix.Close(fd)
	if err != nil {
		return &fs.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}

func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("lock %s: held by another process or file: %w", name, fs.ErrExist)
		}
		return nil, &fs.PathError{Op: "flock", Path: name, Err: err}
	}
	return f, nil
}

// osFile is an open file of the operating system. Its methods are the
// os.File's, plus fallocate, mmap and SEEK_DATA.
type osFile struct{ *os.File }

func (f osFile) Fallocate(off, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, off, n)
		switch {
		case err == nil:
			return nil
		case err == unix.EINTR:
			continue
		case err == unix.EOPNOTSUPP || err == unix.ENOSYS:
			return &fs.PathError{Op: "fallocate", Path: f.Name(), Err: fmt.Errorf("%w: %w", errors.ErrUnsupported, err)}
		}
		return &fs.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
}

func (f osFile) Map(n int, writable bool) ([]byte, error) {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	m, err := unix.Mmap(int(f.Fd()), 0, n, prot, unix.MAP_SHARED)
	if err != nil {
		if err == unix.ENODEV {
			err = fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
		}
		return nil, &fs.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	return m, nil
}

func (osFile) Unmap(m []byte) error { return unix.Munmap(m) }

func (f osFile) SeekData(off int64) (int64, error) {
	d, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	switch {
	case err == nil:
		return d, nil
	case err == unix.ENXIO:
		return -1, nil
	case err == unix.EINVAL || err == unix.EOPNOTSUPP:
		return 0, fmt.Errorf("seek data in %s: %w: %w", f.Name(), errors.ErrUnsupported, err)
	}
	return 0, &fs.PathError{Op: "seek", Path: f.Name(), Err: err}
}

// Fd is the file's descriptor, for what the FS has no method for (flock,
// extended attributes, fadvise).
func (f osFile) Fd() uintptr { return f.File.Fd() }
