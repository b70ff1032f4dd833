package vfs

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is a file system in memory that can crash. It keeps, besides what
// each file and directory holds, what of it is durable:
//
//   - a file's contents are durable as of its last File.Sync;
//   - a directory's names (files created, renamed, linked or removed in
//     it) are durable as of its last FS.SyncDir, each name as it was
//     then, unless a failed SyncDir lost its change (Rule.Lose): then
//     only a later change of the name makes it durable again;
//   - directories themselves are durable once made (a simplification:
//     pdc's stores make their directories once and never rename them).
//
// CrashClone returns the file system a power loss would leave: only what
// was durable. Clone returns what the death of the process would leave:
// everything written. Either can be opened again by the code under test
// while the old one is abandoned (or closed, which then changes nothing
// of the clone).
//
// MemFS files cannot be mapped (Map returns errors.ErrUnsupported): stores
// into a shared mapping would bypass what MemFS tracks.
type MemFS struct {
	mu   sync.Mutex // guards every directory's names and every lock
	root *memNode
}

// memNode is a file or a directory.
type memNode struct {
	dir  bool
	perm os.FileMode

	// A directory's names now, and as of its last SyncDir, and the
	// names of files changed since (which a SyncDir makes durable);
	// guarded by MemFS.mu.
	entries, synced map[string]*memNode
	dirty           map[string]bool
	locked          bool // guarded by MemFS.mu

	mu      sync.RWMutex
	data    []byte    // guarded by mu
	durable []byte    // data as of the last Sync; guarded by mu
	mtime   time.Time // guarded by mu
	// What of data differs from durable, so that a Sync copies only
	// that: a write log preallocated to 64 MiB and synced after every
	// commit was cloned whole each time, which under the race detector
	// made a test of a few dozen commits take minutes. Either the bytes
	// [dirtyLo, dirtyHi) written since the last Sync, or, once the size
	// changed (grown, truncated), all of it (resized). Guarded by mu.
	dirtyLo, dirtyHi int64
	resized          bool
}

// written notes that data[lo:hi] changed. n.mu is held.
func (n *memNode) written(lo, hi int64) {
	if n.dirtyHi <= n.dirtyLo {
		n.dirtyLo, n.dirtyHi = lo, hi
		return
	}
	n.dirtyLo, n.dirtyHi = min(n.dirtyLo, lo), max(n.dirtyHi, hi)
}

// NewMem returns an empty MemFS.
func NewMem() *MemFS {
	return &MemFS{root: newDir(0o755)}
}

func newDir(perm os.FileMode) *memNode {
	return &memNode{dir: true, perm: perm, entries: map[string]*memNode{}, synced: map[string]*memNode{}, dirty: map[string]bool{}}
}

// setEntry names n in directory d. m.mu is held.
func (d *memNode) setEntry(name string, n *memNode) {
	d.entries[name] = n
	if !n.dir {
		d.dirty[name] = true
	}
}

// delEntry removes a file's name from directory d. m.mu is held.
func (d *memNode) delEntry(name string) {
	delete(d.entries, name)
	d.dirty[name] = true
}

// split turns a name into its path elements; names are relative to the
// root whether or not they start with a separator.
func split(name string) []string {
	name = filepath.ToSlash(filepath.Clean(name))
	name = strings.Trim(name, "/")
	if name == "" || name == "." {
		return nil
	}
	return strings.Split(name, "/")
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// walk returns the directory holding name's last element, and that
// element. m.mu is held.
func (m *MemFS) walk(op, name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", pathErr(op, name, syscall.EINVAL)
	}
	d := m.root
	for _, p := range parts[:len(parts)-1] {
		next := d.entries[p]
		if next == nil {
			return nil, "", pathErr(op, name, syscall.ENOENT)
		}
		if !next.dir {
			return nil, "", pathErr(op, name, syscall.ENOTDIR)
		}
		d = next
	}
	return d, parts[len(parts)-1], nil
}

// lookup returns name's node. m.mu is held.
func (m *MemFS) lookup(op, name string) (*memNode, error) {
	if len(split(name)) == 0 {
		return m.root, nil
	}
	d, base, err := m.walk(op, name)
	if err != nil {
		return nil, err
	}
	n := d.entries[base]
	if n == nil {
		return nil, pathErr(op, name, syscall.ENOENT)
	}
	return n, nil
}

func (m *MemFS) Create(name string) (File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
}

func (m *MemFS) Open(name string) (File, error) { return m.OpenFile(name, os.O_RDONLY, 0) }

func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", name)
	switch {
	case errors.Is(err, fs.ErrNotExist) && flag&os.O_CREATE != 0:
		d, base, err := m.walk("open", name)
		if err != nil {
			return nil, err
		}
		n = &memNode{perm: perm.Perm(), mtime: time.Now()}
		d.setEntry(base, n)
	case err != nil:
		return nil, err
	case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, syscall.EEXIST)
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	if n.dir && acc != os.O_RDONLY {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	if flag&os.O_TRUNC != 0 && acc != os.O_RDONLY {
		n.mu.Lock()
		n.data = n.data[:0:0]
		n.resized = true
		n.mtime = time.Now()
		n.mu.Unlock()
	}
	return &memFile{node: n, name: name, read: acc != os.O_WRONLY, write: acc != os.O_RDONLY, appnd: flag&os.O_APPEND != 0}, nil
}

func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.walk("remove", name)
	if err != nil {
		return err
	}
	n := d.entries[base]
	if n == nil {
		return pathErr("remove", name, syscall.ENOENT)
	}
	if n.dir && len(n.entries) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	if n.dir {
		delete(d.entries, base)
		delete(d.synced, base) // directories are durable as made, and as removed
	} else {
		d.delEntry(base)
	}
	return nil
}

func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.walk("removeall", name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if n := d.entries[base]; n != nil && n.dir {
		delete(d.synced, base)
		delete(d.entries, base)
	} else if n != nil {
		d.delEntry(base)
	}
	return nil
}

func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, ob, err := m.walk("rename", oldname)
	if err != nil {
		return err
	}
	n := od.entries[ob]
	if n == nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.ENOENT}
	}
	nd, nb, err := m.walk("rename", newname)
	if err != nil {
		return err
	}
	if old := nd.entries[nb]; old != nil {
		if old == n {
			return nil
		}
		if old.dir != n.dir || (old.dir && len(old.entries) > 0) {
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EEXIST}
		}
	}
	if n.dir {
		delete(od.entries, ob)
		nd.entries[nb] = n
		delete(od.synced, ob)
		nd.synced[nb] = n
		return nil
	}
	od.delEntry(ob)
	nd.setEntry(nb, n)
	return nil
}

func (m *MemFS) Link(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("link", oldname)
	if err != nil {
		return err
	}
	if n.dir {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EPERM}
	}
	d, base, err := m.walk("link", newname)
	if err != nil {
		return err
	}
	if d.entries[base] != nil {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EEXIST}
	}
	d.setEntry(base, n)
	return nil
}

func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.root
	for _, p := range split(dir) {
		next := d.entries[p]
		if next == nil {
			next = newDir(perm.Perm())
			d.entries[p] = next
			d.synced[p] = next
		}
		if !next.dir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		d = next
	}
	return nil
}

func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return n.info(filepath.Base(name)), nil
}

func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", dir)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, pathErr("readdirent", dir, syscall.ENOTDIR)
	}
	return slices.Sorted(maps.Keys(n.entries)), nil
}

func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", dir)
	if err != nil {
		return err
	}
	if !n.dir {
		return pathErr("fsync", dir, syscall.ENOTDIR)
	}
	for name := range n.dirty {
		if c := n.entries[name]; c != nil {
			n.synced[name] = c
		} else {
			delete(n.synced, name)
		}
	}
	clear(n.dirty)
	return nil
}

// loseDir is a failed writeback of dir: the names changed since its last
// SyncDir are no longer dirty, so that no later SyncDir makes them
// durable; with evict the directory reads as its disk has it, those
// names as they were at the last SyncDir.
func (m *MemFS) loseDir(dir string, evict bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("fsync", dir)
	if err != nil || !n.dir {
		return
	}
	if evict {
		for name := range n.dirty {
			if c := n.synced[name]; c != nil {
				n.entries[name] = c
			} else {
				delete(n.entries, name)
			}
		}
	}
	clear(n.dirty)
}

func (m *MemFS) Lock(name string) (io.Closer, error) {
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	f.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("lock", name)
	if err != nil {
		return nil, err
	}
	if n.locked {
		return nil, pathErr("lock", name, fs.ErrExist)
	}
	n.locked = true
	return &memLock{fs: m, node: n}, nil
}

type memLock struct {
	fs   *MemFS
	node *memNode
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.fs.mu.Lock()
		l.node.locked = false
		l.fs.mu.Unlock()
	})
	return nil
}

// CrashClone returns what a power loss now would leave: each file with
// the contents it had at its last Sync, under the names its directory had
// at its last SyncDir. Everything in the clone is durable.
func (m *MemFS) CrashClone() *MemFS { return m.clone(true) }

// Clone returns what the death of the process now would leave: every file
// as written, under its current names. Its files' contents are no more
// durable than they were (the kernel's page cache outlives a process), so
// a CrashClone of the clone still loses what no Sync made durable.
func (m *MemFS) Clone() *MemFS { return m.clone(false) }

func (m *MemFS) clone(durableOnly bool) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*memNode]*memNode{} // hard links stay one file
	var cp func(n *memNode) *memNode
	cp = func(n *memNode) *memNode {
		if c := seen[n]; c != nil {
			return c
		}
		if n.dir {
			c := newDir(n.perm)
			seen[n] = c
			from := n.entries
			if durableOnly {
				from = n.synced
			}
			for name, child := range from {
				c.entries[name] = cp(child)
			}
			c.synced = maps.Clone(c.entries)
			return c
		}
		n.mu.RLock()
		defer n.mu.RUnlock()
		if durableOnly {
			data := slices.Clone(n.durable)
			c := &memNode{perm: n.perm, data: data, durable: slices.Clone(data), mtime: n.mtime}
			seen[n] = c
			return c
		}
		// The page cache outlives the process: what was not durable
		// still is not, and a failed writeback (Rule.Lose) is still
		// lost to a power loss after the restart.
		c := &memNode{perm: n.perm, data: slices.Clone(n.data), durable: slices.Clone(n.durable), mtime: n.mtime,
			dirtyLo: n.dirtyLo, dirtyHi: n.dirtyHi, resized: n.resized}
		seen[n] = c
		return c
	}
	return &MemFS{root: cp(m.root)}
}

func (n *memNode) info(name string) os.FileInfo {
	if n.dir {
		return memInfo{name: name, mode: fs.ModeDir | n.perm}
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return memInfo{name: name, size: int64(len(n.data)), mode: n.perm, mtime: n.mtime}
}

type memInfo struct {
	name  string
	size  int64
	mode  os.FileMode
	mtime time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() os.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return i.mtime }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

// memFile is an open MemFS file.
type memFile struct {
	node               *memNode
	name               string
	read, write, appnd bool
	off                int64 // for Read and Write
	closed             bool
}

func (f *memFile) check(op string, write bool) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, os.ErrClosed)
	case f.node.dir && (op == "read" || write):
		return pathErr(op, f.name, syscall.EISDIR)
	case write && !f.write, !write && !f.read:
		return pathErr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, syscall.EINVAL)
	}
	f.node.mu.RLock()
	defer f.node.mu.RUnlock()
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if f.appnd {
		f.node.mu.RLock()
		f.off = int64(len(f.node.data))
		f.node.mu.RUnlock()
	}
	n, err := f.WriteAt(p, f.off)
	f.off += int64(n)
	return n, err
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	f.node.grow(off + int64(len(p)))
	copy(f.node.data[off:], p)
	f.node.written(off, off+int64(len(p)))
	f.node.mtime = time.Now()
	return len(p), nil
}

// grow makes data at least size bytes long, zero-filled. n.mu is held.
func (n *memNode) grow(size int64) {
	if size <= int64(len(n.data)) {
		return
	}
	n.resized = true
	if size <= int64(cap(n.data)) {
		old := len(n.data)
		n.data = n.data[:size]
		clear(n.data[old:])
		return
	}
	n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
}

func (f *memFile) Close() error {
	if f.closed {
		return pathErr("close", f.name, os.ErrClosed)
	}
	f.closed = true
	return nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Stat() (os.FileInfo, error) {
	if f.closed {
		return nil, pathErr("stat", f.name, os.ErrClosed)
	}
	return f.node.info(filepath.Base(f.name)), nil
}

func (f *memFile) Sync() error {
	if f.closed {
		return pathErr("sync", f.name, os.ErrClosed)
	}
	if f.node.dir {
		return nil
	}
	n := f.node
	n.mu.Lock()
	switch {
	case n.resized || len(n.durable) != len(n.data):
		n.durable = slices.Clone(n.data)
	case n.dirtyHi > n.dirtyLo:
		copy(n.durable[n.dirtyLo:n.dirtyHi], n.data[n.dirtyLo:n.dirtyHi])
	}
	n.resized, n.dirtyLo, n.dirtyHi = false, 0, 0
	n.mu.Unlock()
	return nil
}

// lose is a failed writeback: what was written since the last Sync
// is no longer dirty, so that no later Sync makes it durable. The file's
// size is kept (its metadata may have gone to disk), with zeros past
// what was durable; with evict its contents become what is durable.
func (n *memNode) lose(evict bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := make([]byte, len(n.data))
	copy(d, n.durable)
	n.durable = d
	if evict {
		n.data = slices.Clone(d)
	}
	n.resized, n.dirtyLo, n.dirtyHi = false, 0, 0
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	if size < int64(len(f.node.data)) {
		f.node.data = f.node.data[:size]
		f.node.resized = true
	} else {
		f.node.grow(size)
	}
	f.node.mtime = time.Now()
	return nil
}

func (f *memFile) Fallocate(off, n int64) error {
	if err := f.check("fallocate", true); err != nil {
		return err
	}
	if off < 0 || n <= 0 {
		return pathErr("fallocate", f.name, syscall.EINVAL)
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	f.node.grow(off + n)
	return nil
}

func (f *memFile) Map(int, bool) ([]byte, error) {
	return nil, pathErr("mmap", f.name, errors.ErrUnsupported)
}

func (f *memFile) Unmap([]byte) error { return nil }
