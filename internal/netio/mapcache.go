package netio

import (
	"container/list"
	"os"
	"sync"
	"time"

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
//
// A cached mapping keeps its file's storage allocated even once the file
// is deleted, so files already deleted are not cached, and SweepMappings
// (run by the transport's janitor) drops mappings idle for a while or
// whose file has since been deleted. Only sends of most of a file map it
// whole: a small section of a large file is mapped per send, a window at a
// time.
const (
	mapCacheBytes   = 8 << 30 // address space, not memory: the pages stay in the page cache
	mapCacheEntry   = 1 << 30 // larger files are mapped per send, a window at a time
	mapCacheEntries = 256     // each holds a descriptor to watch its file
)

type fileKey struct {
	dev, ino uint64
	size     int64
}

type mapping struct {
	key  fileKey
	data []byte
	file *os.File // a duplicate descriptor, to see the file deleted
	refs int
	used time.Time
	dead bool // evicted or replaced: unmapped when the last user is done
	el   *list.Element
}

func (m *mapping) unmap() {
	_ = unix.Munmap(m.data)
	_ = m.file.Close()
}

type mapCache struct {
	mu    sync.Mutex
	byKey map[fileKey]*mapping
	lru   *list.List // of *mapping, most recent first
	bytes int64
}

var maps = &mapCache{byKey: map[fileKey]*mapping{}, lru: list.New()}

// acquire returns a read-only mapping of the whole of f for a send of n
// bytes of it, or nil if f is not worth caching (too large, a small part
// of it sent, already deleted) or cannot be mapped. release must be called
// when the bytes are no longer used.
func (c *mapCache) acquire(f *os.File, n int64) (m *mapping, size int64) {
	var st unix.Stat_t
	fc, err := f.SyscallConn()
	if err != nil {
		return nil, 0
	}
	if cerr := fc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) }); cerr != nil || err != nil {
		return nil, 0
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size <= 0 || st.Size > mapCacheEntry || st.Nlink == 0 || n < st.Size/2 {
		return nil, st.Size
	}
	key := fileKey{dev: st.Dev, ino: st.Ino, size: st.Size}
	now := time.Now()
	c.mu.Lock()
	if m := c.byKey[key]; m != nil {
		m.refs++
		m.used = now
		c.lru.MoveToFront(m.el)
		c.mu.Unlock()
		return m, st.Size
	}
	c.mu.Unlock()

	var data []byte
	var dup int
	if cerr := fc.Control(func(fd uintptr) {
		if dup, err = unix.Dup(int(fd)); err != nil {
			return
		}
		if data, err = unix.Mmap(int(fd), 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			unix.Close(dup)
		}
	}); cerr != nil || err != nil {
		return nil, st.Size
	}
	unix.CloseOnExec(dup)
	m = &mapping{key: key, data: data, file: os.NewFile(uintptr(dup), "mapped"), refs: 1, used: now}
	c.mu.Lock()
	if old := c.byKey[key]; old != nil {
		// Mapped meanwhile by another sender: use that one.
		old.refs++
		old.used = now
		c.lru.MoveToFront(old.el)
		c.mu.Unlock()
		m.unmap()
		return old, st.Size
	}
	m.el = c.lru.PushFront(m)
	c.byKey[key] = m
	c.bytes += st.Size
	var victims []*mapping
	for (c.bytes > mapCacheBytes || c.lru.Len() > mapCacheEntries) && c.lru.Len() > 1 {
		v := c.lru.Back().Value.(*mapping)
		c.removeLocked(v)
		if v.refs == 0 {
			victims = append(victims, v)
		}
	}
	c.mu.Unlock()
	for _, v := range victims {
		v.unmap()
	}
	return m, st.Size
}

// SweepMappings drops cached file mappings that nobody is using and that
// have been idle for idle, or whose file has been deleted, so that they do
// not keep the files' storage allocated. The data transport's janitor
// calls it.
func SweepMappings(idle time.Duration) {
	maps.sweep(time.Now().Add(-idle))
}

func (c *mapCache) sweep(before time.Time) {
	var victims []*mapping
	c.mu.Lock()
	for el := c.lru.Front(); el != nil; {
		m := el.Value.(*mapping)
		el = el.Next()
		if m.refs > 0 {
			continue
		}
		var st unix.Stat_t
		if m.used.Before(before) || unix.Fstat(int(m.file.Fd()), &st) != nil || st.Nlink == 0 {
			c.removeLocked(m)
			victims = append(victims, m)
		}
	}
	c.mu.Unlock()
	for _, v := range victims {
		v.unmap()
	}
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
		m.unmap()
	}
}
