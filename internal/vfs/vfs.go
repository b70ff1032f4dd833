package vfs

import (
	"errors"
	"io"
	"os"
)

// FS is a namespace of files. Names are file paths of the host's form.
// Implementations are safe for concurrent use.
type FS interface {
	// Create creates name, or truncates it if it exists, open for reading
	// and writing.
	Create(name string) (File, error)
	// Open opens name for reading.
	Open(name string) (File, error)
	// OpenFile opens name with the os package's flags (os.O_RDONLY,
	// O_WRONLY, O_RDWR, O_CREATE, O_EXCL, O_TRUNC, O_APPEND).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything under it; nil if it does not
	// exist.
	RemoveAll(name string) error
	// Rename renames oldname to newname, replacing a file there.
	Rename(oldname, newname string) error
	// Link makes newname a hard link to oldname.
	Link(oldname, newname string) error
	// MkdirAll makes dir and any parents missing.
	MkdirAll(dir string, perm os.FileMode) error
	// Stat describes name.
	Stat(name string) (os.FileInfo, error)
	// List returns the names in dir, sorted.
	List(dir string) ([]string, error)
	// SyncDir makes the creations, renames, links and removals of names in
	// dir durable.
	SyncDir(dir string) error
	// Lock takes an exclusive lock named by the file name (created if
	// missing), for coordinating processes; Close releases it. A lock
	// held already fails at once.
	Lock(name string) (io.Closer, error)
}

// File is an open file. Reads and writes at offsets (ReadAt, WriteAt) may
// run concurrently; Read and Write use the file's own offset and must not.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Name is the name the file was opened with.
	Name() string
	Stat() (os.FileInfo, error)
	// Sync makes the file's contents durable.
	Sync() error
	Truncate(size int64) error
	// Fallocate allocates disk blocks for [off, off+n), growing the file
	// if it ends before off+n, so that later writes there cannot fail for
	// want of space. An error wrapping errors.ErrUnsupported means the
	// file system cannot.
	Fallocate(off, n int64) error
}

// Mapper is implemented by files that can be mapped into memory.
type Mapper interface {
	// Map maps the file's first n bytes, shared: with writable, stores into
	// the mapping are the file's bytes, in the kernel at once. A store into
	// a part of the file the disk cannot back faults the process (SIGBUS):
	// allocate the blocks first (Fallocate). An error wrapping
	// errors.ErrUnsupported means the file cannot be mapped.
	Map(n int, writable bool) ([]byte, error)
	// Unmap ends a mapping Map returned; the file may be closed already.
	Unmap(m []byte) error
}

// DataSeeker is implemented by files that can find their holes.
type DataSeeker interface {
	// SeekData returns the offset of the first byte at or after off that
	// is not in a hole, or -1 if there is none. An error wrapping
	// errors.ErrUnsupported means the file system cannot tell.
	SeekData(off int64) (int64, error)
}

// Default is the operating system's file system.
var Default FS = osFS{}

// OrDefault returns fsys, or Default if it is nil: what a store's options
// mean by no FS.
func OrDefault(fsys FS) FS {
	if fsys == nil {
		return Default
	}
	return fsys
}

// ReadFile reads the whole of name.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size int
	if st, err := f.Stat(); err == nil && st.Size() < 1<<40 {
		size = int(st.Size())
	}
	data := make([]byte, 0, size+512)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}

// MapOrRead returns f's first n bytes for reading: a read-only mapping
// where f can be mapped, else a copy read into memory. Call free once done
// with them.
func MapOrRead(f File, n int) (data []byte, free func() error, err error) {
	if m, ok := f.(Mapper); ok {
		data, err := m.Map(n, false)
		if err == nil {
			return data, func() error { return m.Unmap(data) }, nil
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return nil, nil, err
		}
	}
	data = make([]byte, n)
	if _, err := f.ReadAt(data, 0); err != nil && err != io.EOF {
		return nil, nil, err
	}
	return data, noFree, nil
}

func noFree() error { return nil }

// SeekData is DataSeeker.SeekData where f has it; elsewhere it returns off:
// every byte may hold data.
func SeekData(f File, off int64) (int64, error) {
	if d, ok := f.(DataSeeker); ok {
		n, err := d.SeekData(off)
		if !errors.Is(err, errors.ErrUnsupported) {
			return n, err
		}
	}
	return off, nil
}
