package capi_test

import (
	"testing"

	"github.com/pdcgo/pdc/capi"
)

func TestIterators(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")

	// Without a connection: nothing to list through.
	if id, n := p.ContIterStart(); id != 0 || n != -1 {
		t.Fatalf("ContIterStart without PDCinit: %d, %d", id, n)
	}
	p.wantLine(t, "PDCcont_iter_start()", "call PDCinit first")

	pid, cont, prop := objSetup(t, p, 4) // container "c"
	cprop := p.PropCreate(capi.PropContCreate, pid)
	empty := p.ContCreate("empty", cprop)
	for _, name := range []string{"o2", "o1", "o3"} {
		if p.ObjCreate(cont, name, prop) == 0 {
			t.Fatal(p.lines())
		}
	}

	it, n := p.ContIterStart()
	if it == 0 || n != 2 {
		t.Fatalf("ContIterStart: %d, %d: %q", it, n, p.lines())
	}
	// A container made after the start is not in the snapshot.
	p.ContCreate("later", cprop)
	var names []string
	for i := range n {
		info, rc := p.ContIterInfo(it, i)
		if rc != capi.Succeed || info.MetaID == 0 {
			t.Fatalf("ContIterInfo(%d): %+v: %q", i, info, p.lines())
		}
		if want := map[string]uint64{"c": cont, "empty": empty}[info.Name]; info.LocalID != want {
			t.Errorf("container %s: local id %d, want %d", info.Name, info.LocalID, want)
		}
		names = append(names, info.Name)
	}
	if names[0] != "c" || names[1] != "empty" {
		t.Errorf("containers %q, want [c empty]", names)
	}
	if _, rc := p.ContIterInfo(it, 2); rc != capi.Fail {
		t.Fatal("read past the end")
	}
	p.wantLine(t, "PDCcont_iter_get_info(iterator", "position 2 is past the iterator's 2 items")
	if _, rc := p.ObjIterInfo(it, 0); rc != capi.Fail {
		t.Fatal("read a container iterator as objects")
	}
	p.wantLine(t, "is over containers (PDCcont_iter_start), not objects")
	p.IterEnd(it)
	if _, rc := p.ContIterInfo(it, 0); rc != capi.Fail {
		t.Fatal("read an ended iterator")
	}
	p.wantLine(t, "is a closed handle")

	// Objects, sorted by name; local ids of this process's open handles.
	oi, n := p.ObjIterStart(cont)
	if oi == 0 || n != 3 {
		t.Fatalf("ObjIterStart: %d, %d: %q", oi, n, p.lines())
	}
	for i, want := range []string{"o1", "o2", "o3"} {
		info, rc := p.ObjIterInfo(oi, i)
		if rc != capi.Succeed || info.Name != want || info.MetaID == 0 || info.LocalID == 0 || len(info.Prop.Dims) != 1 ||
			info.Prop.Dims[0] != 4 || info.Prop.Type != pdcInt {
			t.Fatalf("object %d: %+v, want %s: %q", i, info, want, p.lines())
		}
		got, _ := p.ObjGetInfo(info.LocalID)
		if got.MetaID != info.MetaID {
			t.Fatalf("local id %d is object %d, not %d", info.LocalID, got.MetaID, info.MetaID)
		}
	}
	if _, rc := p.ContIterInfo(oi, 0); rc != capi.Fail {
		t.Fatal("read an object iterator as containers")
	}
	p.wantLine(t, "is over objects (PDCobj_iter_start), not containers")

	// Another process: no local handles.
	q := tc.node("node-b")
	qcont := q.ContOpen("c", q.init(t))
	qi, n := q.ObjIterStart(qcont)
	if info, rc := q.ObjIterInfo(qi, 0); n != 3 || rc != capi.Succeed || info.LocalID != 0 || info.Name != "o1" {
		t.Fatalf("from another process: %d objects, %+v: %q", n, info, q.lines())
	}

	// An empty container: no iterator, no failure.
	if id, n := p.ObjIterStart(empty); id != 0 || n != 0 {
		t.Fatalf("ObjIterStart of an empty container: %d, %d", id, n)
	}
	p.quiet(t)
	if id, n := p.ObjIterStart(prop); id != 0 || n != -1 {
		t.Fatalf("ObjIterStart of a property: %d, %d", id, n)
	}
	p.wantLine(t, "PDCobj_iter_start(cont 4)", "is a object property, not a container")

	// An iterator abandoned before its end goes with its connection.
	if p.Close(pid) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if _, rc := p.ObjIterInfo(oi, 0); rc != capi.Fail {
		t.Fatal("an iterator outlived its connection")
	}
	p.wantLine(t, "PDCobj_iter_get_info(iterator ", "is a closed handle")
	// iter_next past the end then ends it, and returns normally (NULL):
	// it prints nothing, though PDCclose released the iterator already.
	p.IterEnd(oi)
	p.quiet(t)
}
