package regionstore

import (
	"container/list"
	"errors"
	"os"
	"path/filepath"
	"sync"

	"github.com/pdcgo/pdc/internal/vfs"
)

// maxOpenFiles bounds the descriptors a store keeps open: a data server
// may hold many more objects than a process may open files.
const maxOpenFiles = 256

// fileCache keeps recently used files open, closing the least recently
// used idle one beyond its limit. A file in use is never closed under its
// user, so the limit is exceeded for as long as more than max are in use
// at once.
type fileCache struct {
	fs  vfs.FS
	max int
	mu  struct {
		sync.Mutex
		byPath map[string]*openFile // guarded by mu
		lru    list.List            // of *openFile, most recent first; guarded by mu
	}
}

type openFile struct {
	path string
	f    vfs.File
	refs int
	elem *list.Element
}

func newFileCache(fsys vfs.FS, max int) *fileCache {
	c := &fileCache{fs: fsys, max: max}
	c.mu.byPath = map[string]*openFile{}
	return c
}

// acquire returns path's open file; release it when done. The file must
// exist: files are created by rename, never by opening.
func (c *fileCache) acquire(path string) (*openFile, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if of := c.mu.byPath[path]; of != nil {
		of.refs++
		c.mu.lru.MoveToFront(of.elem)
		return of, nil
	}
	f, err := c.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	of := &openFile{path: path, f: f, refs: 1}
	of.elem = c.mu.lru.PushFront(of)
	c.mu.byPath[path] = of
	for e := c.mu.lru.Back(); e != nil && len(c.mu.byPath) > c.max; {
		prev := e.Prev()
		if v := e.Value.(*openFile); v.refs == 0 {
			c.closeLocked(v)
		}
		e = prev
	}
	return of, nil
}

func (c *fileCache) release(of *openFile) {
	c.mu.Lock()
	of.refs--
	c.mu.Unlock()
}

// drop closes path's file if it is open. The caller makes sure nobody
// uses it (it holds the object's lock exclusively).
func (c *fileCache) drop(path string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if of := c.mu.byPath[path]; of != nil {
		return c.closeLocked(of)
	}
	return nil
}

func (c *fileCache) closeLocked(of *openFile) error {
	c.mu.lru.Remove(of.elem)
	delete(c.mu.byPath, of.path)
	return of.f.Close()
}

// closeAll closes every file.
func (c *fileCache) closeAll() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, of := range c.mu.byPath {
		if err := c.closeLocked(of); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// open is how many files are open, for tests.
func (c *fileCache) open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.byPath)
}

// replaceFile writes a new file at path: fill writes its contents into a
// temporary file beside it, which is renamed over path. With durable, the
// contents are fsynced before the rename and the directory after it, so
// after a crash path holds the old file or the new one, never a part.
// Without, the contents are in the kernel (a process crash keeps them).
func replaceFile(fsys vfs.FS, path string, durable bool, fill func(f vfs.File) error) error {
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = fill(f)
	if err == nil && durable {
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
		return err
	}
	if durable {
		if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
			return &unsyncedError{err}
		}
	}
	return nil
}

// unsyncedError is replaceFile's error when only the fsync of the directory
// failed: the new file is in place, and the caller must go on with it,
// though it may not survive a power loss.
type unsyncedError struct{ err error }

func (e *unsyncedError) Error() string { return e.err.Error() }
func (e *unsyncedError) Unwrap() error { return e.err }

// replaced reports whether err, from replaceFile, leaves the new file in
// place.
func replaced(err error) bool {
	var u *unsyncedError
	return err == nil || errors.As(err, &u)
}
