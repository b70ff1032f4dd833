package capi_test

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/pdcgo/pdc/capi"
)

const (
	pdcInt    = 0 // PDC_INT
	pdcDouble = 2 // PDC_DOUBLE
	pdcInt64  = 8 // PDC_INT64
	pdcString = 4 // PDC_STRING
)

// objSetup is a connection, a container and an object property with dims.
func objSetup(t *testing.T, p *proc, dims ...uint64) (id, cont, prop uint64) {
	t.Helper()
	id = p.init(t)
	cprop := p.PropCreate(capi.PropContCreate, id)
	cont = p.ContCreate("c", cprop)
	prop = p.PropCreate(capi.PropObjCreate, id)
	if cont == 0 || prop == 0 || p.PropSetObjDims(prop, len(dims), dims) != capi.Succeed ||
		p.PropSetObjType(prop, pdcInt) != capi.Succeed {
		t.Fatal(p.lines())
	}
	return id, cont, prop
}

func TestObjectProperties(t *testing.T) {
	tc := startCluster(t, "node-a")
	p := tc.node("node-a")
	id := p.init(t)
	prop := p.PropCreate(capi.PropObjCreate, id)
	if prop == 0 {
		t.Fatal(p.lines())
	}
	info, rc := p.ObjPropGetInfo(prop)
	if rc != capi.Succeed || info.PropID != prop || len(info.Dims) != 0 || info.Type != -1 || info.Partition != 1 || info.Consistency != 0 {
		t.Fatalf("defaults %+v: %q", info, p.lines())
	}
	var x int
	for _, rc := range []int{
		p.PropSetObjDims(prop, 2, []uint64{4, 6}),
		p.PropSetObjType(prop, pdcDouble),
		p.PropSetObjTransferRegionType(prop, 0),
		p.PropSetObjConsistency(prop, 1),
		p.PropSetObjAppName(prop, "app"),
		p.PropSetObjTimeStep(prop, 3),
		p.PropSetObjUserID(prop, 7),
		p.PropSetObjDataLoc(prop, "/tmp/x"),
		p.PropSetObjTags(prop, "a=b"),
		p.PropSetObjBuf(prop, unsafe.Pointer(&x)),
	} {
		if rc != capi.Succeed {
			t.Fatal(p.lines())
		}
	}
	dup := p.PropObjDup(prop)
	if dup == 0 || dup == prop {
		t.Fatal(p.lines())
	}
	// The copy is deep: changing the original leaves it alone.
	if p.PropSetObjDims(prop, 1, []uint64{9}) != capi.Succeed {
		t.Fatal(p.lines())
	}
	info, rc = p.ObjPropGetInfo(dup)
	if rc != capi.Succeed || info.PropID != dup || len(info.Dims) != 2 || info.Dims[1] != 6 || info.Type != pdcDouble ||
		info.Partition != 0 || info.Consistency != 1 {
		t.Fatalf("dup %+v", info)
	}
	for _, c := range []struct {
		call func() int
		want []string
	}{
		{func() int { return p.PropSetObjDims(prop, 0, nil) }, []string{"PDCprop_set_obj_dims(2, 0, NULL)", "dims is NULL"}},
		{func() int { return p.PropSetObjDims(prop, 2, []uint64{3, 0}) }, []string{"dim 1 is 0"}},
		{func() int { return p.PropSetObjDims(prop, 2, []uint64{3, ^uint64(0)}) }, []string{"only the first may be"}},
		{func() int { return p.PropSetObjType(prop, 19) }, []string{"unknown pdc_var_type_t 19"}},
		{func() int { return p.PropSetObjTransferRegionType(prop, 4) }, []string{"unknown pdc_region_partition_t 4"}},
		{func() int { return p.PropSetObjConsistency(prop, 5) }, []string{"unknown pdc_consistency_t 5"}},
		{func() int { return p.PropSetObjTimeStep(id, 1) }, []string{"is a pdc connection (PDCinit), not a object property"}},
		{func() int { return p.PropSetContLifetime(prop, 0) }, []string{"is a object property, not a container property"}},
	} {
		if c.call() != capi.Fail {
			t.Fatalf("succeeded; want %q", c.want)
		}
		p.wantLine(t, c.want...)
	}
	if _, rc := p.ObjPropGetInfo(id); rc != capi.Fail {
		t.Fatal("get_info of a connection")
	}
	p.wantLine(t, "PDCobj_prop_get_info(1)")
	if p.PropClose(prop) != capi.Succeed || p.PropClose(prop) != capi.Fail {
		t.Fatal("close")
	}
	p.wantLine(t, "is a closed handle")
}

func TestObjects(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")
	id, cont, prop := objSetup(t, p, 4, 6)
	if p.PropSetObjAppName(prop, "app") != capi.Succeed || p.PropSetObjBuf(prop, unsafe.Pointer(&cont)) != capi.Succeed {
		t.Fatal(p.lines())
	}
	obj := p.ObjCreate(cont, "o", prop)
	if obj == 0 {
		t.Fatal(p.lines())
	}
	if buf, rc := p.ObjBufRetrieve(obj); rc != capi.Succeed || buf != unsafe.Pointer(&cont) {
		t.Fatalf("buf_retrieve %p rc %d", buf, rc)
	}
	// The same identity again fails; another time step is another object.
	if got := p.ObjCreate(cont, "o", prop); got != 0 {
		t.Fatalf("created an object twice: %d", got)
	}
	p.wantLine(t, `PDCobj_create(cont 3, "o", prop 4)`, "exists")
	if p.PropSetObjTimeStep(prop, 1) != capi.Succeed || p.ObjCreate(cont, "o", prop) == 0 {
		t.Fatal(p.lines())
	}

	info, rc := p.ObjGetInfo(obj)
	if rc != capi.Succeed || info.Name != "o" || info.LocalID != obj || info.MetaID == 0 || len(info.Prop.Dims) != 2 || info.Prop.Type != pdcInt {
		t.Fatalf("info %+v: %q", info, p.lines())
	}

	// Another process opens it, sees dims set here.
	q := tc.node("node-b")
	qid := q.init(t)
	qobj := q.ObjOpen("o", qid)
	if qobj == 0 {
		t.Fatal(q.lines())
	}
	if p.ObjSetDims(obj, 2, []uint64{8, 6}) != capi.Succeed {
		t.Fatal(p.lines())
	}
	dims, rc := q.ObjGetDims(qobj)
	if rc != capi.Succeed || len(dims) != 2 || dims[0] != 8 {
		t.Fatalf("dims %v: %q", dims, q.lines())
	}
	qinfo, rc := q.ObjGetInfo(qobj)
	if rc != capi.Succeed || qinfo.MetaID != info.MetaID {
		t.Fatalf("remote info %+v", qinfo)
	}
	if p.ObjSetDims(obj, 1, []uint64{8}) != capi.Fail {
		t.Fatal("changed the number of dims")
	}
	p.wantLine(t, "PDCobj_set_dims(5, 1, [8])")

	checkPutGetData(t, p, q, qid, obj, cont)
	checkBadObjectCalls(t, p, id, cont, prop, obj)
}

// checkPutGetData checks put_data and get_data across processes, sizes no
// buffer has, flushes, and that a deleted object is gone for others while
// its handle stays until closed.
func checkPutGetData(t *testing.T, p, q *proc, qid, obj, cont uint64) {
	t.Helper()
	data := []byte("hello, objects")
	po := p.ObjPutData("blob", unsafe.Pointer(&data[0]), uint64(len(data)), cont)
	if po == 0 {
		t.Fatal(p.lines())
	}
	qo := q.ObjOpenCol("blob", qid)
	got := make([]byte, len(data))
	if qo == 0 || q.ObjGetData(qo, unsafe.Pointer(&got[0]), uint64(len(got))) != capi.Succeed || string(got) != string(data) {
		t.Fatalf("get_data %q: %q", got, q.lines())
	}
	if p.ObjPutData("blob", unsafe.Pointer(&data[0]), uint64(len(data)), cont) != 0 {
		t.Fatal("put_data over an existing object")
	}
	p.wantLine(t, `PDCobj_put_data("blob", 14 bytes, cont 3)`, "exists")
	if p.ObjGetData(obj, unsafe.Pointer(&got[0]), 5) != capi.Fail {
		t.Fatal("get_data of part of a 2-D object")
	}
	p.wantLine(t, "is not a whole number of 4-byte elements")
	// A size no buffer has fails as such, before libpdc makes a slice of
	// the caller's memory.
	for _, size := range []uint64{1 << 63, 1<<48 + 1} {
		if q.ObjGetData(qo, unsafe.Pointer(&got[0]), size) != capi.Fail {
			t.Fatalf("get_data of %d bytes", size)
		}
		q.wantLine(t, fmt.Sprintf("PDCobj_get_data(%d, %d bytes): size %d is over the limit of 281474976710656 bytes", qo, size, size))
	}
	if p.ObjFlushStart(obj) != capi.Succeed || p.ObjFlushAllStart() != capi.Succeed {
		t.Fatal(p.lines())
	}

	// Delete: gone for others; the handle stays until closed.
	if p.ObjDel(po) != capi.Succeed || p.ObjClose(po) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if q.ObjOpen("blob", qid) != 0 {
		t.Fatal("opened a deleted object")
	}
	q.wantLine(t, `PDCobj_open("blob", pdc 1)`, "not found")

}

// checkBadObjectCalls checks that creates, opens and put_data of bad
// input fail, each with its line, and that handles close once.
func checkBadObjectCalls(t *testing.T, p *proc, id, cont, prop, obj uint64) {
	t.Helper()
	for _, c := range []struct {
		call func() uint64
		want []string
	}{
		{func() uint64 { return p.ObjCreate(cont, "", prop) }, []string{"no object name"}},
		{func() uint64 { return p.ObjCreate(prop, "x", prop) }, []string{"is a object property, not a container"}},
		{func() uint64 { return p.ObjCreate(cont, "x", cont) }, []string{"is a container, not a object property"}},
		{func() uint64 {
			typeless := p.PropCreate(capi.PropObjCreate, id)
			p.PropSetObjDims(typeless, 1, []uint64{4})
			return p.ObjCreate(cont, "x", typeless)
		}, []string{"has dims but no element type"}},
		{func() uint64 { return p.ObjOpen("nothing", id) }, []string{"not found"}},
		{func() uint64 { return p.ObjPutData("x", nil, 3, cont) }, []string{"no data"}},
	} {
		if got := c.call(); got != 0 {
			t.Fatalf("got %d; want a failure %q", got, c.want)
		}
		p.wantLine(t, c.want...)
	}
	if p.ObjClose(obj) != capi.Succeed || p.ObjClose(obj) != capi.Fail {
		t.Fatal("close")
	}
	p.wantLine(t, "is a closed handle")
	if p.ObjDel(cont) != capi.Fail {
		t.Fatal("deleted a container as an object")
	}
	p.wantLine(t, "is a container, not a object")
}

// A property whose dims and type were never set makes a shapeless object
// (ndim 0, PDC_UNKNOWN), as in PDC, whose own object programs do that:
// tags, open, info, delete and buf_retrieve work on it; region I/O fails,
// naming the object.
func TestShapelessObject(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")
	id, cont, _ := objSetup(t, p, 4)
	prop := p.PropCreate(capi.PropObjCreate, id)
	buf := []byte("user data")
	if prop == 0 || p.PropSetObjBuf(prop, unsafe.Pointer(&buf[0])) != capi.Succeed {
		t.Fatal(p.lines())
	}
	obj := p.ObjCreate(cont, "bare", prop)
	if obj == 0 {
		t.Fatalf("PDCobj_create with an unset property: %q", p.lines())
	}
	info, rc := p.ObjGetInfo(obj)
	if rc != capi.Succeed || len(info.Prop.Dims) != 0 || info.Prop.Type != -1 || info.Name != "bare" {
		t.Fatalf("info %+v rc %d: %q", info, rc, p.lines())
	}
	if got, rc := p.ObjBufRetrieve(obj); rc != capi.Succeed || got != unsafe.Pointer(&buf[0]) {
		t.Fatalf("buf_retrieve %p rc %d, want %p", got, rc, &buf[0])
	}
	v := []byte{42, 0, 0, 0}
	if p.ObjPutTag(obj, "step", unsafe.Pointer(&v[0]), pdcInt, 4) != capi.Succeed {
		t.Fatal(p.lines())
	}
	q := tc.node("node-b")
	qobj := q.ObjOpen("bare", q.init(t))
	if qobj == 0 {
		t.Fatal(q.lines())
	}
	if tag, rc := q.ObjGetTag(qobj, "step"); rc != capi.Succeed || !tag.Found || tag.Value[0] != 42 {
		t.Fatalf("tag from another process: %+v: %q", tag, q.lines())
	}
	q.ObjClose(qobj)
	// Region I/O fails, naming the object.
	data := make([]byte, 16)
	r := p.RegionCreate(1, []uint64{0}, []uint64{4})
	if x := p.TransferCreate(unsafe.Pointer(&data[0]), capi.AccessWrite, obj, r, r); x != 0 {
		p.TransferClose(x)
		t.Fatal("a transfer on a shapeless object was created")
	}
	p.wantLine(t, "PDCregion_transfer_create(", `object "bare" has no dims`)
	if p.ObjDel(obj) != capi.Succeed || p.ObjClose(obj) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if q.ObjOpen("bare", q.init(t)) != 0 {
		t.Fatal("opened a deleted object")
	}
	q.wantLine(t, "not found")
}

func i32s(n int, f func(i int) int32) []byte {
	b := make([]byte, 4*n)
	for i := range n {
		binary.NativeEndian.PutUint32(b[4*i:], uint32(f(i)))
	}
	return b
}

func i32(b []byte, i int) int32 { return int32(binary.NativeEndian.Uint32(b[4*i:])) }

func TestRegionTransfers(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")
	_, cont, prop := objSetup(t, p, 10, 8)
	obj := p.ObjCreate(cont, "grid", prop)
	if obj == 0 {
		t.Fatal(p.lines())
	}
	checkWriteAndStatus(t, p, obj)
	r2 := checkReadIntoOtherShape(t, p, obj)
	// PDCobj_close of a region closes it, as PDC's VPIC-IO does.
	if reg := p.RegionCreate(1, []uint64{0}, []uint64{4}); reg == 0 || p.ObjClose(reg) != capi.Succeed || p.RegionClose(reg) != capi.Fail {
		t.Fatalf("PDCobj_close of a region: %q", p.lines())
	}
	p.wantLine(t, "closed handle")
	ids, all := checkStartAll(t, p, obj, r2)
	checkBadTransfers(t, p, obj, all)
	checkBadTransferCounts(t, p, obj, ids, all)
}

// checkWriteAndStatus writes rows 2..5, columns 1..6 (4x6) from a 1-D
// buffer of 24 ints, closing the regions at once, and follows the
// transfer's status: not found, complete once, then not found.
func checkWriteAndStatus(t *testing.T, p *proc, obj uint64) {
	t.Helper()
	wbuf := i32s(24, func(i int) int32 { return int32(100 + i) })
	local := p.RegionCreate(1, []uint64{0}, []uint64{24})
	remote := p.RegionCreate(2, []uint64{2, 1}, []uint64{4, 6})
	w := p.TransferCreate(unsafe.Pointer(&wbuf[0]), capi.AccessWrite, obj, local, remote)
	if w == 0 || p.RegionClose(local) != capi.Succeed || p.RegionClose(remote) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if st, rc := p.TransferStatus(w); rc != capi.Succeed || st != capi.TransferNotFound {
		t.Fatalf("status before start %d", st)
	}
	if p.TransferStart(w) != capi.Succeed || p.TransferWait(w) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if st, _ := p.TransferStatus(w); st != capi.TransferComplete {
		t.Fatalf("status after wait %d, want complete", st)
	}
	if st, _ := p.TransferStatus(w); st != capi.TransferNotFound {
		t.Fatalf("status after complete %d, want not found", st)
	}
	if p.TransferClose(w) != capi.Succeed {
		t.Fatal(p.lines())
	}
}

// checkReadIntoOtherShape reads rows 3..4, columns 0..3 (2x4) into the
// middle of a 4x6 buffer at (1, 2): a different local shape. It returns
// the remote region, left open.
func checkReadIntoOtherShape(t *testing.T, p *proc, obj uint64) uint64 {
	t.Helper()
	rbuf := make([]byte, 4*24)
	l2 := p.RegionCreate(2, []uint64{1, 2}, []uint64{2, 4})
	r2 := p.RegionCreate(2, []uint64{3, 0}, []uint64{2, 4})
	r := p.TransferCreate(unsafe.Pointer(&rbuf[0]), capi.AccessRead, obj, l2, r2)
	if r == 0 || p.TransferStart(r) != capi.Succeed || p.TransferWait(r) != capi.Succeed || p.TransferClose(r) != capi.Succeed {
		t.Fatal(p.lines())
	}
	for row := range 4 {
		for col := range 6 {
			want := int32(0)
			if row >= 1 && row < 3 && col >= 2 {
				orow, ocol := row-1+3, col-2
				if ocol >= 1 { // written columns 1..6 of rows 2..5
					want = int32(100 + (orow-2)*6 + ocol - 1)
				}
			}
			if got := i32(rbuf, row*6+col); got != want {
				t.Errorf("buffer (%d,%d) = %d, want %d", row, col, got, want)
			}
		}
	}
	return r2
}

// checkStartAll checks the region info of r2, then writes rows 0..4
// with one start_all and one wait_all and reads them back whole. It
// returns the closed transfers' ids and the buffer read.
func checkStartAll(t *testing.T, p *proc, obj, r2 uint64) ([]uint64, []byte) {
	t.Helper()
	box, rc := p.RegionGetInfo(r2)
	if rc != capi.Succeed || box.Off[0] != 3 || box.Size[1] != 4 {
		t.Fatalf("region info %v", box)
	}
	var ids []uint64
	bufs := make([][]byte, 5)
	for i := range 5 {
		bufs[i] = i32s(8, func(j int) int32 { return int32(i*8 + j) })
		row := p.RegionCreate(2, []uint64{uint64(i), 0}, []uint64{1, 8})
		lr := p.RegionCreate(1, []uint64{0}, []uint64{8})
		ids = append(ids, p.TransferCreate(unsafe.Pointer(&bufs[i][0]), capi.AccessWrite, obj, lr, row))
		p.RegionClose(row)
		p.RegionClose(lr)
	}
	if p.TransferStartAll(ptrOf(ids), len(ids)) != capi.Succeed || p.TransferWaitAll(ptrOf(ids), len(ids)) != capi.Succeed {
		t.Fatal(p.lines())
	}
	for _, id := range ids {
		if p.TransferClose(id) != capi.Succeed {
			t.Fatal(p.lines())
		}
	}
	all := make([]byte, 4*80)
	if p.ObjGetData(obj, unsafe.Pointer(&all[0]), uint64(len(all))) != capi.Succeed {
		t.Fatal(p.lines())
	}
	for i := range 40 {
		if got := i32(all, i); got != int32(i) {
			t.Fatalf("element %d = %d", i, got)
		}
	}
	return ids, all
}

// checkBadTransfers checks that transfers and regions made of bad input
// fail, each with its line.
func checkBadTransfers(t *testing.T, p *proc, obj uint64, all []byte) {
	t.Helper()
	in := p.RegionCreate(2, []uint64{0, 0}, []uint64{2, 2})
	out := p.RegionCreate(2, []uint64{9, 7}, []uint64{2, 2})
	oneD := p.RegionCreate(1, []uint64{0}, []uint64{4})
	// Local regions whose buffer (up to their end in each dim) has more
	// than 2^64 elements: (2^40+1)^2, and (2^32+1)*2^32, which wraps to
	// 2^32.
	huge := p.RegionCreate(2, []uint64{1 << 40, 1 << 40}, []uint64{1, 1})
	wraps := p.RegionCreate(2, []uint64{1 << 32, 1<<32 - 1}, []uint64{1, 1})
	dot := p.RegionCreate(2, []uint64{0, 0}, []uint64{1, 1})
	for _, c := range []struct {
		call func() uint64
		want []string
	}{
		{func() uint64 { return p.TransferCreate(unsafe.Pointer(&all[0]), capi.AccessWrite, obj, in, out) }, []string{"remote region"}},
		{func() uint64 { return p.TransferCreate(unsafe.Pointer(&all[0]), capi.AccessWrite, obj, in, oneD) }, []string{"has 1 dims, the object 2"}},
		{func() uint64 { return p.TransferCreate(nil, capi.AccessWrite, obj, in, in) }, []string{"buf is NULL"}},
		{func() uint64 { return p.TransferCreate(unsafe.Pointer(&all[0]), 7, obj, in, in) }, []string{"access 7"}},
		{func() uint64 { return p.TransferCreate(unsafe.Pointer(&all[0]), capi.AccessRead, in, in, in) }, []string{"is a region, not a object"}},
		{func() uint64 { return p.TransferCreate(unsafe.Pointer(&all[0]), capi.AccessRead, obj, obj, in) }, []string{"local region", "is a object, not a region"}},
		{func() uint64 { return p.RegionCreate(2, nil, []uint64{1, 1}) }, []string{"offset or size is NULL"}},
		{func() uint64 { return p.RegionCreate(1, []uint64{0}, []uint64{0}) }, []string{"dimension 0 is empty"}},
		{func() uint64 { return p.TransferCreate(unsafe.Pointer(&all[0]), capi.AccessRead, obj, huge, dot) }, []string{
			"PDCregion_transfer_create(", "local region [1099511627776+1, 1099511627776+1] spans a buffer of more than 2^64 bytes"}},
		{func() uint64 { return p.TransferCreate(unsafe.Pointer(&all[0]), capi.AccessRead, obj, wraps, dot) }, []string{
			"local region [4294967296+1, 4294967295+1] spans a buffer of more than 2^64 bytes"}},
		// An offset + size past 2^64 is no region.
		{func() uint64 { return p.RegionCreate(2, []uint64{0, 1<<64 - 1}, []uint64{1, 1}) }, []string{
			"PDCregion_create(2, [0 18446744073709551615], [1 1])", "dimension 1 ends past 2^64"}},
	} {
		if got := c.call(); got != 0 {
			t.Fatalf("got %d; want a failure %q", got, c.want)
		}
		p.wantLine(t, c.want...)
	}
}

// checkBadTransferCounts checks transfers waited or started out of turn,
// and the counts of start_all and wait_all: the line names the array and
// the count as passed, a count past the limit is not read, and none at all
// succeeds.
func checkBadTransferCounts(t *testing.T, p *proc, obj uint64, ids []uint64, all []byte) {
	t.Helper()
	in := p.RegionCreate(2, []uint64{0, 0}, []uint64{2, 2})
	if p.TransferWait(ids[0]) != capi.Fail || p.TransferStart(in) != capi.Fail || p.TransferStartAll(nil, 2) != capi.Fail {
		t.Fatal("bad transfers")
	}
	if ls := p.lines(); len(ls) != 3 {
		t.Fatalf("reports %q", ls)
	}
	for _, c := range []struct {
		call func() int
		want []string
	}{
		{func() int { return p.TransferWaitAll(ptrOf(ids), -3) }, []string{fmt.Sprintf("PDCregion_transfer_wait_all(%p, -3): size -3 is negative", ptrOf(ids))}},
		{func() int { return p.TransferStartAll(ptrOf(ids), 1<<30) }, []string{", 1073741824): size 1073741824 is over the limit of 16777216"}},
		{func() int { return p.TransferWaitAll(nil, 2) }, []string{"PDCregion_transfer_wait_all(NULL, 2): transfer_request_id is NULL but size is 2"}},
		{func() int { return p.TransferWaitAll(ptrOf(ids[:2]), 2) }, []string{fmt.Sprintf("PDCregion_transfer_wait_all([%d %d], 2): ", ids[0], ids[1]), "closed handle"}},
	} {
		if c.call() != capi.Fail {
			t.Fatalf("succeeded; want %q", c.want)
		}
		p.wantLine(t, c.want...)
	}
	// None at all succeeds, as in PDC, with an array or without.
	if p.TransferStartAll(ptrOf(ids), 0) != capi.Succeed || p.TransferWaitAll(ptrOf(ids), 0) != capi.Succeed ||
		p.TransferStartAll(nil, 0) != capi.Succeed || p.TransferWaitAll(nil, 0) != capi.Succeed {
		t.Fatalf("start_all/wait_all of 0 transfers failed: %q", p.lines())
	}
	p.quiet(t)
	nw := p.TransferCreate(unsafe.Pointer(&all[0]), capi.AccessWrite, obj, in, in)
	if nw == 0 || p.TransferWait(nw) != capi.Fail {
		t.Fatal("waited for a transfer never started")
	}
	p.wantLine(t, "not started")
	if p.TransferClose(nw) != capi.Succeed {
		t.Fatal(p.lines())
	}
}

// Closing an object waits for its transfers; POSIX transfers are done when
// start returns.
func TestObjectCloseWaitsAndPOSIX(t *testing.T) {
	tc := startCluster(t, "node-a")
	p := tc.node("node-a")
	id, cont, prop := objSetup(t, p, 1000)
	obj := p.ObjCreate(cont, "a", prop)
	buf := i32s(1000, func(i int) int32 { return int32(i * 3) })
	reg := p.RegionCreate(1, []uint64{0}, []uint64{1000})
	w := p.TransferCreate(unsafe.Pointer(&buf[0]), capi.AccessWrite, obj, reg, reg)
	if w == 0 || p.TransferStart(w) != capi.Succeed || p.ObjClose(obj) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if st, _ := p.TransferStatus(w); st != capi.TransferComplete {
		t.Fatalf("status after the object closed: %d", st)
	}
	if p.TransferStart(w) != capi.Fail {
		t.Fatal("started a transfer of a closed object")
	}
	p.wantLine(t, "was closed")
	if p.TransferClose(w) != capi.Succeed {
		t.Fatal(p.lines())
	}

	if p.PropSetObjConsistency(prop, 1) != capi.Succeed {
		t.Fatal(p.lines())
	}
	px := p.ObjCreate(cont, "posix", prop)
	pw := p.TransferCreate(unsafe.Pointer(&buf[0]), capi.AccessWrite, px, reg, reg)
	if pw == 0 || p.TransferStart(pw) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if st, _ := p.TransferStatus(pw); st != capi.TransferComplete {
		t.Fatalf("POSIX status after start: %d", st)
	}
	other := p.ObjOpen("posix", id)
	got := make([]byte, len(buf))
	if p.ObjGetData(other, unsafe.Pointer(&got[0]), uint64(len(got))) != capi.Succeed || i32(got, 999) != 2997 {
		t.Fatal(p.lines())
	}
	p.TransferClose(pw)
}

// PDCclose with transfers started and never waited finishes them first:
// the writes are stored and flushed, a read has filled its buffer.
func TestCloseFinishesStartedTransfers(t *testing.T) {
	tc := startCluster(t, "node-a")
	p := tc.node("node-a")
	id, cont, prop := objSetup(t, p, 1<<20)
	obj := p.ObjCreate(cont, "unwaited", prop)
	buf := i32s(1<<20, func(i int) int32 { return int32(i*7 + 1) })
	var ids []uint64
	for part := range uint64(4) {
		local := p.RegionCreate(1, []uint64{0}, []uint64{1 << 18})
		remote := p.RegionCreate(1, []uint64{part << 18}, []uint64{1 << 18})
		w := p.TransferCreate(unsafe.Pointer(&buf[part<<20]), capi.AccessWrite, obj, local, remote)
		if w == 0 {
			t.Fatal(p.lines())
		}
		ids = append(ids, w)
	}
	never := p.TransferCreate(unsafe.Pointer(&buf[0]), capi.AccessWrite, obj,
		p.RegionCreate(1, []uint64{0}, []uint64{1}), p.RegionCreate(1, []uint64{0}, []uint64{1}))
	if never == 0 || p.TransferStartAll(ptrOf(ids), len(ids)) != capi.Succeed || p.Close(id) != capi.Succeed {
		t.Fatal(p.lines())
	}
	p.quiet(t)
	if p.TransferClose(ids[0]) != capi.Fail {
		t.Fatal("a transfer outlived PDCclose")
	}

	// A read started and never waited has filled its buffer when PDCclose
	// returns.
	q := tc.node("node-a")
	id2 := q.init(t)
	got := make([]byte, len(buf))
	o2 := q.ObjOpen("unwaited", id2)
	all := q.RegionCreate(1, []uint64{0}, []uint64{1 << 20})
	r := q.TransferCreate(unsafe.Pointer(&got[0]), capi.AccessRead, o2, all, all)
	if o2 == 0 || r == 0 || q.TransferStart(r) != capi.Succeed || q.Close(id2) != capi.Succeed {
		t.Fatal(q.lines())
	}
	q.quiet(t)
	for i := range 1 << 20 {
		if v := i32(got, i); v != int32(i*7+1) {
			t.Fatalf("element %d = %d after PDCclose; want %d", i, v, i*7+1)
		}
	}
}

func TestConcurrentTransfers(t *testing.T) {
	tc := startCluster(t, "node-a")
	p := tc.node("node-a")
	_, cont, prop := objSetup(t, p, 64, 16)
	obj := p.ObjCreate(cont, "shared", prop)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			buf := i32s(16*8, func(j int) int32 { return int32(i*1000 + j) })
			lr := p.RegionCreate(1, []uint64{0}, []uint64{128})
			rr := p.RegionCreate(2, []uint64{uint64(8 * i), 0}, []uint64{8, 16})
			w := p.TransferCreate(unsafe.Pointer(&buf[0]), capi.AccessWrite, obj, lr, rr)
			if w == 0 || p.TransferStart(w) != capi.Succeed || p.TransferWait(w) != capi.Succeed || p.TransferClose(w) != capi.Succeed {
				t.Error("transfer failed")
			}
			if _, rc := p.ObjGetDims(obj); rc != capi.Succeed {
				t.Error("dims failed")
			}
		})
	}
	wg.Wait()
	p.quiet(t)
	all := make([]byte, 4*64*16)
	if p.ObjGetData(obj, unsafe.Pointer(&all[0]), uint64(len(all))) != capi.Succeed || i32(all, 8*16*7+5) != 7005 {
		t.Fatal(p.lines())
	}
}

// metadata_server_id is PDC's placement: djb2 of the name (bytes as
// signed chars) plus the time step, modulo the servers. The figures are
// worked out by hand from PDC's pdc_hash_djb2.
func TestPDCServer(t *testing.T) {
	for _, c := range []struct {
		name     string
		step     uint32
		servers  int
		want     uint32
		wantHash uint32
	}{
		{"abc", 0, 3, 0, 193485963},
		{"obj-7", 5, 4, 1, 269428260},
		{"caf\xc3\xa9", 2, 5, 2, 255153275},
		{"x", 0, 1, 0, 177693},
		{"x", 0, 0, 0, 177693},
	} {
		if got := capi.PDCServer(c.name, c.step, c.servers); got != c.want {
			t.Errorf("PDCServer(%q, %d, %d) = %d, want %d", c.name, c.step, c.servers, got, c.want)
		}
		if got := capi.PDCServer(c.name, 0, 1<<31); got != c.wantHash%(1<<31) {
			t.Errorf("hash of %q = %d, want %d", c.name, got, c.wantHash)
		}
	}
	// Through PDCobj_get_info, on a cluster of two.
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")
	id, cont, _ := objSetup(t, p, 4)
	for i := range 6 {
		prop := p.PropCreate(capi.PropObjCreate, id)
		name := fmt.Sprintf("placed-%d", i)
		if p.PropSetObjDims(prop, 1, []uint64{4}) != capi.Succeed || p.PropSetObjType(prop, pdcInt) != capi.Succeed ||
			p.PropSetObjTimeStep(prop, uint32(i)) != capi.Succeed {
			t.Fatal(p.lines())
		}
		obj := p.ObjCreate(cont, name, prop)
		info, rc := p.ObjGetInfo(obj)
		if obj == 0 || rc != capi.Succeed {
			t.Fatal(p.lines())
		}
		if want := capi.PDCServer(name, uint32(i), 2); info.PDCMetaServer != want {
			t.Errorf("%s: metadata_server_id %d, want %d", name, info.PDCMetaServer, want)
		}
	}
}
