package stage_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
)

// produceIn runs pdc stage produce on node-a in namespace ns.
func (sc *stageCluster) produceIn(t *testing.T, ns string, paths ...string) string {
	t.Helper()
	r := e2e.Run(t, sc.env("node-a"), append([]string{"stage", "produce", "--namespace", ns, "--producer-dir", sc.prodA}, paths...)...)
	if r.Err != nil {
		t.Fatalf("pdc stage produce --namespace %s %s: %v\nstdout:\n%s\nstderr:\n%s", ns, strings.Join(paths, " "), r.Err, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// stageRun runs pdc stage with args on node-b and fails the test if it
// fails.
func (sc *stageCluster) stageRun(t *testing.T, env []string, args ...string) string {
	t.Helper()
	r := e2e.Run(t, append(sc.env("node-b"), env...), append([]string{"stage"}, args...)...)
	if r.Err != nil {
		t.Fatalf("pdc stage %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Err, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// A re-run of a workflow in a new namespace, with the same file names,
// waits for its own files instead of getting the last run's, whichever way
// the namespace is given (--namespace, PDC_STAGE_NAMESPACE,
// DYAD_KVS_NAMESPACE); the default namespace never saw them.
func TestStageNamespaceRerun(t *testing.T) {
	sc := stageUp(t)
	cons := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	const rel = "out/a.dat"
	run1 := randBytes(1, 5000)
	writeFile(t, sc.prodA, rel, run1)
	sc.produceIn(t, "run-1", rel)
	r := e2e.Run(t, sc.env("node-b", "PDC_STAGE_NAMESPACE=run-1"), "stage", "consume", "--consumer-dir", cons, rel)
	if r.Err != nil || !hasConsumed(r.Stdout, rel, 1, filepath.Join(cons, rel), "inline") {
		t.Fatalf("run 1's consume: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, cons, rel, run1)

	for i, how := range [][]string{{"DYAD_KVS_NAMESPACE=run-2"}, {"PDC_STAGE_NAMESPACE=run-3", "DYAD_KVS_NAMESPACE=not-this"}, {"--namespace=run-4"}} {
		ns := "run-" + string(rune('2'+i))
		env, args := how, []string{"consume", "--timeout", "2m", "--consumer-dir", cons, rel}
		if strings.HasPrefix(how[0], "--") {
			env, args = nil, append([]string{"consume", how[0]}, args[1:]...)
		}
		proc := startStage(t, sc.env("node-b", env...), args...)
		proc.awaitWaiting(t, rel)
		run := randBytes(uint64(10+i), 6000+i)
		writeFile(t, sc.prodA, rel, run)
		sc.produceIn(t, ns, rel)
		r := proc.wait(t)
		if r.Err != nil || !hasConsumed(r.Stdout, rel, 1, filepath.Join(cons, rel), "inline") {
			t.Fatalf("the consume of %s in %s (%v): %v\nstdout:\n%s\nstderr:\n%s", rel, ns, how, r.Err, r.Stdout, r.Stderr)
		}
		sameFile(t, cons, rel, run)
	}
	r = e2e.Run(t, sc.env("node-b"), "stage", "lookup", rel)
	if r.Err == nil || !strings.Contains(r.Stderr, "not been produced") {
		t.Fatalf("lookup of %s in the default namespace: %v\nstdout:\n%s\nstderr:\n%s", rel, r.Err, r.Stdout, r.Stderr)
	}
	out := sc.stageRun(t, nil, "lookup", "--namespace", "run-1", rel)
	if !regexpLine(out, rel, "1") {
		t.Fatalf("lookup in run-1:\n%s", out)
	}
}

// pdc stage ls and rm work in one namespace, by prefix, a page at a time;
// the other namespaces keep their records.
func TestStageListAndRemove(t *testing.T) {
	sc := stageUp(t)
	paths := []string{"out/a.dat", "out/b.dat", "out/c/d.dat", "outer.dat", "x/y.dat"}
	for i, p := range paths {
		writeFile(t, sc.prodA, p, randBytes(uint64(i), 100*(i+1)))
	}
	sc.produceIn(t, "ls", paths...)
	sc.produceIn(t, "ls", "out/a.dat") // version 2
	sc.produce(t, "out/a.dat")         // the default namespace
	sc.produceIn(t, "other", "out/b.dat")

	checkStageLs(t, sc, paths)
	// A client listing and removing a page of one record at a time.
	c := e2e.Connect(t, sc.tmpdir, client.WithHost("node-b"), client.WithNamespace("ls"), client.WithPageSize(1))
	ctx := e2e.Ctx(t, time.Minute)
	var listed []string
	for f, err := range c.AllStaged(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, f.Path)
	}
	if strings.Join(listed, " ") != strings.Join(paths, " ") {
		t.Fatalf("AllStaged by pages of 1: %v, want %v", listed, paths)
	}
	checkStageRm(t, ctx, sc, c)
	// The other namespaces keep theirs.
	if out := sc.stageRun(t, nil, "ls"); !regexpLine(out, "out/a.dat", "1") || strings.Count(out, "\n") != 2 {
		t.Fatalf("pdc stage ls of the default namespace:\n%s", out)
	}
	if out := sc.stageRun(t, nil, "ls", "--namespace", "other", "--json"); !strings.Contains(out, `"path":"out/b.dat"`) {
		t.Fatalf("pdc stage ls of namespace other:\n%s", out)
	}
	r := e2e.Run(t, sc.env("node-b"), "stage", "rm", "--namespace", "ls", "--all", "--prefix", "x")
	if r.Err == nil {
		t.Fatalf("pdc stage rm with --all and --prefix succeeded:\n%s", r.Stdout)
	}
	r = e2e.Run(t, sc.env("node-b"), "stage", "ls", "--namespace", "bad/name")
	if r.Err == nil || !strings.Contains(r.Stderr, "bad/name") {
		t.Fatalf("pdc stage ls --namespace bad/name: %v\n%s", r.Err, r.Stderr)
	}
}

// checkStageLs checks pdc stage ls of namespace "ls", which holds paths
// (out/a.dat at version 2): by prefix as a table, and whole as JSON lines
// with every documented field.
func checkStageLs(t *testing.T, sc *stageCluster, paths []string) {
	t.Helper()
	out := sc.stageRun(t, nil, "ls", "--namespace", "ls", "out/")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "PATH") || !regexpLine(out, "out/a.dat", "2") ||
		!regexpLine(out, "out/b.dat", "1") || !regexpLine(out, "out/c/d.dat", "1") {
		t.Fatalf("pdc stage ls --namespace ls out/:\n%s", out)
	}
	out = sc.stageRun(t, []string{"PDC_STAGE_NAMESPACE=ls"}, "ls", "--json")
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("pdc stage ls --json: line %q: %v", l, err)
		}
		got = append(got, m)
	}
	if len(got) != len(paths) {
		t.Fatalf("pdc stage ls --json: %d lines, want %d:\n%s", len(got), len(paths), out)
	}
	for i, m := range got {
		for _, k := range []string{"path", "namespace", "version", "size", "owner", "host", "crc32c", "produced"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("pdc stage ls --json: line %d has no %q:\n%s", i, k, out)
			}
		}
		if m["path"] != paths[i] || m["namespace"] != "ls" || m["size"] != float64(100*(i+1)) || m["host"] != "node-a" {
			t.Fatalf("pdc stage ls --json: line %d: %v, want %s of %d bytes in ls", i, m, paths[i], 100*(i+1))
		}
		if _, err := time.Parse(time.RFC3339Nano, m["produced"].(string)); err != nil {
			t.Fatalf("pdc stage ls --json: produced: %v", err)
		}
	}
}

// checkStageRm removes namespace "ls"'s records by path (pdc stage rm),
// by prefix (c, by pages of one) and all, checking what is left each time.
func checkStageRm(t *testing.T, ctx context.Context, sc *stageCluster, c *client.Client) {
	t.Helper()
	if out := sc.stageRun(t, nil, "rm", "--namespace", "ls", "out/a.dat", "nothing.dat"); !strings.Contains(out, `removed 1 staged record from namespace "ls"`) {
		t.Fatalf("pdc stage rm of a path:\n%s", out)
	}
	if n, err := c.RemoveStagedPrefix(ctx, "out/"); err != nil || n != 2 {
		t.Fatalf("RemoveStagedPrefix out/ by pages of 1: %d, %v; want 2", n, err)
	}
	if out := sc.stageRun(t, nil, "ls", "--namespace", "ls"); !regexpLine(out, "outer.dat", "1") || !regexpLine(out, "x/y.dat", "1") ||
		strings.Contains(out, "out/") {
		t.Fatalf("pdc stage ls after the removals:\n%s", out)
	}
	if out := sc.stageRun(t, nil, "rm", "--namespace", "ls", "--all"); !strings.Contains(out, `removed 2 staged records from namespace "ls"`) {
		t.Fatalf("pdc stage rm --all:\n%s", out)
	}
	if out := sc.stageRun(t, nil, "ls", "--namespace", "ls"); !strings.HasPrefix(out, "PATH") || strings.Count(out, "\n") != 1 {
		t.Fatalf("pdc stage ls of an emptied namespace:\n%s", out)
	}
	if _, err := c.Lookup(ctx, "x/y.dat"); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("lookup of a removed file: %v", err)
	}
}

// A consume --newer-than V waits for the next produce although version V
// is there; a consumer waiting on a path whose record is removed keeps
// waiting, and the next produce (version 1 again) ends its wait.
func TestStageNewerThanAndRemoveWhileWaiting(t *testing.T) {
	sc := stageUp(t)
	cons := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	const rel, ns = "w.dat", "nt"
	env := sc.env("node-b", "PDC_STAGE_NAMESPACE="+ns)
	b1 := randBytes(1, 3000)
	writeFile(t, sc.prodA, rel, b1)
	sc.produceIn(t, ns, rel)
	r := e2e.Run(t, env, "stage", "consume", "--consumer-dir", cons, "--newer-than", "0", rel)
	if r.Err != nil || !hasConsumed(r.Stdout, rel, 1, filepath.Join(cons, rel), "inline") {
		t.Fatalf("consume --newer-than 0: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}

	// Of a file produced already, a consume --newer-than says it waits
	// for a newer version, and that none came: it said the file was not
	// produced.
	r = e2e.Run(t, env, "stage", "consume", "--consumer-dir", cons, "--newer-than", "1", "--timeout", "1s", rel)
	if r.Err == nil || !strings.Contains(r.Stderr, `waiting for "w.dat" to be produced (a version newer than 1)`) ||
		!strings.Contains(r.Stderr, "no version newer than 1 produced before the deadline") {
		t.Fatalf("consume --newer-than 1 --timeout 1s of version 1: %v\nstderr:\n%s", r.Err, r.Stderr)
	}

	proc := startStage(t, env, "consume", "--timeout", "2m", "--newer-than", "1", "--consumer-dir", cons, rel)
	proc.awaitWaiting(t, rel)
	b2 := randBytes(2, 4000)
	writeFile(t, sc.prodA, rel, b2)
	sc.produceIn(t, ns, rel)
	if r := proc.wait(t); r.Err != nil || !hasConsumed(r.Stdout, rel, 2, filepath.Join(cons, rel), "inline") {
		t.Fatalf("consume --newer-than 1: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, cons, rel, b2)

	proc = startStage(t, env, "consume", "--timeout", "2m", "--newer-than", "2", "--consumer-dir", cons, rel)
	proc.awaitWaiting(t, rel)
	if out := sc.stageRun(t, nil, "rm", "--namespace", ns, "--all"); !strings.Contains(out, "removed 1 staged record") {
		t.Fatalf("pdc stage rm --all while a consumer waits:\n%s", out)
	}
	// Still waiting: a lookup (a round trip after the removal) finds
	// nothing, and the consumer has not ended.
	if r := e2e.Run(t, env, "stage", "lookup", rel); r.Err == nil {
		t.Fatalf("lookup after rm --all:\n%s", r.Stdout)
	}
	select {
	case <-proc.done:
		t.Fatalf("the waiting consumer ended at the removal: %v\nstdout:\n%s\nstderr:\n%s", proc.Err, proc.Stdout.String(), proc.Stderr.String())
	default:
	}
	b3 := randBytes(3, 5000)
	writeFile(t, sc.prodA, rel, b3)
	if out := sc.produceIn(t, ns, rel); !strings.Contains(out, "produced w.dat version 1 ") {
		t.Fatalf("produce after the removal:\n%s", out)
	}
	if r := proc.wait(t); r.Err != nil || !hasConsumed(r.Stdout, rel, 1, filepath.Join(cons, rel), "inline") {
		t.Fatalf("consume --newer-than 2 across the removal: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, cons, rel, b3)
}

// Acknowledged produces in two namespaces (and the default one) survive a
// kill -9 of the servers: after the restart each namespace reads its own
// records back, its files are consumed, and its versions continue.
func TestStageNamespacesSurviveKill(t *testing.T) {
	sc := stageUp(t)
	datadir := e2e.ServerDataDir(t, sc.tmpdir)
	data := map[string][]byte{}
	for i, p := range []string{"r1/only.dat", "r2/only.dat", "both.dat"} {
		data[p] = randBytes(uint64(40+i), 2000+i)
		writeFile(t, sc.prodA, p, data[p])
	}
	sc.produceIn(t, "r1", "r1/only.dat", "both.dat", "both.dat") // both.dat version 2
	sc.produceIn(t, "r2", "r2/only.dat", "both.dat")
	sc.produce(t, "both.dat", "both.dat", "both.dat") // version 3 in the default one
	want := map[string]map[string]uint64{
		"r1": {"r1/only.dat": 1, "both.dat": 2},
		"r2": {"r2/only.dat": 1, "both.dat": 1},
		"":   {"both.dat": 3},
	}
	before := map[string]client.StagedFile{}
	for ns, files := range want {
		c := e2e.Connect(t, sc.tmpdir, client.WithHost("node-b"), client.WithNamespace(ns))
		for p := range files {
			r, err := c.Lookup(e2e.Ctx(t, 10*time.Second), p)
			if err != nil {
				t.Fatal(err)
			}
			before[ns+":"+p] = r
		}
		c.Close()
	}

	e2e.KillAll(t, sc.tmpdir)
	e2e.MustRun(t, append([]string{"up", "-n", "2", "--tmpdir", sc.tmpdir, "--datadir", datadir}, sc.upArgs...)...)

	checked := 0
	for ns, files := range want {
		cons := realDir(t, filepath.Join(sc.base, "cons-"+ns))
		c := e2e.Connect(t, sc.tmpdir, client.WithHost("node-b"), client.WithNamespace(ns), client.WithStageDirs("", cons), client.WithSharedStorage(false))
		ctx := e2e.Ctx(t, time.Minute)
		n := 0
		for f, err := range c.AllStaged(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			b := before[ns+":"+f.Path]
			if f.Version != files[f.Path] || f.Namespace != ns || f.CRC != b.CRC || !f.Produced.Equal(b.Produced) {
				t.Fatalf("namespace %q after the kill: %+v, before: %+v", ns, f, b)
			}
			n++
		}
		if n != len(files) {
			t.Fatalf("namespace %q after the kill lists %d files, want %d", ns, n, len(files))
		}
		for p, v := range files {
			got, err := c.Consume(ctx, p)
			if err != nil || got.Version != v {
				t.Fatalf("consume %s in %q after the kill: %+v, %v", p, ns, got, err)
			}
			sameFile(t, cons, p, data[p])
			checked++
		}
		c.Close()
	}
	t.Logf("%d acknowledged produces in 3 namespaces read back and consumed after kill -9", checked)
	if out := sc.produceIn(t, "r2", "both.dat"); !strings.Contains(out, "produced both.dat version 2 ") {
		t.Fatalf("produce in r2 after the restart does not continue its versions:\n%s", out)
	}
}
