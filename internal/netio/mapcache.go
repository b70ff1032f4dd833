package netio

import (
	"container/list"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Mapping a file for every send costs a page-table entry per page
// (MAP_POPULATE) and a TLB shootdown at unmap: measured with perf, about as
// much sender CPU as the copy into the socket. Files sent again (a region
// file read by many clients, a staged file fetched by many consumers) keep
// their mapping instead, in an LRU bounded in mapped bytes. A mapping is
// keyed by the file's identity and size, so a file that changed size maps
// afresh; one rewritten in place is seen through the shared mapping, and a
// write from a mapping whose file shrank fails (EFAULT), never faults the
// process, since the kernel makes the copy.
const (
	mapCacheBytes = 8 << 30 // address space, not memory: the pages stay in the page cache
	mapCacheEntry = 1 << 30 // larger files are mapped per send, a window at a time
)

type fileKey struct {
	dev, ino uint64
	size     int64
}

type mapping struct {
	key  fileKey
	data []byte
	refs int
	dead bool // evicted or replaced: unmapped when the last user is done
	el   *list.Element
}

type mapCache struct {
	mu    sync.Mutex
	byKey map[fileKey]*mapping
	lru   *list.List // of *mapping, most recent first
	bytes int64
}

var maps = &mapCache{byKey: map[fileKey]*mapping{}, lru: list.New()}

// acquire returns a read-only mapping of the whole of f, or nil if f is
// too large to cache or cannot be mapped. release must be called when the
// bytes are no longer used.
func (c *mapCache) acquire(f *os.File) (m *mapping, size int64) {
	var st unix.Stat_t
	fc, err := f.SyscallConn()
	if err != nil {
		return nil, 0
	}
	if cerr := fc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) }); cerr != nil || err != nil {
		return nil, 0
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size <= 0 || st.Size > mapCacheEntry {
		return nil, st.Size
	}
	key := fileKey{dev: st.Dev, ino: st.Ino, size: st.Size}
	c.mu.Lock()
	if m := c.byKey[key]; m != nil {
		m.refs++
		c.lru.MoveToFront(m.el)
		c.mu.Unlock()
		return m, st.Size
	}
	c.mu.Unlock()

	var data []byte
	if cerr := fc.Control(func(fd uintptr) {
		data, err = unix.Mmap(int(fd), 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	}); cerr != nil || err != nil {
		return nil, st.Size
	}
	m = &mapping{key: key, data: data, refs: 1}
	c.mu.Lock()
	if old := c.byKey[key]; old != nil {
		// Mapped meanwhile by another sender: use that one.
		old.refs++
		c.lru.MoveToFront(old.el)
		c.mu.Unlock()
		_ = unix.Munmap(data)
		return old, st.Size
	}
	m.el = c.lru.PushFront(m)
	c.byKey[key] = m
	c.bytes += st.Size
	var victims [][]byte
	for c.bytes > mapCacheBytes && c.lru.Len() > 1 {
		v := c.lru.Back().Value.(*mapping)
		c.removeLocked(v)
		if v.refs == 0 {
			victims = append(victims, v.data)
		}
	}
	c.mu.Unlock()
	for _, d := range victims {
		_ = unix.Munmap(d)
	}
	return m, st.Size
}

func (c *mapCache) removeLocked(m *mapping) {
	c.lru.Remove(m.el)
	delete(c.byKey, m.key)
	c.bytes -= m.key.size
	m.dead = true
}

func (c *mapCache) release(m *mapping) {
	c.mu.Lock()
	m.refs--
	unmap := m.dead && m.refs == 0
	c.mu.Unlock()
	if unmap {
		_ = unix.Munmap(m.data)
	}
}
