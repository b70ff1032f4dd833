package regionstore

import (
	"container/list"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

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
		// unsynced holds, by path, the error of a failed fsync of a
		// file that nothing has replaced since: it outlives the file's
		// descriptors, since one opened after the failure would not
		// report it. Guarded by mu.
		unsynced map[string]error
	}
	// nUnsynced is len(mu.unsynced), read without mu: every write of a
	// --durability sync server and every flush asks about its file, and
	// almost always none has failed.
	nUnsynced atomic.Int64
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
	c.mu.unsynced = map[string]error{}
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
	of := &openFile{path: path, f: &guardedFile{File: f, c: c, path: path}, refs: 1}
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

// guardedFile is a cached file whose fsync is never retried once it
// failed. After a failed writeback Linux may mark the pages it could not
// write clean, dropped or not, and a second fsync then succeeds without
// writing them: a flush retried after a failed one would call bytes
// durable that a power loss takes (or that read back old once the pages
// are evicted). So every later Sync of the path fails with the first
// error until the store replaces the file (Store.rewrite) or deletes it.
// It passes on the optional interfaces (mmap, SEEK_DATA) of the file it
// wraps.
type guardedFile struct {
	vfs.File
	c    *fileCache
	path string
}

func (f *guardedFile) Sync() error {
	if err := f.c.unsynced(f.path); err != nil {
		return err
	}
	if err := f.File.Sync(); err != nil {
		f.c.setUnsynced(f.path, err)
		return err
	}
	return nil
}

func (f *guardedFile) Map(n int, writable bool) ([]byte, error) {
	m, ok := f.File.(vfs.Mapper)
	if !ok {
		return nil, fmt.Errorf("mmap %s: %w", f.path, errors.ErrUnsupported)
	}
	return m.Map(n, writable)
}

func (f *guardedFile) Unmap(b []byte) error {
	if m, ok := f.File.(vfs.Mapper); ok {
		return m.Unmap(b)
	}
	return nil
}

func (f *guardedFile) SeekData(off int64) (int64, error) { return vfs.SeekData(f.File, off) }

// ErrUnsynced is in the error of a flush, or of a write that must be
// durable, of a file whose earlier fsync failed and that was not
// rewritten since: what was written to it after its last good fsync may
// be lost, and no fsync of it can say otherwise.
var ErrUnsynced = errors.New("an earlier fsync failed")

// unsyncedExt names the marker file beside a file whose fsync failed: the
// kernel's pages outlive the process, so a store opened again (a restart
// of the server, not of the machine) must not trust a first fsync either.
const unsyncedExt = ".unsynced"

// unsynced returns the error that fails every fsync of path, or nil.
func (c *fileCache) unsynced(path string) error {
	if c.nUnsynced.Load() == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.unsynced[path]
}

// setUnsynced fails every later fsync of path, in this process and,
// through a marker file, after a restart. The marker is not fsynced: a
// power loss empties the page cache, and then what the file reads is
// what its disk has.
func (c *fileCache) setUnsynced(path string, cause error) {
	err := fmt.Errorf("%s: %w (%w)%s", path, ErrUnsynced, cause, unsyncedWhy)
	c.mu.Lock()
	first := c.mu.unsynced[path] == nil
	if first {
		c.mu.unsynced[path] = err
		c.nUnsynced.Add(1)
	}
	c.mu.Unlock()
	if first {
		// Best effort: without it, only a restart forgets the failure.
		if m, merr := c.fs.OpenFile(path+unsyncedExt, os.O_WRONLY|os.O_CREATE, 0o600); merr == nil {
			_ = m.Close()
		}
	}
}

// clearUnsynced forgets a failed fsync of path, whose file was replaced
// or removed, and removes its marker. A marker that stays costs the
// next store opened over it one rewrite of the file, nothing more.
func (c *fileCache) clearUnsynced(path string) {
	c.mu.Lock()
	_, ok := c.mu.unsynced[path]
	if ok {
		delete(c.mu.unsynced, path)
		c.nUnsynced.Add(-1)
	}
	c.mu.Unlock()
	if ok {
		_ = c.fs.Remove(path + unsyncedExt)
	}
}

// inheritUnsynced fails the fsyncs of path, whose marker a store before
// this one left.
func (c *fileCache) inheritUnsynced(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.unsynced[path] == nil {
		c.nUnsynced.Add(1)
	}
	c.mu.unsynced[path] = fmt.Errorf("%s: %w before the store was opened%s", path, ErrUnsynced, unsyncedWhy)
}

// unsyncedWhy ends the error of a file whose fsync failed.
const unsyncedWhy = ": what was written since its last good fsync may be lost, and a second fsync would not say so; the next flush rewrites the file"

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
		if err := syncName(fsys, path); err != nil {
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
