package capi_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pdcgo/pdc/capi"
	"github.com/pdcgo/pdc/client"
)

func TestIterators(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")

	// Without a connection: nothing to list through.
	if id, rc := p.ContIterStart(); id != 0 || rc != capi.Fail {
		t.Fatalf("ContIterStart without PDCinit: %d, %d", id, rc)
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

	checkContainerIterator(t, p, pid, cont, empty, cprop)
	checkObjectIterator(t, p, cont)

	// Another process: no local handles.
	q := tc.node("node-b")
	qcont := q.ContOpen("c", q.init(t))
	qi, _ := q.ObjIterStart(qcont)
	if info, rc := q.ObjIterInfo(qi); rc != capi.Succeed || info.LocalID != 0 || info.Name == "" {
		t.Fatalf("from another process: %+v: %q", info, q.lines())
	}
	if _, rc := q.ObjIterInfo(qi); rc != capi.Succeed {
		t.Fatal(q.lines())
	}
	q.IterEnd(qi)

	// An empty container: no iterator, no failure.
	if id, rc := p.ObjIterStart(empty); id != 0 || rc != capi.Succeed {
		t.Fatalf("ObjIterStart of an empty container: %d, %d", id, rc)
	}
	if names, rc := p.ContObjNames(empty); len(names) != 0 || rc != capi.Succeed {
		t.Fatalf("ContObjNames of an empty container: %q, %d", names, rc)
	}
	if names, rc := q.ContObjNames(qcont); len(names) == 0 || rc != capi.Succeed {
		t.Fatalf("ContObjNames: %q, %d: %q", names, rc, q.lines())
	}
	p.quiet(t)
	if names, rc := p.ContObjNames(prop); names != nil || rc != capi.Fail {
		t.Fatalf("ContObjNames of a property: %q, %d", names, rc)
	}
	p.wantLine(t, "pdc_cont_obj_names(cont 4)", "is a object property, not a container")
	p.quiet(t)
	if id, rc := p.ObjIterStart(prop); id != 0 || rc != capi.Fail {
		t.Fatalf("ObjIterStart of a property: %d, %d", id, rc)
	}
	p.wantLine(t, "PDCobj_iter_start(cont 4)", "is a object property, not a container")

	// An iterator abandoned before its end goes with its connection.
	oi, _ := p.ObjIterStart(cont)
	if p.Close(pid) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if _, rc := p.ObjIterInfo(oi); rc != capi.Fail {
		t.Fatal("an iterator outlived its connection")
	}
	p.wantLine(t, "PDCobj_iter_get_info(iterator ", "is a closed handle")
	// iter_start that could not allocate its C struct ends it: quietly,
	// though PDCclose released the iterator already.
	p.IterEnd(oi)
	p.quiet(t)
}

// checkContainerIterator walks the container handles this process has
// open, newest first, one entry per handle (PDC's semantics): a second
// open of "c" is listed too, with the same meta id. Past its end the
// iterator is gone.
func checkContainerIterator(t *testing.T, p *proc, pid, cont, empty, cprop uint64) {
	t.Helper()
	again := p.ContOpen("c", pid)
	if again == 0 {
		t.Fatal(p.lines())
	}
	it, rc := p.ContIterStart()
	if it == 0 || rc != capi.Succeed {
		t.Fatalf("ContIterStart: %d, %d: %q", it, rc, p.lines())
	}
	var got []capi.ContInfo
	for more := true; more; more = p.IterNext(it) {
		info, rc := p.ContIterInfo(it)
		if rc != capi.Succeed || info.MetaID == 0 {
			t.Fatalf("ContIterInfo: %+v: %q", info, p.lines())
		}
		got = append(got, info)
		if len(got) == 1 {
			// A container opened meanwhile is not listed: the handles
			// were taken at the start.
			p.ContCreate("later", cprop)
		}
	}
	p.quiet(t)
	if len(got) != 3 || got[0].Name != "c" || got[0].LocalID != again || got[1].Name != "empty" || got[1].LocalID != empty ||
		got[2].Name != "c" || got[2].LocalID != cont || got[0].MetaID != got[2].MetaID {
		t.Errorf("containers %+v, want c (handle %d), empty (%d), c (%d), c's two with one meta id", got, again, empty, cont)
	}
	// Past the end the iterator is gone.
	if _, rc := p.ContIterInfo(it); rc != capi.Fail {
		t.Fatal("read an ended iterator")
	}
	p.wantLine(t, "PDCcont_iter_get_info(iterator", "is a closed handle")
	if p.IterNext(it) {
		t.Fatal("moved an ended iterator")
	}
	p.wantLine(t, "iter_next(iterator", "is a closed handle")
}

// checkObjectIterator walks cont's objects: in meta id order, with the
// local ids of this process's open handles, refused as a container
// iterator.
func checkObjectIterator(t *testing.T, p *proc, cont uint64) {
	t.Helper()
	oi, rc := p.ObjIterStart(cont)
	if oi == 0 || rc != capi.Succeed {
		t.Fatalf("ObjIterStart: %d, %d: %q", oi, rc, p.lines())
	}
	if _, rc := p.ContIterInfo(oi); rc != capi.Fail {
		t.Fatal("read an object iterator as containers")
	}
	p.wantLine(t, "is over objects (PDCobj_iter_start), not containers")
	var objs []string
	var last uint64
	for more := true; more; more = p.IterNext(oi) {
		info, rc := p.ObjIterInfo(oi)
		if rc != capi.Succeed || info.MetaID <= last || info.LocalID == 0 || len(info.Prop.Dims) != 1 ||
			info.Prop.Dims[0] != 4 || info.Prop.Type != pdcInt {
			t.Fatalf("object %d: %+v after meta id %d: %q", len(objs), info, last, p.lines())
		}
		last = info.MetaID
		got, _ := p.ObjGetInfo(info.LocalID)
		if got.MetaID != info.MetaID {
			t.Fatalf("local id %d is object %d, not %d", info.LocalID, got.MetaID, info.MetaID)
		}
		objs = append(objs, info.Name)
	}
	slices.Sort(objs)
	if !slices.Equal(objs, []string{"o1", "o2", "o3"}) {
		t.Errorf("objects %q, want o1 o2 o3", objs)
	}
	p.quiet(t)
}

// An iterator pages: with pages of 2 objects it walks 25 objects on two
// servers through many pages each, every object once, in meta id order.
func TestIteratorPages(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")
	p.Lib = capi.New(capi.Config{Stderr: p, Getenv: func(k string) string { return p.env[k] },
		ClientOptions: []client.Option{client.WithPageSize(2)}})
	_, cont, prop := objSetup(t, p, 4)
	want := map[string]bool{}
	for i := range 25 {
		name := fmt.Sprintf("p%02d", i)
		o := p.ObjCreate(cont, name, prop)
		if o == 0 {
			t.Fatal(p.lines())
		}
		p.ObjClose(o)
		want[name] = true
	}
	oi, rc := p.ObjIterStart(cont)
	if oi == 0 || rc != capi.Succeed {
		t.Fatalf("ObjIterStart: %q", p.lines())
	}
	var last uint64
	servers := map[int]bool{}
	for more := true; more; more = p.IterNext(oi) {
		info, rc := p.ObjIterInfo(oi)
		if rc != capi.Succeed || info.MetaID <= last || !want[info.Name] {
			t.Fatalf("%+v after meta id %d: %q", info, last, p.lines())
		}
		last = info.MetaID
		delete(want, info.Name)
		servers[info.MetaServer] = true
	}
	if len(want) > 0 || len(servers) != 2 {
		t.Fatalf("not listed: %v; servers %v", want, servers)
	}
	p.quiet(t)
}
