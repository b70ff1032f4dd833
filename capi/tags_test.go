package capi_test

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/pdcgo/pdc/capi"
)

func TestObjectTags(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")
	id, cont, prop := objSetup(t, p, 4)
	obj := p.ObjCreate(cont, "tagged", prop)
	if obj == 0 {
		t.Fatal(p.lines())
	}
	t.Cleanup(func() { p.ObjClose(obj) })
	put := func(name string, typ int, v []byte) int {
		var ptr unsafe.Pointer
		if len(v) > 0 {
			ptr = unsafe.Pointer(&v[0])
		}
		return p.ObjPutTag(obj, name, ptr, typ, uint64(len(v)))
	}
	if put("units", pdcString, []byte("kelvin\x00")) != capi.Succeed || put("step", pdcInt64, []byte{42, 0, 0, 0, 0, 0, 0, 0}) != capi.Succeed ||
		put("empty", pdcDouble, nil) != capi.Succeed || put("abcd", pdcString, []byte("1234\x00")) != capi.Succeed {
		t.Fatal(p.lines())
	}
	for _, want := range []struct {
		name string
		typ  int
		v    string
	}{{"units", pdcString, "kelvin\x00"}, {"step", pdcInt64, "*\x00\x00\x00\x00\x00\x00\x00"}, {"empty", pdcDouble, ""}} {
		tag, rc := p.ObjGetTag(obj, want.name)
		if rc != capi.Succeed || !tag.Found || tag.Type != want.typ || string(tag.Value) != want.v {
			t.Fatalf("tag %s: %+v rc %d, want type %d value %q: %q", want.name, tag, rc, want.typ, want.v, p.lines())
		}
	}
	// Another process sees them, opening the object by name.
	q := tc.node("node-b")
	qobj := q.ObjOpen("tagged", q.init(t))
	if qobj == 0 {
		t.Fatal(q.lines())
	}
	t.Cleanup(func() { q.ObjClose(qobj) })
	if tag, rc := q.ObjGetTag(qobj, "units"); rc != capi.Succeed || string(tag.Value) != "kelvin\x00" {
		t.Fatalf("from another process: %+v: %q", tag, q.lines())
	}

	// query_kvtag finds the object by its tags (the DART case of the
	// issue: abcd=1234 by exact, prefix, suffix and infix).
	info, rc := p.ObjGetInfo(obj)
	if rc != capi.Succeed {
		t.Fatal(p.lines())
	}
	for _, qv := range [][2]string{{"abcd", "1234"}, {"ab*", "12*"}, {"*cd", "*34"}, {"*bc*", "*23*"}} {
		got, rc := q.queryKVTag(qv[0], pdcString, []byte(qv[1]+"\x00"))
		if rc != capi.Succeed || !slices.Equal(got, []uint64{info.MetaID}) {
			t.Errorf("query %s=%s: %v rc %d, want [%d]: %q", qv[0], qv[1], got, rc, info.MetaID, q.lines())
		}
	}

	checkTagChanges(t, p, id, cont, prop, obj, put)
}

// checkTagChanges replaces and deletes tags (a tag not set deletes without
// a word, as in PDC; one of a deleted object fails), checks bad input, and
// that tags of a deleted or closed object are errors, not empty tags.
func checkTagChanges(t *testing.T, p *proc, id, cont, prop, obj uint64, put func(name string, typ int, v []byte) int) {
	t.Helper()
	if put("step", pdcInt64, []byte{7, 0, 0, 0, 0, 0, 0, 0}) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if tag, _ := p.ObjGetTag(obj, "step"); tag.Value[0] != 7 {
		t.Fatalf("replaced tag reads %v", tag.Value)
	}
	if p.ObjDelTag(obj, "step") != capi.Succeed {
		t.Fatal(p.lines())
	}
	if tag, rc := p.ObjGetTag(obj, "step"); rc != capi.Succeed || tag.Found || tag.Type != -1 || tag.Value != nil {
		t.Fatalf("deleted tag: %+v rc %d", tag, rc)
	}
	// A tag not set deletes without a word, as in PDC.
	if p.ObjDelTag(obj, "step") != capi.Succeed || p.ObjDelTag(obj, "never-set") != capi.Succeed {
		t.Fatalf("deleting a tag not set failed: %q", p.lines())
	}
	p.quiet(t)
	// Of an object deleted meanwhile, it fails, naming the object.
	gone := p.ObjCreate(cont, "gone", prop)
	if gone == 0 || p.ObjDel(gone) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if p.ObjDelTag(gone, "step") != capi.Fail {
		t.Fatal("deleted a tag of a deleted object")
	}
	p.wantLine(t, "PDCobj_del_tag(", "not found")
	p.ObjClose(gone)

	big := make([]byte, 1<<16+1)
	for _, c := range []struct {
		call func() int
		want []string
	}{
		{func() int { return put("", pdcString, []byte("x")) }, []string{`PDCobj_put_tag(5, "", type 4, 1 bytes)`, "no tag name"}},
		{func() int { return put("x", 99, []byte("x")) }, []string{"unknown pdc_var_type_t 99"}},
		{func() int { return put("x", pdcString, big) }, []string{"65537 bytes is over the limit of 65536"}},
		{func() int { return p.ObjPutTag(obj, "x", nil, pdcString, 8) }, []string{"value is NULL but size is 8"}},
		{func() int { return p.ObjPutTag(cont, "x", nil, pdcString, 0) }, []string{"is a container, not a object"}},
		{func() int { _, rc := p.ObjGetTag(obj, ""); return rc }, []string{`PDCobj_get_tag(5, "")`, "no tag name"}},
		{func() int { return p.ObjDelTag(id, "x") }, []string{"is a pdc connection (PDCinit), not a object"}},
	} {
		if c.call() != capi.Fail {
			t.Fatalf("call succeeded; want %q", c.want)
		}
		p.wantLine(t, c.want...)
	}

	// Tags of a deleted object are an error, not an empty tag.
	if p.ObjDel(obj) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if _, rc := p.ObjGetTag(obj, "units"); rc != capi.Fail {
		t.Fatal("read a tag of a deleted object")
	}
	p.wantLine(t, `PDCobj_get_tag(5, "units")`, "not found")
	// A closed object handle is refused.
	if p.ObjClose(obj) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if _, rc := p.ObjGetTag(obj, "units"); rc != capi.Fail {
		t.Fatal("read a tag through a closed handle")
	}
	p.wantLine(t, "5 is a closed handle")
}

// TestObjOpenMetaID opens the object one process created, by its id, in
// another: pdc_obj_open_by_meta_id, and pdc_obj_open_created, which is
// what PDCobj_create_mpi's other ranks do.
func TestObjOpenMetaID(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")
	_, cont, prop := objSetup(t, p, 8)
	var x int
	if p.PropSetObjTimeStep(prop, 3) != capi.Succeed || p.PropSetObjBuf(prop, unsafe.Pointer(&x)) != capi.Succeed {
		t.Fatal(p.lines())
	}
	obj := p.ObjCreate(cont, "shared", prop)
	if obj == 0 {
		t.Fatal(p.lines())
	}
	t.Cleanup(func() { p.ObjClose(obj) })
	info, rc := p.ObjGetInfo(obj)
	if rc != capi.Succeed {
		t.Fatal(p.lines())
	}

	// Another process (rank), with its own handles to the container and
	// a property of its own.
	q := tc.node("node-b")
	qid := q.init(t)
	qcont := q.ContOpen("c", qid)
	qprop := q.PropCreate(capi.PropObjCreate, qid)
	if qcont == 0 || qprop == 0 || q.PropSetObjBuf(qprop, unsafe.Pointer(&x)) != capi.Succeed {
		t.Fatal(q.lines())
	}
	qobj := q.ObjOpenMetaID(qcont, info.MetaID, qprop)
	if qobj == 0 {
		t.Fatal(q.lines())
	}
	t.Cleanup(func() { q.ObjClose(qobj) })
	qinfo, rc := q.ObjGetInfo(qobj)
	if rc != capi.Succeed || qinfo.MetaID != info.MetaID || qinfo.Name != "shared" || qinfo.LocalID != qobj {
		t.Fatalf("opened %+v, want the object %d: %q", qinfo, info.MetaID, q.lines())
	}
	if buf, rc := q.ObjBufRetrieve(qobj); rc != capi.Succeed || buf != unsafe.Pointer(&x) {
		t.Fatalf("buf %p, want the property's %p", buf, &x)
	}
	// Without a property: no buffer.
	q2 := q.ObjOpenMetaID(qcont, info.MetaID, 0)
	if buf, rc := q.ObjBufRetrieve(q2); q2 == 0 || rc != capi.Succeed || buf != nil {
		t.Fatalf("open without a property: %d, buf %p: %q", q2, buf, q.lines())
	}
	q.ObjClose(q2)
	q.quiet(t)

	other := q.ContCreate("other", q.PropCreate(capi.PropContCreate, qid))
	for _, c := range []struct {
		call func() uint64
		want []string
	}{
		{func() uint64 { return q.ObjOpenMetaID(other, info.MetaID, 0) }, []string{"pdc_obj_open_by_meta_id(cont", "is in container", `not in "other"`}},
		{func() uint64 { return q.ObjOpenMetaID(qcont, 0, 0) }, []string{"meta id 0 names no object"}},
		{func() uint64 { return q.ObjOpenMetaID(qcont, info.MetaID+1000, 0) }, []string{"not found"}},
		{func() uint64 { return q.ObjOpenMetaID(qcont, info.MetaID, qcont) }, []string{"is a container, not a object property"}},
		{func() uint64 { return q.ObjOpenMetaID(qprop, info.MetaID, 0) }, []string{"is a object property, not a container"}},
		{func() uint64 { return q.ObjOpenCreated(qcont, 0, 0) }, []string{"pdc_obj_open_created(cont", "meta id 0 names no object"}},
		{func() uint64 { return q.ObjOpenCreated(qprop, info.MetaID, 0) }, []string{"is a object property, not a container"}},
	} {
		if c.call() != 0 {
			t.Fatalf("call succeeded; want %q", c.want)
		}
		q.wantLine(t, c.want...)
	}

	// PDCobj_create_mpi's other ranks open it through whichever container
	// they name: PDC's programs pass each rank's own.
	qo := q.ObjOpenCreated(other, info.MetaID, qprop)
	if qo == 0 {
		t.Fatal(q.lines())
	}
	oinfo, rc := q.ObjGetInfo(qo)
	if rc != capi.Succeed || oinfo.MetaID != info.MetaID || oinfo.Name != "shared" {
		t.Fatalf("opened %+v through another container, want the object %d: %q", oinfo, info.MetaID, q.lines())
	}
	if buf, rc := q.ObjBufRetrieve(qo); rc != capi.Succeed || buf != unsafe.Pointer(&x) {
		t.Fatalf("buf %p, want the property's %p", buf, &x)
	}
	if q.ObjClose(qo) != capi.Succeed {
		t.Fatal(q.lines())
	}
	q.quiet(t)
}
