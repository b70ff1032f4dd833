package capi_test

import (
	"syscall"
	"testing"
	"unsafe"

	"github.com/pdcgo/pdc/capi"
)

// TestTransferNowBadInput: pdc_region_transfer_now refuses odd and
// hostile regions, each with one line, and the object still works.
func TestTransferNowBadInput(t *testing.T) {
	tc := startCluster(t, "node-a")
	p := tc.node("node-a")
	_, cont, prop := objSetup(t, p, 4, 4)
	obj := p.ObjCreate(cont, "now", prop)
	if obj == 0 {
		t.Fatal(p.lines())
	}
	// Outside Go's heap, as a C program's buffer is: a region claiming
	// far more than the buffer holds is made into a slice before it is
	// refused, which the race detector's pointer checks refuse for Go
	// memory.
	buf, err := syscall.Mmap(-1, 0, 64<<10, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(buf) })
	b := unsafe.Pointer(&buf[0])
	huge := ^uint64(0)
	for _, c := range []struct {
		name       string
		ndim       uint64
		off, size  []uint64
		wantInLine string
	}{
		{"ndim 0", 0, nil, nil, "ndim 0"},
		{"ndim 9", 9, nil, nil, "ndim 9"},
		{"ndim mismatch", 1, []uint64{0}, []uint64{4}, "dims"},
		{"empty dim", 2, []uint64{0, 0}, []uint64{0, 4}, "empty"},
		{"end past 2^64", 2, []uint64{huge, 0}, []uint64{2, 2}, "2^64"},
		{"volume past 2^64", 2, []uint64{0, 0}, []uint64{huge, huge}, ""},
		{"buffer too large", 2, []uint64{0, 0}, []uint64{1 << 40, 4}, ""},
		{"past dims", 2, []uint64{3, 0}, []uint64{2, 4}, "past"},
		{"offset past dims", 2, []uint64{1 << 62, 0}, []uint64{1, 1}, "past"},
	} {
		for _, access := range []int{capi.AccessWrite, capi.AccessRead} {
			if rc := p.TransferNow(obj, b, access, c.ndim, c.off, c.size); rc != capi.Fail {
				t.Fatalf("%s: transfer_now returned %d", c.name, rc)
			}
			if c.wantInLine != "" {
				p.wantLine(t, c.wantInLine)
			} else if l := p.lines(); len(l) != 1 {
				t.Fatalf("%s: %d lines: %q", c.name, len(l), l)
			}
		}
	}
	for i := range 16 {
		buf[4*i] = byte(i + 1)
	}
	if p.TransferNow(obj, b, capi.AccessWrite, 2, []uint64{0, 0}, []uint64{4, 4}) != capi.Succeed {
		t.Fatal(p.lines())
	}
	got := make([]byte, 16)
	// One row, into a buffer of exactly its size.
	if p.TransferNow(obj, unsafe.Pointer(&got[0]), capi.AccessRead, 2, []uint64{3, 0}, []uint64{1, 4}) != capi.Succeed {
		t.Fatal(p.lines())
	}
	for i := range 4 {
		if got[4*i] != byte(12+i+1) {
			t.Fatalf("row 3 read back %v", got)
		}
	}
}
