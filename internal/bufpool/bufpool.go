package bufpool

import (
	"math/bits"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	minShift = 16 // 64 KiB: smaller buffers are cheap to allocate
	maxShift = 26 // 64 MiB: larger ones are rare and not kept

	// DefaultRetain is the bytes of free buffers kept unless SetRetain
	// says otherwise.
	DefaultRetain = 512 << 20
)

// The free buffers are kept live, not in a sync.Pool, so that a
// collection does not hand their pages back to the kernel between one
// burst of transfers and the next.
var free = struct {
	sync.Mutex
	retain  int
	bytes   int
	classes [maxShift - minShift + 1][][]byte
	// used is when each class was last asked for (a tick of clock): a
	// full pool makes room for the class in use by dropping buffers of
	// the class unused longest, so that a workload that moves from one
	// region size to another does not miss the pool forever.
	used  [maxShift - minShift + 1]uint64
	clock uint64
}{retain: DefaultRetain}

// SetRetain bounds the bytes of free buffers kept for reuse: a server
// sets it to what it may hold in flight, so that a steady stream of
// transfers reuses warm memory.
func SetRetain(n int) {
	free.Lock()
	defer free.Unlock()
	free.retain = n
	for k := range free.classes {
		for free.bytes > n && len(free.classes[k]) > 0 {
			last := len(free.classes[k]) - 1
			free.bytes -= cap(free.classes[k][last])
			free.classes[k][last] = nil
			free.classes[k] = free.classes[k][:last]
		}
	}
}

func class(n int) (int, bool) {
	if n <= 1<<minShift {
		return 0, true
	}
	s := bits.Len(uint(n - 1))
	if s > maxShift {
		return 0, false
	}
	return s - minShift, true
}

// Get returns a buffer of length n, a free one of its class when there is
// one. Its contents are arbitrary.
func Get(n int) []byte {
	if n < 1<<minShift/2 {
		return make([]byte, n)
	}
	c, ok := class(n)
	if !ok {
		return make([]byte, n)
	}
	free.Lock()
	free.clock++
	free.used[c] = free.clock
	if k := len(free.classes[c]); k > 0 {
		b := free.classes[c][k-1]
		free.classes[c][k-1] = nil
		free.classes[c] = free.classes[c][:k-1]
		free.bytes -= cap(b)
		free.Unlock()
		return b[:n]
	}
	free.Unlock()
	b := make([]byte, n, 1<<(c+minShift))
	adviseHuge(b[:cap(b)])
	return b
}

// SizeOf returns the capacity of a buffer Get(n) returns: the memory it
// holds.
func SizeOf(n int) int {
	if n < 1<<minShift/2 {
		return n
	}
	c, ok := class(n)
	if !ok {
		return n
	}
	return 1 << (c + minShift)
}

// Put gives b back for reuse. b must not be used afterwards. Buffers that
// did not come from Get (by their capacity), or beyond the retained bound,
// are left to the collector.
func Put(b []byte) {
	c := cap(b)
	if c < 1<<minShift || c&(c-1) != 0 {
		return
	}
	k, ok := class(c)
	if !ok {
		return
	}
	free.Lock()
	defer free.Unlock()
	if c > free.retain {
		return // it would not fit however much were dropped
	}
	for free.bytes+c > free.retain {
		if !dropStale(k, free.bytes+c-free.retain) {
			return
		}
	}
	free.bytes += c
	free.classes[k] = append(free.classes[k], b[:c])
}

// hugePage is the size of an x86-64 transparent huge page.
const hugePage = 2 << 20

// adviseHuge asks for transparent huge pages under b's aligned middle, so
// that its first touch faults once per 2 MiB rather than once per 4 KiB:
// under a hypervisor, most of the cost of a fresh buffer. Only advice:
// where the kernel does not take it, nothing changes.
func adviseHuge(b []byte) {
	if len(b) < 2*hugePage {
		return
	}
	start := uintptr(unsafe.Pointer(&b[0]))
	lo := (start + hugePage - 1) &^ (hugePage - 1)
	hi := (start + uintptr(len(b))) &^ (hugePage - 1)
	if hi > lo {
		_ = unix.Madvise(b[lo-start:hi-start], unix.MADV_HUGEPAGE)
	}
}

// dropStale drops the oldest free buffers, up to need bytes, of the
// class, other than keep, that was asked for least recently, and only if
// that was before keep was. It reports whether it dropped any. free is
// locked.
func dropStale(keep, need int) bool {
	victim := -1
	for k := range free.classes {
		if k != keep && len(free.classes[k]) > 0 && free.used[k] < free.used[keep] &&
			(victim < 0 || free.used[k] < free.used[victim]) {
			victim = k
		}
	}
	if victim < 0 {
		return false
	}
	// The oldest buffers of the class go (the newest are warmest), all
	// that are needed at once.
	l := free.classes[victim]
	n, dropped := 0, 0
	for n < len(l) && dropped < need {
		dropped += cap(l[n])
		n++
	}
	free.bytes -= dropped
	rest := copy(l, l[n:])
	clear(l[rest:])
	free.classes[victim] = l[:rest]
	return true
}
