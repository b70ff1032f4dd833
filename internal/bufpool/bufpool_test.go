package bufpool

import "testing"

func TestGetSizes(t *testing.T) {
	for _, n := range []int{0, 1, 1000, 32 << 10, 64<<10 - 1, 64 << 10, 64<<10 + 1, 1 << 20, 3 << 20, 64 << 20, 64<<20 + 1} {
		b := Get(n)
		if len(b) != n {
			t.Fatalf("Get(%d) has length %d", n, len(b))
		}
		if n > 64<<10 && n <= 64<<20 && cap(b)&(cap(b)-1) != 0 {
			t.Fatalf("Get(%d) has capacity %d, not a power of two", n, cap(b))
		}
		Put(b)
	}
}

func TestReuse(t *testing.T) {
	b := Get(1 << 20)
	b[0] = 42
	Put(b)
	// sync.Pool may drop items at any time, so only check that what comes
	// back is well formed, and that a buffer of the wrong class is not
	// handed out.
	c := Get(2 << 20)
	if len(c) != 2<<20 || cap(c) != 2<<20 {
		t.Fatalf("Get(2 MiB) gave len %d cap %d", len(c), cap(c))
	}
	d := Get(1<<20 - 5)
	if len(d) != 1<<20-5 || cap(d) != 1<<20 {
		t.Fatalf("Get(1 MiB - 5) gave len %d cap %d", len(d), cap(d))
	}
}

func TestPutForeign(t *testing.T) {
	Put(make([]byte, 100<<10)) // not a power of two: ignored
	Put(nil)
	if b := Get(100 << 10); cap(b) != 128<<10 {
		t.Fatalf("Get(100 KiB) gave cap %d, want 128 KiB", cap(b))
	}
}

func TestRetainBound(t *testing.T) {
	var bs [][]byte
	SetRetain(0) // start from nothing kept
	SetRetain(128 << 20)
	defer SetRetain(DefaultRetain)
	for range 4 {
		bs = append(bs, Get(64<<20))
	}
	for _, b := range bs {
		Put(b)
	}
	free.Lock()
	kept := free.bytes
	free.Unlock()
	if kept != 128<<20 {
		t.Fatalf("kept %d free bytes, want the bound, %d", kept, 128<<20)
	}
	SetRetain(64 << 20)
	free.Lock()
	kept = free.bytes
	free.Unlock()
	if kept != 64<<20 {
		t.Fatalf("after lowering the bound, kept %d free bytes, want %d", kept, 64<<20)
	}

}

// A pool full of buffers of one size still keeps the buffers of the size
// now in use: a workload moving from small regions to large ones must not
// allocate fresh memory for every large one.
func TestFullPoolMakesRoomForTheSizeInUse(t *testing.T) {
	SetRetain(0) // start empty
	SetRetain(8 << 20)
	t.Cleanup(func() { SetRetain(DefaultRetain) })
	var small [][]byte
	for range 128 { // 8 MiB of 64 KiB buffers: the pool is full
		small = append(small, Get(64<<10))
	}
	for _, b := range small {
		Put(b)
	}
	big := Get(1 << 20)
	Put(big)
	again := Get(1 << 20)
	if &again[0] != &big[0] {
		t.Fatal("a 1 MiB buffer given back to a pool full of 64 KiB buffers was not kept")
	}
	Put(again)
}
