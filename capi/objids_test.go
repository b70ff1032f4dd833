package capi_test

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/pdcgo/pdc/capi"
)

func ptrOf(hs []uint64) unsafe.Pointer {
	if len(hs) == 0 {
		return nil
	}
	return unsafe.Pointer(&hs[0])
}

func TestContainerObjIDs(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")
	id, home, prop := objSetup(t, p, 4) // container "c"
	cprop := p.PropCreate(capi.PropContCreate, id)
	box := p.ContCreate("box", cprop)
	empty := p.ContCreate("empty", cprop)
	var objs, metas []uint64
	servers := map[int]bool{}
	for i := range 6 {
		o := p.ObjCreate(home, fmt.Sprint("o", i), prop)
		if o == 0 {
			t.Fatal(p.lines())
		}
		info, rc := p.ObjGetInfo(o)
		if rc != capi.Succeed {
			t.Fatal(p.lines())
		}
		objs, metas = append(objs, o), append(metas, info.MetaID)
		servers[info.MetaServer] = true
	}
	if len(servers) != 2 {
		t.Fatalf("the objects are all on one metadata server: %v", servers)
	}
	own := p.ObjCreate(box, "own", prop)
	ownInfo, _ := p.ObjGetInfo(own)

	put := func(cont uint64, hs ...uint64) int { return putIDs(p, cont, hs...) }
	del := func(cont uint64, hs ...uint64) int { return delIDs(p, cont, hs...) }
	get := func(cont uint64) []uint64 { t.Helper(); return getIDs(t, p, cont) }
	sorted := func(ids ...uint64) []uint64 { return slices.Sorted(slices.Values(ids)) }

	if got := get(empty); got != nil {
		t.Fatalf("empty container: %v", got)
	}
	if put(box, objs...) != capi.Succeed || put(box, objs[0], objs[0], own) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if got, want := get(box), sorted(append([]uint64{ownInfo.MetaID}, metas...)...); !slices.Equal(got, want) {
		t.Fatalf("box: %v, want %v", got, want)
	}
	if got := get(home); !slices.Equal(got, sorted(metas...)) {
		t.Fatalf("home: %v, want %v", got, sorted(metas...))
	}
	checkMembersFromAnotherProcess(t, tc, metas[1])
	closedInfo := checkBadObjIDs(t, p, home, empty, prop, objs)

	// Remove; delete an object; delete the box: its added members stay.
	if del(box, objs[0], objs[1]) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if p.ObjDel(objs[2]) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if got, want := get(box), sorted(ownInfo.MetaID, metas[3], metas[4], metas[5]); !slices.Equal(got, want) {
		t.Fatalf("box after removing two and deleting one: %v, want %v", got, want)
	}
	if p.ObjClose(own) != capi.Succeed || p.ContDel(box) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if got, want := get(home), sorted(metas[0], metas[1], metas[3], metas[4], metas[5], closedInfo.MetaID); !slices.Equal(got, want) {
		t.Fatalf("home after deleting the box: %v, want %v", got, want)
	}
	if _, rc := p.ContGetObjIDs(box); rc != capi.Fail {
		t.Fatal("listed a deleted container")
	}
	p.wantLine(t, "PDCcont_get_objids", "not found")
	p.quiet(t)
}

// checkMembersFromAnotherProcess opens the added member meta by its id,
// with the container "box", from another process, and iterates over the
// box's 7 members.
func checkMembersFromAnotherProcess(t *testing.T, tc *testCluster, meta uint64) {
	t.Helper()
	q := tc.node("node-b")
	qid := q.init(t)
	qbox := q.ContOpen("box", qid)
	qo := q.ObjOpenMetaID(qbox, meta, 0)
	if qo == 0 {
		t.Fatal(q.lines())
	}
	if info, _ := q.ObjGetInfo(qo); info.Name != "o1" {
		t.Fatalf("opened %q by id from the box", info.Name)
	}
	q.ObjClose(qo)
	// And iterates over every member.
	it, rc := q.ObjIterStart(qbox)
	n := 0
	for more := it != 0; more; more = q.IterNext(it) {
		n++
	}
	if rc != capi.Succeed || n != 7 {
		t.Fatalf("iterator over the box: %d items: %q", n, q.lines())
	}
	q.quiet(t)
}

// putIDs and delIDs are PDCcont_put_objids and _del_objids of handles.
func putIDs(p *proc, cont uint64, hs ...uint64) int { return p.ContPutObjIDs(cont, len(hs), ptrOf(hs)) }

func delIDs(p *proc, cont uint64, hs ...uint64) int { return p.ContDelObjIDs(cont, len(hs), ptrOf(hs)) }

// getIDs is PDCcont_get_objids, which must succeed.
func getIDs(t *testing.T, p *proc, cont uint64) []uint64 {
	t.Helper()
	ids, rc := p.ContGetObjIDs(cont)
	if rc != capi.Succeed {
		t.Fatal(p.lines())
	}
	return ids
}

// checkBadObjIDs checks that membership calls of bad input each fail, say
// why, and change nothing. It returns the info of an object it closed,
// which stays a member of home.
func checkBadObjIDs(t *testing.T, p *proc, home, empty, prop uint64, objs []uint64) capi.ObjInfo {
	t.Helper()
	closed := p.ObjCreate(home, "closed", prop)
	closedInfo, _ := p.ObjGetInfo(closed)
	p.ObjClose(closed)
	gone := p.ObjCreate(home, "gone", prop)
	goneInfo, _ := p.ObjGetInfo(gone)
	if p.ObjDel(gone) != capi.Succeed {
		t.Fatal(p.lines())
	}
	for _, c := range []struct {
		call func() int
		want []string
	}{
		{func() int { return delIDs(p, home, objs[0]) }, []string{fmt.Sprintf("PDCcont_del_objids(cont %d, 1, [%d])", home, objs[0]), `"o0"`, "its home", "delete the object instead"}},
		{func() int { return delIDs(p, empty, objs[0]) }, []string{"is not a member", `container "empty"`}},
		{func() int { return putIDs(p, empty, objs[0], gone) }, []string{"PDCcont_put_objids", fmt.Sprintf("object %d", goneInfo.MetaID), "not found",
			fmt.Sprintf("is handle %d (\"gone\")", gone)}},
		{func() int { return putIDs(p, empty, objs[0], closed) }, []string{fmt.Sprintf("obj_ids[1]: %d is a closed handle", closed)}},
		{func() int { return putIDs(p, empty, objs[0], prop) }, []string{"obj_ids[1]:", "is a object property, not a object"}},
		{func() int { return putIDs(p, prop, objs[0]) }, []string{"is a object property, not a container"}},
		{func() int { return putIDs(p, 12345, objs[0]) }, []string{"12345 is not a handle"}},
		{func() int { return p.ContPutObjIDs(empty, -1, ptrOf(objs)) }, []string{"nobj -1 is negative"}},
		{func() int { return p.ContPutObjIDs(empty, 2, nil) }, []string{"PDCcont_put_objids(cont", ", 2, NULL)", "obj_ids is NULL but nobj is 2"}},
		{func() int { return p.ContDelObjIDs(empty, 1, nil) }, []string{"PDCcont_del_objids", "obj_ids is NULL"}},
		{func() int { return p.ContPutObjIDs(empty, capi.MaxObjIDs+1, ptrOf(objs)) }, []string{"over the limit"}},
		{func() int { _, rc := p.ContGetObjIDs(prop); return rc }, []string{"PDCcont_get_objids(cont", "not a container"}},
	} {
		if c.call() != capi.Fail {
			t.Fatalf("call succeeded; want %q", c.want)
		}
		p.wantLine(t, c.want...)
	}
	if got := getIDs(t, p, empty); got != nil {
		t.Fatalf("a failed call changed the empty container: %v", got)
	}
	if putIDs(p, empty) != capi.Succeed || p.ContPutObjIDs(empty, 0, nil) != capi.Succeed {
		t.Fatalf("nothing to add: %q", p.lines())
	}
	return closedInfo
}
