package bufpool

import (
	"math/bits"
	"sync"
)

const (
	minShift = 16 // 64 KiB: smaller buffers are cheap to allocate
	maxShift = 26 // 64 MiB: larger ones are rare and not kept
)

var pools [maxShift - minShift + 1]sync.Pool

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

// Get returns a buffer of length n, from the pool when one of its class is
// free. Its contents are arbitrary.
func Get(n int) []byte {
	if n < 1<<minShift/2 {
		return make([]byte, n)
	}
	c, ok := class(n)
	if !ok {
		return make([]byte, n)
	}
	if p, _ := pools[c].Get().(*[]byte); p != nil {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(c+minShift))
}

// Put gives b back for reuse. b must not be used afterwards. Buffers that
// did not come from Get (by their capacity) are left to the collector.
func Put(b []byte) {
	c := cap(b)
	if c < 1<<minShift || c&(c-1) != 0 {
		return
	}
	k, ok := class(c)
	if !ok {
		return
	}
	b = b[:c]
	pools[k].Put(&b)
}
