package capi_test

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"unsafe"

	"github.com/pdcgo/pdc/capi"
)

const pdcFloat = 1 // PDC_FLOAT

func f32(v float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)) }

// TestDataQueries runs PDCquery_* over a 6x5 float object holding
// r*10+c/10 at (r, c), against values computed here.
func TestDataQueries(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")
	_, cont, prop := objSetup(t, p, 6, 5)
	if p.PropSetObjType(prop, pdcFloat) != capi.Succeed {
		t.Fatal(p.lines())
	}
	obj := p.ObjCreate(cont, "field", prop)
	if obj == 0 {
		t.Fatal(p.lines())
	}
	val := fieldVal
	buf := make([]float32, 30)
	for i := range buf {
		buf[i] = val(uint64(i/5), uint64(i%5))
	}
	local := p.RegionCreate(1, []uint64{0}, []uint64{30})
	remote := p.RegionCreate(2, []uint64{0, 0}, []uint64{6, 5})
	w := p.TransferCreate(unsafe.Pointer(&buf[0]), capi.AccessWrite, obj, local, remote)
	if w == 0 || p.TransferStart(w) != capi.Succeed || p.TransferWait(w) != capi.Succeed || p.TransferClose(w) != capi.Succeed {
		t.Fatal(p.lines())
	}

	check := func(name string, q uint64, match func(float32) bool, off, size []uint64) {
		t.Helper()
		checkQuery(t, p, obj, name, q, match, off, size)
	}
	gt := p.QueryCreate(obj, 1, pdcFloat, f32(30))
	lt := p.QueryCreate(obj, 2, pdcFloat, f32(10.25))
	eq := p.QueryCreate(obj, 5, pdcFloat, f32(val(4, 3)))
	if gt == 0 || lt == 0 || eq == 0 {
		t.Fatal(p.lines())
	}
	check("GT", gt, func(v float32) bool { return v > 30 }, nil, nil)
	check("LT", lt, func(v float32) bool { return v < 10.25 }, nil, nil)
	check("EQ", eq, func(v float32) bool { return v == val(4, 3) }, nil, nil)
	le := p.QueryCreate(obj, 4, pdcFloat, f32(40.2))
	and := p.QueryAnd(gt, le)
	or := p.QueryOr(lt, eq)
	if and == 0 || or == 0 {
		t.Fatal(p.lines())
	}
	check("AND", and, func(v float32) bool { return v > 30 && v <= 40.2 }, nil, nil)
	check("OR", or, func(v float32) bool { return v < 10.25 || v == val(4, 3) }, nil, nil)
	off, size := []uint64{1, 1}, []uint64{4, 3}
	if p.QuerySelRegion(or, off, size) != capi.Succeed {
		t.Fatal(p.lines())
	}
	check("OR within", or, func(v float32) bool { return v < 10.25 || v == val(4, 3) }, off, size)
	// The region carries into queries made from it.
	ge := p.QueryCreate(obj, 3, pdcFloat, f32(0))
	all := p.QueryAnd(or, ge)
	check("AND of restricted", all, func(v float32) bool { return v < 10.25 || v == val(4, 3) }, off, size)
	if p.QueryFree(gt) != capi.Succeed || p.QueryFree(0) != capi.Succeed {
		t.Fatal(p.lines())
	}
	// and stays valid without gt.
	check("AND after free", and, func(v float32) bool { return v > 30 && v <= 40.2 }, nil, nil)

	other, sel1 := checkDataAtHits(t, p, cont, prop, local, remote, or)
	checkBadQueries(t, p, obj, cont, other, lt, gt, sel1)
}

// fieldVal is element (r, c) of the test's 6x5 field.
func fieldVal(r, c uint64) float32 { return float32(r)*10 + float32(c)/10 }

// fieldMatches returns the coordinates and values of the elements of the
// test's 6x5 field in box (off, size) that match.
func fieldMatches(match func(float32) bool, off, size []uint64) ([]uint64, []float32) {
	var coords []uint64
	var vals []float32
	for r := uint64(0); r < 6; r++ {
		for c := uint64(0); c < 5; c++ {
			if off != nil && (r < off[0] || r >= off[0]+size[0] || c < off[1] || c >= off[1]+size[1]) {
				continue
			}
			if match(fieldVal(r, c)) {
				coords = append(coords, r, c)
				vals = append(vals, fieldVal(r, c))
			}
		}
	}
	return coords, vals
}

// checkQuery checks query q's hit count, its selection and the data at
// its hits against fieldMatches.
func checkQuery(t *testing.T, p *proc, obj uint64, name string, q uint64, match func(float32) bool, off, size []uint64) {
	t.Helper()
	wc, wv := fieldMatches(match, off, size)
	n, rc := p.QueryNHits(q)
	if rc != capi.Succeed || n != uint64(len(wv)) {
		t.Fatalf("%s: nhits %d, want %d: %q", name, n, len(wv), p.lines())
	}
	sel, rc := p.QueryGetSelection(q)
	if rc != capi.Succeed || sel.NDim != 2 || sel.NHits != n || !slices.Equal(sel.Coords, wc) {
		t.Fatalf("%s: selection %+v, want %v: %q", name, sel, wc, p.lines())
	}
	var got []float32
	rc = p.QueryGetData(obj, q, sel, func(b []byte) error {
		for i := 0; i+4 <= len(b); i += 4 {
			got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
		}
		return nil
	})
	if rc != capi.Succeed || !slices.Equal(got, wv) {
		t.Fatalf("%s: data %v, want %v: %q", name, got, wv, p.lines())
	}
}

// checkDataAtHits creates another object (ints r*100+c) and checks its
// values at the hits of query q. It returns the object and the selection.
func checkDataAtHits(t *testing.T, p *proc, cont, prop, local, remote, q uint64) (uint64, capi.Selection) {
	t.Helper()
	if p.PropSetObjType(prop, pdcInt) != capi.Succeed {
		t.Fatal(p.lines())
	}
	other := p.ObjCreate(cont, "energy", prop)
	ibuf := i32s(30, func(i int) int32 { return int32(i/5*100 + i%5) })
	w := p.TransferCreate(unsafe.Pointer(&ibuf[0]), capi.AccessWrite, other, local, remote)
	if other == 0 || w == 0 || p.TransferStart(w) != capi.Succeed || p.TransferWait(w) != capi.Succeed || p.TransferClose(w) != capi.Succeed {
		t.Fatal(p.lines())
	}
	sel1, rc := p.QueryGetSelection(q)
	if rc != capi.Succeed || sel1.NHits == 0 {
		t.Fatal(p.lines())
	}
	var got []int32
	if p.QueryGetData(other, q, sel1, func(b []byte) error {
		for i := 0; i+4 <= len(b); i += 4 {
			got = append(got, int32(binary.LittleEndian.Uint32(b[i:])))
		}
		return nil
	}) != capi.Succeed {
		t.Fatal(p.lines())
	}
	var wantE []int32
	for i := uint64(0); i < sel1.NHits; i++ {
		wantE = append(wantE, int32(sel1.Coords[2*i]*100+sel1.Coords[2*i+1]))
	}
	if !slices.Equal(got, wantE) {
		t.Fatalf("energy at the hits %v, want %v", got, wantE)
	}

	return other, sel1
}

// checkBadQueries checks that queries and their data calls made of bad
// input fail, one line each.
func checkBadQueries(t *testing.T, p *proc, obj, cont, other, lt, gt uint64, sel1 capi.Selection) {
	t.Helper()
	for _, c := range []struct {
		call func() bool
		want []string
	}{
		{func() bool { return p.QueryCreate(obj, 9, pdcFloat, f32(1)) == 0 }, []string{"PDCquery_create(obj", "op 9", "unknown pdc_query_op_t 9"}},
		{func() bool { return p.QueryCreate(obj, 1, pdcDouble, make([]byte, 8)) == 0 }, []string{"holds float32", "pass a value of the object's type"}},
		{func() bool { return p.QueryCreate(obj, 1, pdcFloat, nil) == 0 }, []string{"value is NULL"}},
		{func() bool { return p.QueryCreate(cont, 1, pdcFloat, f32(1)) == 0 }, []string{"is a container, not a object"}},
		{func() bool { return p.QueryAnd(0, lt) == 0 }, []string{"PDCquery_and(query 0", "q1 is NULL"}},
		{func() bool { return p.QueryOr(lt, gt) == 0 }, []string{"q2:", "closed handle"}},
		{func() bool { _, rc := p.QueryNHits(0); return rc == capi.Fail }, []string{"PDCquery_get_nhits(query 0): query is NULL"}},
		{func() bool { return p.QuerySelRegion(lt, []uint64{4, 0}, []uint64{3, 5}) == capi.Fail }, []string{"ends at 7 in dimension 0, past object \"field\"'s 6"}},
		{func() bool { return p.QuerySelRegion(lt, []uint64{0}, []uint64{3}) == capi.Fail }, []string{"has 1 dims"}},
		{func() bool { return p.QueryGetData(obj, lt, capi.Selection{NDim: 2, NHits: 99}, nil) == capi.Fail }, []string{"the selection holds 99"}},
		{func() bool { return p.QueryGetData(cont, lt, sel1, nil) == capi.Fail }, []string{"is a container, not a object"}},
		{func() bool {
			return p.QueryGetData(other, lt, capi.Selection{NDim: 2, NHits: 1, Coords: []uint64{6, 0}}, nil) == capi.Fail
		}, []string{"hit 0 is at 6 in dimension 0, past object \"energy\"'s 6"}},
		{func() bool {
			return p.QueryGetData(other, lt, capi.Selection{NDim: 1, NHits: 1, Coords: []uint64{0}}, nil) == capi.Fail
		}, []string{"has 2 dims, the selection 1"}},
	} {
		if !c.call() {
			t.Fatalf("call succeeded, want %v", c.want)
		}
		p.wantLine(t, c.want...)
	}
}

// PDCquery_get_data on another object reads the box spanning the hits: at
// most 1 GiB, and a box whose size overflows 64 bits is over it too.
func TestQueryGetDataBoxLimit(t *testing.T) {
	tc := startCluster(t, "node-a")
	p := tc.node("node-a")
	_, cont, prop := objSetup(t, p, 4)
	small := p.ObjCreate(cont, "small", prop)
	q := p.QueryCreate(small, 1, pdcInt, i32s(1, func(int) int32 { return 0 }))
	if small == 0 || q == 0 || p.PropSetObjType(prop, pdcDouble) != capi.Succeed {
		t.Fatal(p.lines())
	}
	const n = 1 << 20
	// 2^80 doubles, whose byte count wraps past 2^64, cannot be created.
	if p.PropSetObjDims(prop, 4, []uint64{n, n, n, n}) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if p.ObjCreate(cont, "big-wraps", prop) != 0 {
		t.Fatal("an object of 2^80 doubles was created")
	}
	p.wantLine(t, "PDCobj_create(", "big-wraps", "pass 2^63 bytes")
	for _, c := range []struct {
		name string
		dims []uint64
		sel  capi.Selection
	}{
		// 2^40 doubles: 8 TiB.
		{"8TiB", []uint64{n, n}, capi.Selection{NDim: 2, NHits: 2, Coords: []uint64{0, 0, n - 1, n - 1}}},
		// 2^27+1 doubles: 1 GiB and 8 bytes.
		{"1GiB+8", []uint64{1<<27 + 1}, capi.Selection{NDim: 1, NHits: 2, Coords: []uint64{0, 1 << 27}}},
	} {
		if p.PropSetObjDims(prop, len(c.dims), c.dims) != capi.Succeed {
			t.Fatal(p.lines())
		}
		big := p.ObjCreate(cont, "big-"+c.name, prop)
		if big == 0 {
			t.Fatal(p.lines())
		}
		if p.QueryGetData(big, q, c.sel, func([]byte) error { return nil }) != capi.Fail {
			t.Fatalf("%s: get_data read a box over 1 GiB", c.name)
		}
		p.wantLine(t, "PDCquery_get_data(obj ", "over the limit of 1 GiB", "PDCquery_sel_region")
	}
	// nhits*ndim wraps to the coords' length: still no match.
	if p.PropSetObjDims(prop, 2, []uint64{4, 4}) != capi.Succeed {
		t.Fatal(p.lines())
	}
	other := p.ObjCreate(cont, "other", prop)
	wrap := capi.Selection{NDim: 2, NHits: 1<<63 + 1, Coords: []uint64{0, 0}}
	if other == 0 || p.QueryGetData(other, q, wrap, nil) != capi.Fail {
		t.Fatal("a selection whose nhits*ndim wraps was read")
	}
	p.wantLine(t, "PDCquery_get_data(obj ", "9223372036854775809 hits", "do not match its coords")
	p.quiet(t)
}

// PDCquery_and(q, q) doubles a query; the servers take at most 1024 nodes
// (comparisons, ANDs and ORs), and so does PDCquery_and, before the
// doubling exhausts memory.
func TestQueryCombineLimit(t *testing.T) {
	tc := startCluster(t, "node-a")
	p := tc.node("node-a")
	_, cont, prop := objSetup(t, p, 4)
	obj := p.ObjCreate(cont, "o", prop)
	q := p.QueryCreate(obj, 1, pdcInt, i32s(1, func(int) int32 { return 0 }))
	if obj == 0 || q == 0 {
		t.Fatal(p.lines())
	}
	for i := range 40 {
		next := p.QueryAnd(q, q)
		if next == 0 {
			if i != 9 {
				t.Errorf("and #%d failed, want #9 (2047 nodes) to", i)
			}
			p.wantLine(t, "PDCquery_and(query ", "2047 comparisons, ANDs and ORs, over the servers' limit of 1024")
			break
		}
		if i == 39 {
			t.Fatal("40 doublings of a query accepted")
		}
		q = next
	}
	// The largest one runs.
	if n, rc := p.QueryNHits(q); rc != capi.Succeed || n != 0 {
		t.Fatalf("a 1023-node query: %d hits: %q", n, p.lines())
	}
}

// A query sees the dims another process set since this one opened the
// object: PDCquery_sel_region accepts a region in the grown part, and
// PDCquery_get_data reads an object at coordinates there.
func TestQueriesSeeDimsSetByAnotherProcess(t *testing.T) {
	tc := startCluster(t, "node-a")
	w := tc.node("node-a")
	_, cont, prop := objSetup(t, w, 4)
	obj := w.ObjCreate(cont, "grows", prop)
	other := w.ObjCreate(cont, "other", prop)
	if obj == 0 || other == 0 {
		t.Fatal(w.lines())
	}
	// The reader opens both before the writer grows "grows": twice, so
	// that each part below starts from dims [4].
	r := tc.node("node-a")
	rid := r.init(t)
	forQuery, forData, rother := r.ObjOpen("grows", rid), r.ObjOpen("grows", rid), r.ObjOpen("other", rid)
	if forQuery == 0 || forData == 0 || rother == 0 {
		t.Fatal(r.lines())
	}
	// The writer grows it to 8 and fills it with 0..7, and "other" with
	// 0..3.
	if w.ObjSetDims(obj, 1, []uint64{8}) != capi.Succeed {
		t.Fatal(w.lines())
	}
	vals := i32s(8, func(i int) int32 { return int32(i) })
	for _, o := range []struct {
		id uint64
		n  uint64
	}{{obj, 8}, {other, 4}} {
		reg := w.RegionCreate(1, []uint64{0}, []uint64{o.n})
		x := w.TransferCreate(unsafe.Pointer(&vals[0]), capi.AccessWrite, o.id, reg, reg)
		if x == 0 || w.TransferStart(x) != capi.Succeed || w.TransferWait(x) != capi.Succeed || w.TransferClose(x) != capi.Succeed {
			t.Fatal(w.lines())
		}
	}

	// A query restricted to the grown part.
	q := r.QueryCreate(forQuery, 1, pdcInt, i32s(1, func(int) int32 { return 5 }))
	if q == 0 {
		t.Fatal(r.lines())
	}
	if r.QuerySelRegion(q, []uint64{4}, []uint64{4}) != capi.Succeed {
		t.Fatalf("sel_region in the grown part: %q", r.lines())
	}
	if n, rc := r.QueryNHits(q); rc != capi.Succeed || n != 2 {
		t.Fatalf("nhits %d, want 2 (6 and 7): %q", n, r.lines())
	}

	// The object read at coordinates in the grown part, for the hits of
	// a query over another object.
	q2 := r.QueryCreate(rother, 3, pdcInt, i32s(1, func(int) int32 { return 0 }))
	if q2 == 0 {
		t.Fatal(r.lines())
	}
	sel := capi.Selection{NDim: 1, NHits: 2, Coords: []uint64{6, 7}}
	var got []byte
	if r.QueryGetData(forData, q2, sel, func(b []byte) error { got = slices.Clone(b); return nil }) != capi.Succeed {
		t.Fatalf("get_data at coordinates in the grown part: %q", r.lines())
	}
	if len(got) != 8 || i32(got, 0) != 6 || i32(got, 1) != 7 {
		t.Fatalf("get_data read %v, want 6 and 7", got)
	}
	r.quiet(t)
	w.quiet(t)
}
