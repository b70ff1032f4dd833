package capi_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/pdcgo/pdc/capi"
	"github.com/pdcgo/pdc/client/clienttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		removeInstall()
		os.Exit(code)
	}))
}

// testCluster is an in-process cluster whose servers stand for nodes: one
// server per host, each serving dir/prod-HOST.
type testCluster struct {
	*clienttest.Cluster
	dir, tmpdir string
}

func startCluster(t *testing.T, hosts ...string) *testCluster {
	t.Helper()
	c := clienttest.Start(t, clienttest.Options{Hosts: hosts, Staging: true})
	return &testCluster{Cluster: c, dir: c.Dir(), tmpdir: c.TmpDir()}
}

// proc is one C process's view: its Lib, its environment and its stderr.
type proc struct {
	*capi.Lib
	env    map[string]string
	mu     sync.Mutex
	stderr bytes.Buffer
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.Write(b)
}

// lines returns what the Lib reported, one failure per line, and forgets it.
func (p *proc) lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := strings.TrimSpace(p.stderr.String())
	p.stderr.Reset()
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// wantLine checks that exactly one failure was reported, containing each
// of parts.
func (p *proc) wantLine(t *testing.T, parts ...string) {
	t.Helper()
	ls := p.lines()
	if len(ls) != 1 {
		t.Fatalf("got %d report lines, want 1: %q", len(ls), ls)
	}
	if !strings.HasPrefix(ls[0], "libpdc: ") {
		t.Errorf("line %q does not start with libpdc:", ls[0])
	}
	for _, part := range parts {
		if !strings.Contains(ls[0], part) {
			t.Errorf("line %q lacks %q", ls[0], part)
		}
	}
}

func (p *proc) quiet(t *testing.T) {
	t.Helper()
	if ls := p.lines(); len(ls) > 0 {
		t.Fatalf("unexpected reports: %q", ls)
	}
}

func newProc(env map[string]string) *proc {
	p := &proc{env: env}
	p.Lib = capi.New(capi.Config{Stderr: p, Getenv: func(k string) string { return p.env[k] }})
	return p
}

// node is a process on host in tc: with a producer dir (the one its
// server serves) and a consumer dir of its own.
func (tc *testCluster) node(host string, extra ...string) *proc {
	env := map[string]string{
		"PDC_TMPDIR":             tc.tmpdir,
		"PDC_HOST":               host,
		"PDC_STAGE_PRODUCER_DIR": filepath.Join(tc.dir, "prod-"+host),
		"PDC_STAGE_CONSUMER_DIR": filepath.Join(tc.dir, "cons-"+host),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return newProc(env)
}

func (p *proc) init(t *testing.T) uint64 {
	t.Helper()
	id := p.Init("test")
	if id == 0 {
		t.Fatalf("PDCinit failed: %q", p.lines())
	}
	t.Cleanup(func() { p.Close(id) })
	return id
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestInitWithoutServersGivesUpAtTheTimeout(t *testing.T) {
	p := newProc(map[string]string{"PDC_TMPDIR": t.TempDir(), "PDC_TIMEOUT": "0.3"})
	start := time.Now()
	if id := p.Init("lonely"); id != 0 {
		t.Fatalf("PDCinit without servers returned %d", id)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 10*time.Second {
		t.Errorf("PDCinit took %v, want about 0.3s", took)
	}
	// One line: that it waited, and why it failed.
	p.wantLine(t, `PDCinit("lonely"): waited up to 300ms for servers to start`, "no server list")
}

func TestInitWaitsForServersStillStarting(t *testing.T) {
	dir := t.TempDir()
	p := newProc(map[string]string{"PDC_TMPDIR": filepath.Join(dir, "tmp"), "PDC_TIMEOUT": "60"})
	got := make(chan uint64, 1)
	go func() { got <- p.Init("early") }()
	// The servers start once PDCinit waits for their list: it makes the
	// tmpdir to watch it (the test does not).
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(filepath.Join(dir, "tmp")); err == nil {
			break
		}
		select {
		case id := <-got:
			t.Fatalf("PDCinit returned %d before servers started: %q", id, p.lines())
		case <-tick.C:
		}
	}
	tc := clienttest.Start(t, clienttest.Options{Dir: dir})
	id := <-got
	if id == 0 {
		t.Fatalf("PDCinit did not wait for the servers: %q", p.lines())
	}
	// It succeeded: it printed nothing, waiting included.
	p.quiet(t)
	if p.Close(id) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if err := tc.StopAll(); err != nil {
		t.Fatal(err)
	}
}

func TestBadTimeoutSettingFailsInit(t *testing.T) {
	p := newProc(map[string]string{"PDC_TMPDIR": t.TempDir(), "PDC_TIMEOUT": "soon"})
	if id := p.Init("x"); id != 0 {
		t.Fatal("PDC_TIMEOUT=soon accepted")
	}
	p.wantLine(t, `PDCinit("x")`, `PDC_TIMEOUT="soon"`, "want a positive number of seconds or a duration")
}

func TestStageProduceConsumeAcrossNodes(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	prod, cons := tc.node("node-a"), tc.node("node-b")
	pid, cid := prod.init(t), cons.init(t)

	// The consumer waits for a file the producer has not made yet.
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	type result struct {
		local string
		rc    int
	}
	res := make(chan result, 1)
	go func() {
		local, rc := cons.StageConsumeLocal(cid, "run/out.bin", 60)
		res <- result{local, rc}
	}()
	writeFile(t, filepath.Join(prod.env["PDC_STAGE_PRODUCER_DIR"], "run/out.bin"), data)
	if rc := prod.StageProduce(pid, "run/out.bin"); rc != capi.Succeed {
		t.Fatalf("produce: %q", prod.lines())
	}
	r := <-res
	if r.rc != capi.Succeed {
		t.Fatalf("consume: %q", cons.lines())
	}
	if want := filepath.Join(cons.env["PDC_STAGE_CONSUMER_DIR"], "run/out.bin"); r.local != want {
		t.Errorf("local path %s, want %s", r.local, want)
	}
	if got, err := os.ReadFile(r.local); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("consumed copy: %v, %d bytes, equal %v", err, len(got), bytes.Equal(got, data))
	}

	// Empty files are files; absolute paths inside the dir are paths.
	empty := filepath.Join(prod.env["PDC_STAGE_PRODUCER_DIR"], "empty")
	writeFile(t, empty, nil)
	if prod.StageProduce(pid, empty) != capi.Succeed || cons.StageConsume(cid, "empty", 0) != capi.Succeed {
		t.Fatalf("empty file: %q %q", prod.lines(), cons.lines())
	}
	if st, err := os.Stat(filepath.Join(cons.env["PDC_STAGE_CONSUMER_DIR"], "empty")); err != nil || st.Size() != 0 {
		t.Fatalf("consumed empty file: %v", err)
	}

	// Through the pull transport, chosen by $PDC_DTL.
	pull := tc.node("node-b", "PDC_DTL", "pull", "PDC_STAGE_CONSUMER_DIR", filepath.Join(tc.dir, "cons-pull"))
	if id := pull.init(t); pull.StageConsume(id, "run/out.bin", 30) != capi.Succeed {
		t.Fatalf("consume by pull: %q", pull.lines())
	}
	if got, _ := os.ReadFile(filepath.Join(tc.dir, "cons-pull", "run/out.bin")); !bytes.Equal(got, data) {
		t.Fatal("the pulled copy differs")
	}
	prod.quiet(t)
	cons.quiet(t)
}

func TestStageBadInput(t *testing.T) {
	tc := startCluster(t, "node-a")
	p := tc.node("node-a")
	id := p.init(t)
	pdir := p.env["PDC_STAGE_PRODUCER_DIR"]
	writeFile(t, filepath.Join(pdir, "../outside"), []byte("x"))

	for _, c := range []struct {
		path string
		want []string
	}{
		{"../outside", []string{`pdc_stage_produce(pdc 1, "../outside")`, "leaves the managed dir"}},
		{filepath.Join(pdir, "../outside"), []string{"is outside the producer dir"}},
		{"nothing-here", []string{"no such file in the producer dir", "not found"}},
		{"", []string{`pdc_stage_produce(pdc 1, "")`, "no path (NULL or empty)"}},
	} {
		if p.StageProduce(id, c.path) != capi.Fail {
			t.Fatalf("produce %q succeeded", c.path)
		}
		p.wantLine(t, c.want...)
	}

	start := time.Now()
	if p.StageConsume(id, "never", 0.3) != capi.Fail {
		t.Fatal("consumed a file never produced")
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 10*time.Second {
		t.Errorf("a 0.3s consume took %v", took)
	}
	p.wantLine(t, `pdc_stage_consume(pdc 1, "never", 0.3s)`, "gave up after", "not produced")
	for _, bad := range []float64{-1, math.NaN(), math.Inf(-1)} {
		if local, rc := p.StageConsumeLocal(id, "never", bad); rc != capi.Fail || local != "" {
			t.Fatalf("timeout %v accepted", bad)
		}
		p.wantLine(t, "pdc_stage_consume_local", "want a positive number of seconds")
	}

	// The process goes on.
	writeFile(t, filepath.Join(pdir, "ok"), []byte("fine"))
	if p.StageProduce(id, "ok") != capi.Succeed || p.StageConsume(id, "ok", 10) != capi.Succeed {
		t.Fatalf("after errors: %q", p.lines())
	}
	p.quiet(t)
}

func TestInfiniteConsumeWaitsUntilProduced(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	prod, cons := tc.node("node-a"), tc.node("node-b")
	pid, cid := prod.init(t), cons.init(t)
	res := make(chan int, 1)
	go func() { res <- cons.StageConsume(cid, "late", math.Inf(1)) }()
	writeFile(t, filepath.Join(prod.env["PDC_STAGE_PRODUCER_DIR"], "late"), []byte("at last"))
	if prod.StageProduce(pid, "late") != capi.Succeed {
		t.Fatal(prod.lines())
	}
	if <-res != capi.Succeed {
		t.Fatal(cons.lines())
	}
}

// A forked process's copy of the library (capi/shim loads one) numbers its
// handles above its parent's, so that one it inherited is refused as the
// parent's, never taken for its own.
func TestForkedGenerationHandles(t *testing.T) {
	tc := startCluster(t, "node-a")
	p := tc.node("node-a")
	p.ForkedGeneration(2)
	id := p.init(t)
	if id != 2<<32+1 {
		t.Fatalf("first id of generation 2 is %d, want %d", id, uint64(2<<32+1))
	}
	p.ForkedGeneration(3) // too late: a handle exists
	prop := p.PropCreate(capi.PropContCreate, id)
	if prop != id+1 {
		t.Fatalf("second id %d, want %d", prop, id+1)
	}
	for _, c := range []struct {
		id   uint64
		want string
	}{
		{1, "1 is a handle of the process this one was forked from: a forked process opens its own (PDCinit)"},
		{2 << 32, "is a handle of the process this one was forked from"},
		{id + 100, "is not a handle this process was given"},
	} {
		if p.PropClose(c.id) != capi.Fail {
			t.Fatalf("PDCprop_close(%d) succeeded", c.id)
		}
		p.wantLine(t, fmt.Sprintf("PDCprop_close(%d)", c.id), c.want)
	}
	if p.PropClose(prop) != capi.Succeed {
		t.Fatal(p.lines())
	}
}

func TestHandles(t *testing.T) {
	tc := startCluster(t, "node-a")
	p := tc.node("node-a")
	id := p.init(t)
	prop := p.PropCreate(capi.PropContCreate, id)
	if prop == 0 {
		t.Fatal(p.lines())
	}
	for _, c := range []struct {
		call func() int
		want []string
	}{
		{func() int { return p.Close(0) }, []string{"PDCclose(0)", "id 0 is not a pdc connection", "0 is what a failed call returns"}},
		{func() int { return p.Close(777) }, []string{"PDCclose(777)", "777 is not a handle this process was given"}},
		{func() int { return p.Close(prop) }, []string{"is a container property, not a pdc connection"}},
		{func() int { return p.PropClose(id) }, []string{"PDCprop_close(1)", "1 is a pdc connection (PDCinit), not a container property"}},
		{func() int { return p.StageProduce(prop, "x") }, []string{"is a container property, not a pdc connection"}},
	} {
		if c.call() != capi.Fail {
			t.Fatalf("call succeeded; want %q", c.want)
		}
		p.wantLine(t, c.want...)
	}
	if p.PropClose(prop) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if p.PropClose(prop) != capi.Fail {
		t.Fatal("closed a property twice")
	}
	p.wantLine(t, "is a closed handle")

	// Ids are never reused, so a stale handle cannot name a new thing.
	prop2 := p.PropCreate(capi.PropContCreate, id)
	if prop2 == 0 || prop2 == prop {
		t.Fatalf("new property %d, old %d", prop2, prop)
	}
}

func TestContainers(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")
	id := p.init(t)
	prop := p.PropCreate(capi.PropContCreate, id)

	ct := p.ContCreate("sim", prop)
	again := p.ContCreateCol("sim", prop)
	if ct == 0 || again == 0 || again == ct {
		t.Fatalf("create %d, create again %d: %q", ct, again, p.lines())
	}
	open := p.ContOpen("sim", id)
	if open == 0 || p.ContOpenCol("sim", id) == 0 {
		t.Fatal(p.lines())
	}
	info, rc := p.ContGetInfo("sim")
	if rc != capi.Succeed || info.Name != "sim" || info.LocalID != ct || info.MetaID == 0 {
		t.Fatalf("info %+v rc %d: %q", info, rc, p.lines())
	}

	// get_id hands out the oldest open handle, owed one more close.
	if got := p.ContGetID("sim", id); got != ct {
		t.Fatalf("get_id %d, want %d", got, ct)
	}
	if p.ContClose(ct) != capi.Succeed || p.ContPersist(ct) != capi.Succeed {
		t.Fatalf("the handle closed before its last close: %q", p.lines())
	}
	if p.ContClose(ct) != capi.Succeed || p.ContClose(ct) != capi.Fail {
		t.Fatal("close counts")
	}
	p.wantLine(t, "is a closed handle")
	// With no handle open it opens one.
	if got := p.ContGetID("other", id); got != 0 {
		t.Fatalf("get_id of a container that does not exist: %d", got)
	}
	p.wantLine(t, `PDCcont_get_id("other", pdc 1)`, "not found")

	// Another process sees the container, through the servers.
	q := tc.node("node-b")
	q.init(t)
	remote, rc := q.ContGetInfo("sim")
	if rc != capi.Succeed || remote.LocalID != 0 || remote.MetaID != info.MetaID {
		t.Fatalf("remote info %+v, local %+v: %q", remote, info, q.lines())
	}

	checkContainerLifeAndBadInput(t, p, id, prop, open)

	// PDCclose closes the handles opened through the connection.
	if p.Close(id) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if p.ContClose(again) != capi.Fail || p.PropClose(prop) != capi.Fail {
		t.Fatal("handles outlived their connection")
	}
	if _, rc := p.ContGetInfo("scratch"); rc != capi.Fail {
		t.Fatal("get_info without a connection")
	}
	ls := p.lines()
	if len(ls) != 3 || !strings.Contains(ls[2], "call PDCinit first") {
		t.Fatalf("reports: %q", ls)
	}
}

// checkContainerLifeAndBadInput checks lifetimes, that a deleted
// container's name goes while its handle open stays until closed, and
// that bad input fails with its line.
func checkContainerLifeAndBadInput(t *testing.T, p *proc, id, prop, open uint64) {
	t.Helper()
	if p.PropSetContLifetime(prop, 1) != capi.Succeed {
		t.Fatal(p.lines())
	}
	tr := p.ContCreate("scratch", prop)
	if tr == 0 || p.ContPersist(tr) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if p.PropSetContLifetime(prop, 2) != capi.Fail {
		t.Fatal("lifetime 2 accepted")
	}
	p.wantLine(t, "unknown lifetime 2")

	// Delete: the name goes, the handle stays until closed.
	if p.ContDel(open) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if p.ContOpen("sim", id) != 0 {
		t.Fatal("opened a deleted container")
	}
	p.wantLine(t, `PDCcont_open("sim", pdc 1)`, "not found")
	if p.ContClose(open) != capi.Succeed {
		t.Fatal(p.lines())
	}

	for _, c := range []struct {
		call func() uint64
		want []string
	}{
		{func() uint64 { return p.ContCreate("", prop) }, []string{`PDCcont_create("", prop 2)`, "no container name (NULL or empty)"}},
		{func() uint64 { return p.ContCreate("x", id) }, []string{"is a pdc connection (PDCinit), not a container property"}},
		{func() uint64 { return p.ContOpen("x", prop) }, []string{"is a container property, not a pdc connection"}},
		{func() uint64 { return p.PropCreate(9, id) }, []string{"PDCprop_create(9, pdc 1)", "unknown property type 9"}},
	} {
		if got := c.call(); got != 0 {
			t.Fatalf("got handle %d; want a failure %q", got, c.want)
		}
		p.wantLine(t, c.want...)
	}
}

// C programs call from many threads at once.
func TestConcurrentCalls(t *testing.T) {
	tc := startCluster(t, "node-a")
	p := tc.node("node-a")
	id := p.init(t)
	prop := p.PropCreate(capi.PropContCreate, id)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 20 {
				ct := p.ContCreate("shared", prop)
				if ct == 0 {
					t.Error(p.lines())
					return
				}
				got := p.ContGetID("shared", id)
				p.ContPersist(got)
				p.ContClose(got)
				p.ContClose(ct)
				if i%2 == 0 {
					p.ContGetInfo("shared")
				}
			}
		})
	}
	wg.Wait()
	p.quiet(t)
}

func TestContainerTags(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a")
	id := p.init(t)
	ct := p.ContCreate("tagged", p.PropCreate(capi.PropContCreate, id))
	put := func(name string, typ int, v []byte) int {
		var ptr unsafe.Pointer
		if len(v) > 0 {
			ptr = unsafe.Pointer(&v[0])
		}
		return p.ContPutTag(ct, name, ptr, typ, uint64(len(v)))
	}
	const pdcString, pdcInt64, pdcDouble = 4, 8, 2
	if put("units", pdcString, []byte("kelvin\x00")) != capi.Succeed || put("step", pdcInt64, []byte{42, 0, 0, 0, 0, 0, 0, 0}) != capi.Succeed ||
		put("empty", pdcDouble, nil) != capi.Succeed {
		t.Fatal(p.lines())
	}
	for _, want := range []struct {
		name string
		typ  int
		v    string
	}{{"units", pdcString, "kelvin\x00"}, {"step", pdcInt64, "*\x00\x00\x00\x00\x00\x00\x00"}, {"empty", pdcDouble, ""}} {
		tag, rc := p.ContGetTag(ct, want.name)
		if rc != capi.Succeed || !tag.Found || tag.Type != want.typ || string(tag.Value) != want.v {
			t.Fatalf("tag %s: %+v rc %d, want type %d value %q: %q", want.name, tag, rc, want.typ, want.v, p.lines())
		}
	}
	// Another process sees them, by the container's name.
	q := tc.node("node-b")
	qct := q.ContOpen("tagged", q.init(t))
	if tag, rc := q.ContGetTag(qct, "units"); rc != capi.Succeed || string(tag.Value) != "kelvin\x00" {
		t.Fatalf("from another process: %+v: %q", tag, q.lines())
	}

	// Replace, delete, and read what is not there.
	if put("step", pdcInt64, []byte{7, 0, 0, 0, 0, 0, 0, 0}) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if tag, _ := p.ContGetTag(ct, "step"); tag.Value[0] != 7 {
		t.Fatalf("replaced tag reads %v", tag.Value)
	}
	if p.ContDelTag(ct, "step") != capi.Succeed {
		t.Fatal(p.lines())
	}
	if tag, rc := p.ContGetTag(ct, "step"); rc != capi.Succeed || tag.Found || tag.Type != -1 || tag.Value != nil {
		t.Fatalf("deleted tag: %+v rc %d", tag, rc)
	}
	// A tag not set deletes without a word, as in PDC.
	if p.ContDelTag(ct, "step") != capi.Succeed || p.ContDelTag(ct, "never-set") != capi.Succeed {
		t.Fatalf("deleting a tag not set failed: %q", p.lines())
	}
	p.quiet(t)

	checkBadContainerTags(t, p, id, ct, put)
}

// checkBadContainerTags checks that tag calls of bad input fail with
// their line, and that tags of a deleted container are an error, not an
// empty tag.
func checkBadContainerTags(t *testing.T, p *proc, id, ct uint64, put func(name string, typ int, v []byte) int) {
	t.Helper()
	big := make([]byte, 1<<16+1)
	for _, c := range []struct {
		call func() int
		want []string
	}{
		{func() int { return put("", pdcString, []byte("x")) }, []string{`PDCcont_put_tag(3, "", type 4, 1 bytes)`, "no tag name"}},
		{func() int { return put("x", 99, []byte("x")) }, []string{"unknown pdc_var_type_t 99"}},
		{func() int { return put("x", -1, []byte("x")) }, []string{"unknown pdc_var_type_t -1"}},
		{func() int { return put("x", pdcString, big) }, []string{"65537 bytes is over the limit of 65536"}},
		{func() int { return p.ContPutTag(ct, "x", nil, pdcString, 8) }, []string{"value is NULL but size is 8"}},
		{func() int { return p.ContPutTag(id, "x", nil, pdcString, 0) }, []string{"is a pdc connection (PDCinit), not a container"}},
		{func() int { _, rc := p.ContGetTag(ct, ""); return rc }, []string{"PDCcont_get_tag(3, \"\")", "no tag name"}},
	} {
		if c.call() != capi.Fail {
			t.Fatalf("call succeeded; want %q", c.want)
		}
		p.wantLine(t, c.want...)
	}

	// Tags of a deleted container are an error, not an empty tag.
	if p.ContDel(ct) != capi.Succeed {
		t.Fatal(p.lines())
	}
	if _, rc := p.ContGetTag(ct, "units"); rc != capi.Fail {
		t.Fatal("read a tag of a deleted container")
	}
	p.wantLine(t, `PDCcont_get_tag(3, "units")`, "not found")
}
