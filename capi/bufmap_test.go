package capi_test

import (
	"testing"
	"unsafe"

	"github.com/pdcgo/pdc/capi"
)

// TestBufferMapsAndLocks writes through PDC's older path (map, write
// lock, release) from a 2-D sub-box of a buffer, over two data servers,
// and reads back by a region transfer and by a read lock, value by value.
func TestBufferMapsAndLocks(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")
	id, cont, prop := objSetup(t, p, 6, 8)
	obj := p.ObjCreate(cont, "mapped", prop)
	if obj == 0 {
		t.Fatal(p.lines())
	}
	all := i32s(48, func(int) int32 { return -1 })
	if p.TransferNow(obj, unsafe.Pointer(&all[0]), capi.AccessWrite, 2, []uint64{0, 0}, []uint64{6, 8}) != capi.Succeed {
		t.Fatal(p.lines())
	}

	// Buffer 4x6; its sub-box (1..3, 2..5) goes to rows 2..4, cols 3..6.
	buf := make([]byte, 4*24)
	local := p.RegionCreate(2, []uint64{1, 2}, []uint64{3, 4})
	remote := p.RegionCreate(2, []uint64{2, 3}, []uint64{3, 4})
	if p.BufObjMap(unsafe.Pointer(&buf[0]), pdcInt, local, obj, remote) != capi.Succeed ||
		p.RegObtainLock(obj, remote, capi.AccessWrite, capi.LockBlock) != capi.Succeed {
		t.Fatal(p.lines())
	}
	// Filled after the map: release writes the buffer as it is then.
	copy(buf, i32s(24, func(i int) int32 { return int32(1000 + i) }))
	if p.RegReleaseLock(obj, remote, capi.AccessWrite) != capi.Succeed || p.BufObjUnmap(obj, remote) != capi.Succeed {
		t.Fatal(p.lines())
	}
	want := func(r, c int) int32 {
		if r >= 2 && r < 5 && c >= 3 && c < 7 {
			return int32(1000 + (r-1)*6 + (c - 1))
		}
		return -1
	}
	got := make([]byte, 4*48)
	if p.TransferNow(obj, unsafe.Pointer(&got[0]), capi.AccessRead, 2, []uint64{0, 0}, []uint64{6, 8}) != capi.Succeed {
		t.Fatal(p.lines())
	}
	lockGot := make([]byte, 4*48)
	whole := p.RegionCreate(2, []uint64{0, 0}, []uint64{6, 8})
	if p.BufObjMap(unsafe.Pointer(&lockGot[0]), pdcInt, whole, obj, whole) != capi.Succeed ||
		p.RegObtainLock(obj, whole, capi.AccessRead, capi.LockNoBlock) != capi.Succeed ||
		p.RegReleaseLock(obj, whole, capi.AccessRead) != capi.Succeed || p.BufObjUnmap(obj, whole) != capi.Succeed {
		t.Fatal(p.lines())
	}
	for r := range 6 {
		for c := range 8 {
			if v := i32(got, r*8+c); v != want(r, c) {
				t.Fatalf("transfer read (%d,%d) = %d, want %d", r, c, v, want(r, c))
			}
			if v := i32(lockGot, r*8+c); v != want(r, c) {
				t.Fatalf("lock read (%d,%d) = %d, want %d", r, c, v, want(r, c))
			}
		}
	}
	p.quiet(t)
	checkBadMapsAndLocks(t, p, id, obj, remote, local, prop, cont)
}

func checkBadMapsAndLocks(t *testing.T, p *proc, id, obj, remote, local, prop, cont uint64) {
	t.Helper()
	buf := make([]byte, 4*48)
	b := unsafe.Pointer(&buf[0])
	small := p.RegionCreate(2, []uint64{0, 0}, []uint64{2, 4})
	past := p.RegionCreate(2, []uint64{4, 6}, []uint64{3, 4})
	fails := []struct {
		name string
		rc   func() int
		want []string
	}{
		{"release without lock", func() int { return p.RegReleaseLock(obj, remote, capi.AccessWrite) }, []string{`object "mapped"`, "holds no lock"}},
		{"unmap without map", func() int { return p.BufObjUnmap(obj, remote) }, []string{"is not mapped"}},
		{"sizes differ", func() int { return p.BufObjMap(b, pdcInt, small, obj, remote) }, []string{"holds 8 elements", "holds 12"}},
		{"type size", func() int { return p.BufObjMap(b, pdcDouble, local, obj, remote) }, []string{"holds int (4-byte elements), the buffer float64 (8-byte)"}},
		{"past dims", func() int { return p.BufObjMap(b, pdcInt, local, obj, past) }, []string{"past the object"}},
		{"NULL buf", func() int { return p.BufObjMap(nil, pdcInt, local, obj, remote) }, []string{"buf is NULL"}},
		{"region is not a region", func() int { return p.BufObjMap(b, pdcInt, prop, obj, remote) }, []string{"local region", "not a region"}},
		{"object is a container", func() int { return p.RegObtainLock(cont, remote, capi.AccessRead, capi.LockBlock) }, []string{"not a object"}},
		{"bad mode", func() int { return p.RegObtainLock(obj, remote, capi.AccessRead, 5) }, []string{"lock mode 5"}},
	}
	for _, f := range fails {
		if f.rc() != capi.Fail {
			t.Fatalf("%s succeeded", f.name)
		}
		p.wantLine(t, f.want...)
	}
	// Twice: the second map, lock fails; the wrong access's release fails.
	if p.BufObjMap(b, pdcInt, local, obj, remote) != capi.Succeed || p.BufObjMap(b, pdcInt, local, obj, remote) != capi.Fail {
		t.Fatal(p.lines())
	}
	p.wantLine(t, "already mapped")
	if p.RegObtainLock(obj, remote, capi.AccessRead, capi.LockBlock) != capi.Succeed ||
		p.RegObtainLock(obj, remote, capi.AccessRead, capi.LockBlock) != capi.Fail {
		t.Fatal(p.lines())
	}
	p.wantLine(t, "already locked for PDC_READ")
	if p.RegReleaseLock(obj, remote, capi.AccessWrite) != capi.Fail {
		t.Fatal("release of the other access succeeded")
	}
	p.wantLine(t, "locked for PDC_READ, not PDC_WRITE")
	// Maps and locks go with the object handle.
	if p.ObjClose(obj) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if p.RegReleaseLock(obj, remote, capi.AccessRead) != capi.Fail {
		t.Fatal("release after close succeeded")
	}
	p.wantLine(t, "closed handle")
	// A lock with no map moves nothing and succeeds.
	o2 := p.ObjOpen("mapped", id)
	if o2 == 0 || p.RegObtainLock(o2, small, capi.AccessWrite, capi.LockNoBlock) != capi.Succeed ||
		p.RegReleaseLock(o2, small, capi.AccessWrite) != capi.Succeed || p.BufObjUnmap(o2, remote) != capi.Fail {
		t.Fatal(p.lines())
	}
	p.wantLine(t, "is not mapped")
}
