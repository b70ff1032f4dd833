package stage_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/staging"
)

// stageCluster is a two-server cluster standing for two nodes: rank 0
// reports host node-a and serves the producer dir prodA, rank 1 host node-b
// and prodB. Everything the test makes lives under base.
type stageCluster struct {
	tmpdir, base string
	prodA, prodB string
	upArgs       []string // to restart it as it was
}

func stageUp(t *testing.T) *stageCluster {
	t.Helper()
	base := t.TempDir()
	args := []string{"--hosts", "node-a,node-b", "--stage-producer-dir", filepath.Join(base, "prod-{host}")}
	sc := &stageCluster{tmpdir: e2e.Up(t, 2, args...), base: base, upArgs: args,
		prodA: filepath.Join(base, "prod-node-a"), prodB: filepath.Join(base, "prod-node-b")}
	for _, d := range []string{sc.prodA, sc.prodB} {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Fatalf("pdc up did not make the producer dir %s: %v", d, err)
		}
	}
	return sc
}

// env is the environment of a pdc process on host: every staging
// variable is set, so that the test's own environment does not leak in.
func (sc *stageCluster) env(host string, extra ...string) []string {
	return append([]string{"PDC_TMPDIR=" + sc.tmpdir, "PDC_HOST=" + host,
		"PDC_STAGE_PRODUCER_DIR=", "PDC_STAGE_CONSUMER_DIR=", "PDC_STAGE_SHARED=", "PDC_DTL=",
		"PDC_STAGE_NAMESPACE=", "DYAD_KVS_NAMESPACE="}, extra...)
}

// produce runs pdc stage produce on node-a from its producer dir.
func (sc *stageCluster) produce(t *testing.T, paths ...string) string {
	t.Helper()
	r := e2e.Run(t, sc.env("node-a"), append([]string{"stage", "produce", "--producer-dir", sc.prodA}, paths...)...)
	if r.Err != nil {
		t.Fatalf("pdc stage produce %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(paths, " "), r.Err, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// consume runs pdc stage consume on host into dir and returns what it did.
func (sc *stageCluster) consume(t *testing.T, host, dir string, args ...string) e2e.Result {
	t.Helper()
	return e2e.Run(t, sc.env(host), append([]string{"stage", "consume", "--consumer-dir", dir}, args...)...)
}

// client connects in the test process as a consumer on host.
func (sc *stageCluster) client(t *testing.T, host, consumerDir string) *client.Client {
	t.Helper()
	return e2e.Connect(t, sc.tmpdir, client.WithHost(host), client.WithStageDirs(sc.prodA, consumerDir), client.WithSharedStorage(false))
}

// writeFile writes b to dir/rel, making its parent dirs.
func writeFile(t *testing.T, dir, rel string, b []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// sameFile fails the test unless dir/rel holds exactly want.
func sameFile(t *testing.T, dir, rel string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("consumed file %s: %v", rel, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("consumed file %s has %d bytes that differ from the %d produced", rel, len(got), len(want))
	}
}

// listFiles lists everything under dir but pdc's own .pdc-stage, relative
// and slash-separated; directories end in "/". A missing dir is empty.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return filepath.SkipAll
			}
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == ".pdc-stage" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// noTemp fails the test if dir holds a consume's temporary file.
func noTemp(t *testing.T, dir string) {
	t.Helper()
	for _, f := range listFiles(t, dir) {
		if strings.Contains(f, ".pdc-tmp-") {
			t.Errorf("temporary file %s left in the consumer dir %s", f, dir)
		}
	}
}

// bgStage is a pdc stage process running in the background, whose stderr
// is read as it comes so that the test can await its "waiting for" lines.
type bgStage struct {
	cmd     *exec.Cmd
	Stdout  bytes.Buffer
	Stderr  strings.Builder // read after done
	waiting chan string     // paths it said it waits for
	done    chan struct{}
	Err     error // set before done is closed
}

func startStage(t *testing.T, env []string, args ...string) *bgStage {
	t.Helper()
	cmd := exec.Command(e2e.CommandBin(t, "stage"), append([]string{"stage"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	p := &bgStage{cmd: cmd, waiting: make(chan string, 128), done: make(chan struct{})}
	cmd.Stdout = &p.Stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			p.Stderr.WriteString(line + "\n")
			if rest, ok := strings.CutPrefix(line, "pdc stage consume: waiting for "); ok {
				q, _, _ := strings.Cut(rest, " to be produced") // (a version newer than V) may follow
				if uq, err := strconv.Unquote(q); err == nil {
					q = uq // quoted: a path may hold any byte
				}
				p.waiting <- q
			}
		}
		p.Err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// awaitWaiting returns once the process has said it waits for each of
// paths; it fails the test if the process ends first.
func (p *bgStage) awaitWaiting(t *testing.T, paths ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, q := range paths {
		want[q] = true
	}
	bound := time.After(time.Minute) // only a bound on a hung test
	for len(want) > 0 {
		select {
		case q := <-p.waiting:
			if !want[q] {
				t.Fatalf("pdc %s: waiting for %q, which it was not asked for", strings.Join(p.cmd.Args[1:], " "), q)
			}
			delete(want, q)
		case <-p.done:
			t.Fatalf("pdc %s ended (%v) before it waited for %v:\nstdout:\n%s\nstderr:\n%s",
				strings.Join(p.cmd.Args[1:], " "), p.Err, want, p.Stdout.String(), p.Stderr.String())
		case <-bound:
			t.Fatalf("pdc %s never said it waits for %v", strings.Join(p.cmd.Args[1:], " "), want)
		}
	}
}

// wait waits for the process to end and returns what it did.
func (p *bgStage) wait(t *testing.T) e2e.Result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("pdc %s did not end", strings.Join(p.cmd.Args[1:], " "))
	}
	return e2e.Result{Stdout: p.Stdout.String(), Stderr: p.Stderr.String(), Err: p.Err}
}

// hasConsumed reports whether out says rel (version) was consumed to local
// and how: the text after the colon starts with how.
func hasConsumed(out, rel string, version uint64, local, how string) bool {
	head := fmt.Sprintf("consumed %s version %d (", rel, version)
	tail := ") -> " + local + ": " + how
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, head) && strings.Contains(l, tail) {
			return true
		}
	}
	return false
}

// moved is how a consumer on another host than the owner's gets a file of
// n bytes: in its record if it is small, else fetched from the owner.
func moved(n int) string {
	if n <= staging.InlineMax {
		return "inline"
	}
	return "fetched"
}

// realDir is dir with its symlinks resolved, as consume reports paths.
func realDir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Ten files of sizes from 0 bytes to 5 MiB, asked for by consumers on
// another host before they exist: each consumer says it waits, the
// producer writes and produces them, and every consumer ends with the
// producer's bytes.
func TestStageConsumersBeforeProducer(t *testing.T) {
	sc := stageUp(t)
	sizes := []int{0, 1, 3000, 4096, 64<<10 + 1, 200_000, 1<<20 + 3, 2 << 20, 3<<20 + 5, 5 << 20}
	paths := make([]string, len(sizes))
	data := map[string][]byte{}
	for i, n := range sizes {
		paths[i] = fmt.Sprintf("f%02d-%d.bin", i, n)
		if i%2 == 1 {
			paths[i] = "step1/out/" + paths[i] // nested: the consumer makes the dirs
		}
		data[paths[i]] = randBytes(uint64(i+1), n)
	}
	consB := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	consAll := realDir(t, filepath.Join(sc.base, "cons-node-b-all"))

	// One process per file, and one for all ten at once.
	var procs []*bgStage
	for _, p := range paths {
		proc := startStage(t, sc.env("node-b"), "consume", "--timeout", "2m", "--consumer-dir", consB, p)
		procs = append(procs, proc)
	}
	all := startStage(t, sc.env("node-b"), append([]string{"consume", "--timeout", "2m", "--parallel", "10", "--consumer-dir", consAll}, paths...)...)
	for i, proc := range procs {
		proc.awaitWaiting(t, paths[i])
	}
	all.awaitWaiting(t, paths...)
	if got := listFiles(t, consB); len(got) != 0 {
		t.Fatalf("the consumer dir holds %v before anything was produced", got)
	}

	for _, p := range paths {
		writeFile(t, sc.prodA, p, data[p])
	}
	out := sc.produce(t, paths...)
	for _, p := range paths {
		if !strings.Contains(out, "produced "+p+" version 1 ") || !strings.Contains(out, "on node-a") {
			t.Fatalf("produce did not report %s as version 1 on node-a:\n%s", p, out)
		}
	}

	for i, proc := range procs {
		r := proc.wait(t)
		if r.Err != nil {
			t.Fatalf("consumer of %s: %v\nstdout:\n%s\nstderr:\n%s", paths[i], r.Err, r.Stdout, r.Stderr)
		}
		if !hasConsumed(r.Stdout, paths[i], 1, filepath.Join(consB, paths[i]), moved(len(data[paths[i]]))) {
			t.Errorf("consumer of %s did not report version 1 %s:\n%s", paths[i], moved(len(data[paths[i]])), r.Stdout)
		}
		sameFile(t, consB, paths[i], data[paths[i]])
	}
	r := all.wait(t)
	if r.Err != nil {
		t.Fatalf("consumer of all ten: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	for _, p := range paths {
		if !hasConsumed(r.Stdout, p, 1, filepath.Join(consAll, p), moved(len(data[p]))) {
			t.Errorf("consumer of all ten did not report %s %s:\n%s", p, moved(len(data[p])), r.Stdout)
		}
		sameFile(t, consAll, p, data[p])
	}
	want := append([]string{"step1/", "step1/out/"}, paths...)
	slices.Sort(want)
	for _, d := range []string{consB, consAll} {
		if got := listFiles(t, d); !slices.Equal(got, want) {
			t.Errorf("consumer dir %s holds %v, want %v", d, got, want)
		}
	}
	// The producer's files are where they were.
	for _, p := range paths {
		sameFile(t, sc.prodA, p, data[p])
	}
}

// A consumer waiting for a file nobody produces gives up at its deadline
// with a message naming the file, and the server still serves waits,
// produces and consumes of that file afterwards.
func TestStageConsumeTimeout(t *testing.T) {
	sc := stageUp(t)
	consB := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	const never = "never/produced.dat"
	r := sc.consume(t, "node-b", consB, "--timeout", "1s", never)
	if r.Err == nil {
		t.Fatalf("consume of a file never produced succeeded:\n%s", r.Stdout)
	}
	var ee *exec.ExitError
	if !errors.As(r.Err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("consume timed out with %v, want exit status 1", r.Err)
	}
	if !strings.Contains(r.Stderr, "waiting for "+strconv.Quote(never)+" to be produced") {
		t.Errorf("consume did not say it waits for %s:\n%s", never, r.Stderr)
	}
	last := strings.TrimSpace(r.Stderr[strings.LastIndex(strings.TrimSpace(r.Stderr), "\n")+1:])
	// The client's deadline or the server's copy of it may end the wait
	// first: "not produced before the deadline" or "not produced in time:
	// pdc: deadline exceeded".
	if !strings.Contains(last, never) || !strings.Contains(last, "not produced") || !strings.Contains(last, "deadline") {
		t.Errorf("the error %q does not say that %s was not produced in time", last, never)
	}
	if got := listFiles(t, consB); len(got) != 0 {
		t.Errorf("a timed-out consume left %v in the consumer dir", got)
	}

	// Of several files, the one produced is consumed and the one not
	// produced fails alone, named.
	writeFile(t, sc.prodA, "there.dat", []byte("there\n"))
	sc.produce(t, "there.dat")
	r = sc.consume(t, "node-b", consB, "--timeout", "1s", "there.dat", never)
	if r.Err == nil || !hasConsumed(r.Stdout, "there.dat", 1, filepath.Join(consB, "there.dat"), "inline") ||
		!strings.Contains(r.Stderr, "1 of 2 files failed") || !strings.Contains(r.Stderr, "pdc: consume "+strconv.Quote(never)+": ") ||
		strings.Count(r.Stderr, "not produced") < 2 {
		t.Errorf("consume of a produced and a missing file: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, consB, "there.dat", []byte("there\n"))

	// The Go API says the same with pdc.ErrTimeout.
	c := sc.client(t, "node-b", consB)
	waited := false
	_, err := c.Consume(e2e.Ctx(t, time.Second), never, client.WithWaiting(func(string) { waited = true }))
	if !errors.Is(err, pdc.ErrTimeout) || !strings.Contains(err.Error(), never) || !waited {
		t.Fatalf("Consume past its deadline: got %v (waited %v), want ErrTimeout naming %s", err, waited, never)
	}
	if _, err := c.Lookup(e2e.Ctx(t, 10*time.Second), never); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("lookup of a file never produced: %v, want ErrNotFound", err)
	}

	// A waiting consumer interrupted (Ctrl-C) says it was canceled, not
	// that a deadline passed.
	proc := startStage(t, sc.env("node-b"), "consume", "--timeout", "1m", "--consumer-dir", consB, never)
	proc.awaitWaiting(t, never)
	if err := proc.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r = proc.wait(t)
	t.Logf("consume interrupted while waiting: %v: %s", r.Err, strings.TrimSpace(r.Stderr))
	last = strings.TrimSpace(r.Stderr[strings.LastIndex(strings.TrimSpace(r.Stderr), "\n")+1:])
	if r.Err == nil || !strings.Contains(last, never) || !strings.Contains(last, "canceled") || strings.Contains(last, "deadline") {
		t.Errorf("consume interrupted while waiting: %v, last line %q; want an error naming %s that says it was canceled", r.Err, last, never)
	}

	checkWaitAfterTimeouts(t, sc, consB, never)
}

// checkWaitAfterTimeouts: after consumes that timed out or were
// interrupted, the servers are alive and serve a new wait for the same
// path, which the produce ends.
func checkWaitAfterTimeouts(t *testing.T, sc *stageCluster, consB, never string) {
	t.Helper()
	list, err := cluster.ReadList(sc.tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Servers {
		if !e2e.Alive(s.PID) {
			t.Fatalf("%s died", s.Label())
		}
	}
	proc := startStage(t, sc.env("node-b"), "consume", "--timeout", "1m", "--consumer-dir", consB, never)
	proc.awaitWaiting(t, never)
	want := randBytes(7, 10_000)
	writeFile(t, sc.prodA, never, want)
	sc.produce(t, never)
	if r := proc.wait(t); r.Err != nil || !hasConsumed(r.Stdout, never, 1, filepath.Join(consB, never), "inline") {
		t.Fatalf("consume after a timed-out one: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, consB, never, want)
}

// Paths that leave the managed dirs, lexically or through a symlink, are
// refused by produce and consume with a clear error, and nothing is
// recorded or created outside.
func TestStagePathEscapes(t *testing.T) {
	sc := stageUp(t)
	outside := filepath.Join(sc.base, "outside")
	writeFile(t, outside, "secret.txt", []byte("not for consumers\n"))
	writeFile(t, outside, "existing", []byte("must stay as it is\n"))
	writeFile(t, sc.base, "x", []byte("next to the producer dir\n"))
	outsideBefore := listFiles(t, outside)

	checkProduceEscapes(t, sc, outside)
	consB := checkConsumeEscapes(t, sc, outside)
	consA := checkSwappedOwnerFile(t, sc, consB)
	checkNothingOutside(t, sc, outside, outsideBefore, consA, consB)
}

// checkProduceEscapes: produces of paths that leave the producer dir, by
// .., an absolute path or a symlink, are refused and record nothing.
func checkProduceEscapes(t *testing.T, sc *stageCluster, outside string) {
	t.Helper()
	if err := os.Symlink("/etc/passwd", filepath.Join(sc.prodA, "passwd-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(sc.prodA, "outdir")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, rel, want string
	}{
		{"../x", "", "leaves the managed dir"},
		{"sub/../../x", "", "leaves the managed dir"},
		{filepath.Join(outside, "secret.txt"), "", "outside the producer dir"},
		{"/etc/passwd", "", "outside the producer dir"},
		{"passwd-link", "passwd-link", "outside it (a symlink)"},
		{filepath.Join(sc.prodA, "passwd-link"), "passwd-link", "outside it (a symlink)"},
		{"outdir/secret.txt", "outdir/secret.txt", "outside it (a symlink)"},
		{".pdc-stage/x", "", "pdc keeps for itself"},
	} {
		r := e2e.Run(t, sc.env("node-a"), "stage", "produce", "--producer-dir", sc.prodA, tc.path)
		t.Logf("produce %s: %s", tc.path, strings.TrimSpace(r.Stderr))
		if r.Err == nil || !strings.Contains(r.Stderr, tc.want) || !strings.Contains(r.Stderr, "produce") {
			t.Errorf("produce %s: %v\nstdout:\n%s\nstderr:\n%s\nwant an error saying %q", tc.path, r.Err, r.Stdout, r.Stderr, tc.want)
		}
		if strings.Contains(r.Stdout, "produced") {
			t.Errorf("produce %s reported a record:\n%s", tc.path, r.Stdout)
		}
		if tc.rel != "" {
			if r := e2e.Run(t, sc.env("node-b"), "stage", "lookup", tc.rel); r.Err == nil || !strings.Contains(r.Stderr, "has not been produced") {
				t.Errorf("lookup %s after a refused produce: %v\n%s%s", tc.rel, r.Err, r.Stdout, r.Stderr)
			}
		}
	}
	pc := e2e.Connect(t, sc.tmpdir, client.WithHost("node-a"), client.WithStageDirs(sc.prodA, ""))
	for _, p := range []string{"../x", "/etc/passwd", "passwd-link", "outdir/secret.txt"} {
		if _, err := pc.Produce(e2e.Ctx(t, 10*time.Second), p); !errors.Is(err, pdc.ErrPermission) {
			t.Errorf("Produce(%s): %v, want ErrPermission", p, err)
		}
	}
}

// checkConsumeEscapes: legitimate files, produced, whose place in the
// consumer dir is a symlink out of it (or whose path leaves it) are
// refused without waiting. It returns node-b's consumer dir.
func checkConsumeEscapes(t *testing.T, sc *stageCluster, outside string) string {
	t.Helper()
	for _, p := range []string{"evil-link", "evil-link2", "evil-dir/f"} {
		writeFile(t, sc.prodA, p, []byte("produced "+p+"\n"))
	}
	// Too large to travel in its record: its consumers ask the owner,
	// which must refuse it once swapped (checkSwappedOwnerFile).
	writeFile(t, sc.prodA, "swap", randBytes(41, staging.InlineMax+1))
	sc.produce(t, "evil-link", "evil-link2", "evil-dir/f", "swap")
	consB := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	if err := os.Symlink(filepath.Join(outside, "dangling"), filepath.Join(consB, "evil-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "existing"), filepath.Join(consB, "evil-link2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(consB, "evil-dir")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"../x", "leaves the managed dir"},
		{"../cons-x", "leaves the managed dir"},
		{filepath.Join(outside, "abs-target"), "outside the consumer dir"},
		{"evil-link", "dangling symlink"},
		{"evil-link2", "outside it (a symlink)"},
		{"evil-dir/f", "outside it (a symlink)"},
	} {
		r := sc.consume(t, "node-b", consB, "--timeout", "20s", tc.path)
		t.Logf("consume %s: %s", tc.path, strings.TrimSpace(r.Stderr))
		if r.Err == nil || !strings.Contains(r.Stderr, tc.want) || !strings.Contains(r.Stderr, "consume") {
			t.Errorf("consume %s: %v\nstdout:\n%s\nstderr:\n%s\nwant an error saying %q", tc.path, r.Err, r.Stdout, r.Stderr, tc.want)
		}
		if strings.Contains(r.Stderr, "waiting for") {
			t.Errorf("consume %s waited instead of refusing the path:\n%s", tc.path, r.Stderr)
		}
	}
	cc := sc.client(t, "node-b", consB)
	for _, p := range []string{"../x", filepath.Join(outside, "abs-target"), "evil-link", "evil-link2", "evil-dir/f"} {
		if _, err := cc.Consume(e2e.Ctx(t, 10*time.Second), p); !errors.Is(err, pdc.ErrPermission) {
			t.Errorf("Consume(%s): %v, want ErrPermission", p, err)
		}
	}
	return consB
}

// checkSwappedOwnerFile: the owner's file, produced, then replaced by a
// symlink out of the producer dir: the owner refuses to serve it, and a
// consumer on its host refuses to link it. It returns node-a's consumer
// dir.
func checkSwappedOwnerFile(t *testing.T, sc *stageCluster, consB string) string {
	t.Helper()
	if err := os.Remove(filepath.Join(sc.prodA, "swap")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(sc.prodA, "swap")); err != nil {
		t.Fatal(err)
	}
	consA := realDir(t, filepath.Join(sc.base, "cons-node-a"))
	for _, host := range []struct{ name, dir string }{{"node-b", consB}, {"node-a", consA}} {
		r := sc.consume(t, host.name, host.dir, "--timeout", "20s", "swap")
		t.Logf("consume on %s of a swapped file: %s", host.name, strings.TrimSpace(r.Stderr))
		if r.Err == nil || !strings.Contains(r.Stderr, "swap") || !strings.Contains(r.Stderr, "/etc/passwd") || !strings.Contains(r.Stderr, "outside") {
			t.Errorf("consume on %s of a produced file swapped for a symlink out: %v\nstdout:\n%s\nstderr:\n%s", host.name, r.Err, r.Stdout, r.Stderr)
		}
		if _, err := os.Lstat(filepath.Join(host.dir, "swap")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("consume on %s of a swapped file left %s/swap: %v", host.name, host.dir, err)
		}
	}
	return consA
}

// checkNothingOutside: nothing was made or changed outside the dirs, and
// refused consumes left nothing in them.
func checkNothingOutside(t *testing.T, sc *stageCluster, outside string, outsideBefore []string, consA, consB string) {
	t.Helper()
	if got := listFiles(t, outside); !slices.Equal(got, outsideBefore) {
		t.Errorf("the dir outside holds %v, want %v", got, outsideBefore)
	}
	for _, p := range []string{filepath.Join(sc.base, "cons-x"), filepath.Join(outside, "dangling")} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after refused consumes: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "existing")); string(b) != "must stay as it is\n" {
		t.Errorf("a consume through a symlink overwrote the file outside: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(sc.base, "x")); string(b) != "next to the producer dir\n" {
		t.Errorf("the file next to the dirs changed: %q", b)
	}
	if got := listFiles(t, consA); len(got) != 0 {
		t.Errorf("refused consumes left %v in %s", got, consA)
	}
	if got := listFiles(t, consB); !slices.Equal(got, []string{"evil-dir", "evil-link", "evil-link2"}) {
		t.Errorf("refused consumes left %v in %s", got, consB)
	}
}

// produceVersion writes data to rel in node-a's producer dir and produces
// it with pdc stage produce, which must report version v.
func (sc *stageCluster) produceVersion(t *testing.T, rel string, data []byte, v int) {
	t.Helper()
	writeFile(t, sc.prodA, rel, data)
	if out := sc.produce(t, rel); !strings.Contains(out, fmt.Sprintf("produced %s version %d ", rel, v)) {
		t.Fatalf("produce of version %d:\n%s", v, out)
	}
}

// appendFile appends b to the file at path.
func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// A consumer holding the current version moves nothing; a re-produce
// makes it fetch the new version.
func TestStageReproduce(t *testing.T) {
	sc := stageUp(t)
	consB := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	c := sc.client(t, "node-b", consB)
	ctx := e2e.Ctx(t, time.Minute)
	const rel = "run/data.bin"
	local := filepath.Join(consB, rel)
	v1 := randBytes(1, 300_000)
	sc.produceVersion(t, rel, v1, 1)

	check := func(step string, version uint64, how client.How, moved int64, want []byte) {
		t.Helper()
		got, err := c.Consume(ctx, rel)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got.Version != version || got.How != how || got.Moved != moved || got.Local != local || got.Size != int64(len(want)) {
			t.Fatalf("%s: consumed version %d %s, %d bytes moved, to %s (size %d); want version %d %s, %d moved, to %s (size %d)",
				step, got.Version, got.How, got.Moved, got.Local, got.Size, version, how, moved, local, len(want))
		}
		sameFile(t, consB, rel, want)
	}
	check("first consume", 1, client.Fetched, int64(len(v1)), v1)
	check("second consume", 1, client.Cached, 0, v1)
	if r := sc.consume(t, "node-b", consB, rel); r.Err != nil || !hasConsumed(r.Stdout, rel, 1, local, "cached") {
		t.Fatalf("pdc stage consume of a current copy: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}

	// New bytes of the same size, not produced yet: the consumer's copy of
	// version 1 is still the current one.
	v2 := randBytes(2, len(v1))
	writeFile(t, sc.prodA, rel, v2)
	check("consume before the re-produce", 1, client.Cached, 0, v1)
	if out := sc.produce(t, rel); !strings.Contains(out, "produced "+rel+" version 2 ") {
		t.Fatalf("second produce:\n%s", out)
	}
	check("consume after the re-produce", 2, client.Fetched, int64(len(v2)), v2)
	check("consume again", 2, client.Cached, 0, v2)

	// A copy changed or removed in the consumer dir is no longer current:
	// the next consume fetches the version again.
	appendFile(t, local, []byte("scribble"))
	check("consume after the copy was changed", 2, client.Fetched, int64(len(v2)), v2)
	if err := os.Remove(local); err != nil {
		t.Fatal(err)
	}
	check("consume after the copy was removed", 2, client.Fetched, int64(len(v2)), v2)
	check("consume of the restored copy", 2, client.Cached, 0, v2)

	// A third version of another size, consumed by the CLI.
	v3 := append(v2[:1000:1000], randBytes(3, 5000)...)
	sc.produceVersion(t, rel, v3, 3)
	// Small enough to come in its record.
	if r := sc.consume(t, "node-b", consB, rel); r.Err != nil || !hasConsumed(r.Stdout, rel, 3, local, "inline") {
		t.Fatalf("pdc stage consume of version 3: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, consB, rel, v3)
	check("consume of version 3 again", 3, client.Cached, 0, v3)
	// Small again, same size: the copy of version 3, which came inline,
	// is not taken for version 4.
	v4 := randBytes(4, len(v3))
	sc.produceVersion(t, rel, v4, 4)
	check("consume of version 4", 4, client.Inline, int64(len(v4)), v4)
	check("consume of version 4 again", 4, client.Cached, 0, v4)
	if got := listFiles(t, consB); !slices.Equal(got, []string{"run/", rel}) {
		t.Errorf("the consumer dir holds %v", got)
	}
}

// The owner's server killed while a large file (256 MiB; 64 MiB under the
// race detector) moves from it by stream, pull or push: the consume fails
// within its deadline, as the owner being unavailable, and leaves no
// partial file.
func TestStageOwnerKilledMidTransfer(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.bin")
	size := int64(256 << 20)
	if e2e.Race {
		size = 64 << 20
	}
	{
		f, err := os.Create(big)
		if err != nil {
			t.Fatal(err)
		}
		chunk := randBytes(42, 1<<20)
		for i := int64(0); i < size>>20; i++ {
			chunk[0] = byte(i)
			if _, err := f.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []string{"stream", "pull", "push"} {
		t.Run(mode, func(t *testing.T) {
			sc := stageUp(t)
			if err := os.Link(big, filepath.Join(sc.prodA, "big.bin")); err != nil {
				t.Fatal(err)
			}
			sc.produce(t, "big.bin")
			list, err := cluster.ReadList(sc.tmpdir)
			if err != nil {
				t.Fatal(err)
			}
			owner := list.Servers[0]
			consB := realDir(t, filepath.Join(sc.base, "cons-node-b"))
			c := sc.client(t, "node-b", consB)

			var once sync.Once
			var first, total int64 = -1, -1
			var killErr error
			ctx := e2e.Ctx(t, time.Minute)
			got, err := c.Consume(ctx, "big.bin", client.WithTransport(mode), client.WithProgress(func(done, all int64) {
				once.Do(func() {
					first, total = done, all
					if killErr = syscall.Kill(owner.PID, syscall.SIGKILL); killErr == nil {
						killErr = cluster.WaitExit(e2e.Ctx(t, 20*time.Second), owner.PID)
					}
				})
			}))
			if killErr != nil {
				t.Fatalf("kill the owner %s: %v", owner.Label(), killErr)
			}
			if first < 0 {
				t.Fatalf("the fetch never reported progress (got %+v, %v)", got, err)
			}
			if first >= total || total != size {
				t.Fatalf("first progress %d of %d, want part of %d", first, total, size)
			}
			if err == nil {
				t.Fatalf("consume succeeded although its owner was killed after %d of %d bytes: %+v", first, total, got)
			}
			if ctx.Err() != nil {
				t.Fatalf("consume ran into its deadline instead of failing on the dead owner: %v", err)
			}
			t.Logf("consume from an owner killed after %d of %d bytes: %v", first, total, err)
			if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), owner.Label()) {
				t.Fatalf("consume from a killed owner: got %v, want ErrUnavailable naming %s", err, owner.Label())
			}
			if got := listFiles(t, consB); len(got) != 0 {
				t.Fatalf("the failed consume left %v in the consumer dir", got)
			}
		})
	}
}

// Two consumers of one file on one host, in one consumer dir, started
// before it is produced: both succeed with the same bytes, and only one of
// them moves them.
func TestStageTwoConsumersOneHost(t *testing.T) {
	sc := stageUp(t)
	consB := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	const rel = "shared/input.bin"
	var procs []*bgStage
	for range 2 {
		p := startStage(t, sc.env("node-b"), "consume", "--timeout", "1m", "--consumer-dir", consB, rel)
		procs = append(procs, p)
	}
	for _, p := range procs {
		p.awaitWaiting(t, rel)
	}
	want := randBytes(11, 8<<20+17)
	writeFile(t, sc.prodA, rel, want)
	sc.produce(t, rel)
	hows := map[string]int{}
	local := filepath.Join(consB, rel)
	for i, p := range procs {
		r := p.wait(t)
		if r.Err != nil {
			t.Fatalf("consumer %d: %v\nstdout:\n%s\nstderr:\n%s", i, r.Err, r.Stdout, r.Stderr)
		}
		switch {
		case hasConsumed(r.Stdout, rel, 1, local, "fetched"):
			hows["fetched"]++
		case hasConsumed(r.Stdout, rel, 1, local, "cached"):
			hows["cached"]++
		default:
			t.Fatalf("consumer %d reported neither a fetch nor a cached copy of %s version 1 at %s:\n%s", i, rel, local, r.Stdout)
		}
	}
	if hows["fetched"] != 1 || hows["cached"] != 1 {
		t.Fatalf("two consumers on one host: %v, want one fetch and one cached", hows)
	}
	sameFile(t, consB, rel, want)
	if got := listFiles(t, consB); !slices.Equal(got, []string{"shared/", rel}) {
		t.Errorf("the consumer dir holds %v", got)
	}
}

// A produced file changed at the owner (appended to, or rewritten with its
// size and modification time put back) or removed is refused, both by a
// consumer on another host (a fetch) and one on the owner's host (a reflink
// or copy), and nothing is left in the consumer dirs.
func TestStageChangedOrRemovedAtOwner(t *testing.T) {
	sc := stageUp(t)
	files := map[string][]byte{
		"appended.dat":  randBytes(21, 100_000),
		"rewritten.dat": randBytes(22, 100_000),
		"removed.dat":   randBytes(23, 100_000),
	}
	for p, b := range files {
		writeFile(t, sc.prodA, p, b)
	}
	sc.produce(t, "appended.dat", "rewritten.dat", "removed.dat")

	f, err := os.OpenFile(filepath.Join(sc.prodA, "appended.dat"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{'!'}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rw := filepath.Join(sc.prodA, "rewritten.dat")
	st, err := os.Stat(rw)
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.OpenFile(rw, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt([]byte("XXXX"), 5000); err != nil {
		t.Fatal(err)
	}
	g.Close()
	// Same inode, size and modification time: only the checksum tells.
	if err := os.Chtimes(rw, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(sc.prodA, "removed.dat")); err != nil {
		t.Fatal(err)
	}

	consA := realDir(t, filepath.Join(sc.base, "cons-node-a"))
	consB := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	for _, host := range []struct{ name, dir string }{{"node-b", consB}, {"node-a", consA}} {
		c := sc.client(t, host.name, host.dir)
		for _, tc := range []struct {
			path, want string
			is         error
		}{
			{"appended.dat", "changed", pdc.ErrChecksum},
			{"rewritten.dat", "changed", pdc.ErrChecksum},
			{"removed.dat", "removed", pdc.ErrNotFound},
		} {
			r := sc.consume(t, host.name, host.dir, "--timeout", "20s", tc.path)
			if r.Err == nil || !strings.Contains(r.Stderr, tc.path) || !strings.Contains(r.Stderr, tc.want) {
				t.Errorf("consume on %s of %s: %v\nstdout:\n%s\nstderr:\n%s\nwant an error naming it and saying %q",
					host.name, tc.path, r.Err, r.Stdout, r.Stderr, tc.want)
			}
			t.Logf("consume on %s of %s: %s", host.name, tc.path, strings.TrimSpace(r.Stderr))
			got, err := c.Consume(e2e.Ctx(t, 20*time.Second), tc.path)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Consume on %s of %s: got %+v, %v; want %v saying %q", host.name, tc.path, got, err, tc.is, tc.want)
			}
		}
		if got := listFiles(t, host.dir); len(got) != 0 {
			t.Errorf("refused consumes on %s left %v in %s", host.name, got, host.dir)
		}
	}

	checkProducedAgain(t, sc, consA, consB, append(files["appended.dat"], '!'))
}

// checkProducedAgain: produced again, the changed file (now appended) is
// served on both hosts; a consumer on the owner's host whose consumer dir
// is the producer dir finds it where it is; and a file consumed nowhere
// yet is used in place.
func checkProducedAgain(t *testing.T, sc *stageCluster, consA, consB string, appended []byte) {
	t.Helper()
	if out := sc.produce(t, "appended.dat"); !strings.Contains(out, "version 2") {
		t.Fatalf("re-produce:\n%s", out)
	}
	for _, host := range []struct{ name, dir, how string }{{"node-b", consB, "fetched"}, {"node-a", consA, "local"}} {
		r := sc.consume(t, host.name, host.dir, "appended.dat")
		local := filepath.Join(host.dir, "appended.dat")
		if r.Err != nil || !(hasConsumed(r.Stdout, "appended.dat", 2, local, host.how) ||
			host.how == "local" && consumedLocally(r.Stdout, "appended.dat", 2, local)) {
			t.Fatalf("consume on %s after the re-produce: %v\nstdout:\n%s\nstderr:\n%s", host.name, r.Err, r.Stdout, r.Stderr)
		}
		sameFile(t, host.dir, "appended.dat", appended)
	}
	// A consumer on the owner's host whose consumer dir is the producer
	// dir finds the file where it is. The copy above is a file of its own,
	// so the producer's file is used in place.
	r := e2e.Run(t, sc.env("node-a"), "stage", "consume", "--consumer-dir", sc.prodA, "appended.dat")
	if r.Err != nil || !hasConsumed(r.Stdout, "appended.dat", 2, filepath.Join(sc.prodA, "appended.dat"), "direct") {
		t.Fatalf("consume into the producer dir: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, sc.prodA, "appended.dat", appended)
	// A file consumed nowhere yet is used in place.
	fresh := []byte("used where it is")
	writeFile(t, sc.prodA, "fresh.dat", fresh)
	sc.produce(t, "fresh.dat")
	for _, how := range []string{"direct", "cached"} {
		r = e2e.Run(t, sc.env("node-a"), "stage", "consume", "--consumer-dir", sc.prodA, "fresh.dat")
		if r.Err != nil || !hasConsumed(r.Stdout, "fresh.dat", 1, filepath.Join(sc.prodA, "fresh.dat"), how) {
			t.Fatalf("consume of a fresh file into the producer dir (want %s): %v\nstdout:\n%s\nstderr:\n%s", how, r.Err, r.Stdout, r.Stderr)
		}
	}
	sameFile(t, sc.prodA, "fresh.dat", fresh)
}

// A consumer dir too small for the file: the consume fails saying so,
// leaves no partial file, and a small file still fits afterwards.
func TestStageConsumerDirFull(t *testing.T) {
	sc := stageUp(t)
	full := filepath.Join(sc.base, "cons-full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", full, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a 1 MiB tmpfs as the consumer dir (%v); this test needs CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(full, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", full, err)
		}
	})
	full = realDir(t, full)
	bigData, small := randBytes(31, 4<<20), randBytes(32, 10_000)
	writeFile(t, sc.prodA, "big.bin", bigData)
	writeFile(t, sc.prodA, "small.bin", small)
	sc.produce(t, "big.bin", "small.bin")

	// Fetched from another host, and copied on the owner's (a hard link
	// cannot cross into the tmpfs).
	for _, host := range []string{"node-b", "node-a"} {
		r := sc.consume(t, host, full, "--timeout", "20s", "big.bin")
		t.Logf("consume on %s into the full dir: %s", host, strings.TrimSpace(r.Stderr))
		if r.Err == nil || !strings.Contains(r.Stderr, "big.bin") || !strings.Contains(r.Stderr, "no space left on device") {
			t.Errorf("consume on %s of 4 MiB into 1 MiB: %v\nstdout:\n%s\nstderr:\n%s\nwant an error saying there is no space", host, r.Err, r.Stdout, r.Stderr)
		}
		if got := listFiles(t, full); len(got) != 0 {
			t.Fatalf("the failed consume on %s left %v in the full dir", host, got)
		}
	}
	r := sc.consume(t, "node-b", full, "small.bin")
	if r.Err != nil || !hasConsumed(r.Stdout, "small.bin", 1, filepath.Join(full, "small.bin"), "inline") {
		t.Fatalf("consume of a small file into the dir after a failed one: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, full, "small.bin", small)
	if got := listFiles(t, full); !slices.Equal(got, []string{"small.bin"}) {
		t.Errorf("the consumer dir holds %v", got)
	}
}

// Every DTL mode moves a file of a few MiB byte for byte; an unknown mode
// is refused naming the valid ones.
func TestStageEveryTransport(t *testing.T) {
	sc := stageUp(t)
	const rel = "modes/five.bin"
	want := randBytes(41, 5<<20+123)
	writeFile(t, sc.prodA, rel, want)
	sc.produce(t, rel)
	for _, mode := range []string{"stream", "pull", "push", "shm"} {
		dir := realDir(t, filepath.Join(sc.base, "cons-"+mode))
		r := sc.consume(t, "node-b", dir, "--mode", mode, rel)
		if r.Err != nil || !hasConsumed(r.Stdout, rel, 1, filepath.Join(dir, rel), "fetched 5.0MiB from rank 0") ||
			!strings.Contains(r.Stdout, " by "+mode+" in ") {
			t.Errorf("consume by %s: %v\nstdout:\n%s\nstderr:\n%s", mode, r.Err, r.Stdout, r.Stderr)
			continue
		}
		sameFile(t, dir, rel, want)
		noTemp(t, dir)
	}
	// $PDC_DTL picks the mode when --mode does not.
	dir := realDir(t, filepath.Join(sc.base, "cons-env"))
	r := e2e.Run(t, sc.env("node-b", "PDC_DTL=push"), "stage", "consume", "--consumer-dir", dir, rel)
	if r.Err != nil || !strings.Contains(r.Stdout, " by push in ") {
		t.Errorf("consume with PDC_DTL=push: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	} else {
		sameFile(t, dir, rel, want)
	}
	// On shared storage a consumer on another host reflinks or copies
	// the owner's file instead of fetching it.
	dir = realDir(t, filepath.Join(sc.base, "cons-shared"))
	r = e2e.Run(t, sc.env("node-b", "PDC_STAGE_SHARED=1"), "stage", "consume", "--consumer-dir", dir, rel)
	if r.Err != nil || !consumedLocally(r.Stdout, rel, 1, filepath.Join(dir, rel)) {
		t.Errorf("consume from shared storage: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	} else {
		sameFile(t, dir, rel, want)
	}
	dir = realDir(t, filepath.Join(sc.base, "cons-bad"))
	r = sc.consume(t, "node-b", dir, "--mode", "carrier-pigeon", rel)
	if r.Err == nil || !strings.Contains(r.Stderr, "carrier-pigeon") || !strings.Contains(r.Stderr, "stream") {
		t.Errorf("consume by an unknown mode: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	if got := listFiles(t, dir); len(got) != 0 {
		t.Errorf("a consume by an unknown mode left %v", got)
	}
	c := sc.client(t, "node-b", dir)
	if _, err := c.Consume(e2e.Ctx(t, 10*time.Second), rel, client.WithTransport("carrier-pigeon")); !errors.Is(err, pdc.ErrInvalid) ||
		!strings.Contains(err.Error(), "carrier-pigeon") {
		t.Errorf("Consume by an unknown mode: %v, want ErrInvalid naming it", err)
	}
}

// recordsBeforeKill looks up every path's record from node-b and checks
// it: version 2 for the first three (produced twice), 1 for the others,
// owned by rank 0 on node-a.
func recordsBeforeKill(t *testing.T, sc *stageCluster, paths []string, data map[string][]byte) map[string]client.StagedFile {
	t.Helper()
	c := sc.client(t, "node-b", "")
	defer c.Close()
	before := map[string]client.StagedFile{}
	for i, p := range paths {
		r, err := c.Lookup(e2e.Ctx(t, 10*time.Second), p)
		if err != nil {
			t.Fatal(err)
		}
		before[p] = r
		want := uint64(1)
		if i < 3 {
			want = 2
		}
		if r.Version != want || r.Host != "node-a" || r.Owner.Rank != 0 || r.Size != int64(len(data[p])) {
			t.Fatalf("record of %s: %+v; want version %d owned by rank 0 on node-a", p, r, want)
		}
	}
	return before
}

// checkRecordsAfterRestart checks that every record reads back as before
// the kill, and that every file is consumed into consB whole: small ones
// from their records, the others fetched.
func checkRecordsAfterRestart(t *testing.T, sc *stageCluster, consB string, paths []string, data map[string][]byte, before map[string]client.StagedFile) {
	t.Helper()
	c := sc.client(t, "node-b", consB)
	ctx := e2e.Ctx(t, time.Minute)
	for _, p := range paths {
		r, err := c.Lookup(ctx, p)
		if err != nil {
			t.Fatalf("lookup %s after the restart: %v", p, err)
		}
		b := before[p]
		if r.Version != b.Version || r.CRC != b.CRC || r.Size != b.Size || r.Host != b.Host || r.Owner.Rank != b.Owner.Rank ||
			!r.Produced.Equal(b.Produced) || !r.ModTime.Equal(b.ModTime) {
			t.Fatalf("record of %s after the restart: %+v, before: %+v", p, r, b)
		}
	}
	out := e2e.MustRun(t, "stage", "lookup", "--tmpdir", sc.tmpdir, "a.dat", "e.dat")
	if !strings.Contains(out, "a.dat") || !regexpLine(out, "a.dat", "2") || !regexpLine(out, "e.dat", "1") {
		t.Fatalf("pdc stage lookup after the restart:\n%s", out)
	}
	for _, p := range paths {
		got, err := c.Consume(ctx, p)
		if err != nil {
			t.Fatalf("consume %s after the restart: %v", p, err)
		}
		how := client.Fetched
		if len(data[p]) <= staging.InlineMax {
			how = client.Inline
		}
		if got.How != how || got.Version != before[p].Version {
			t.Fatalf("consume %s after the restart: %+v; want %s", p, got, how)
		}
		sameFile(t, consB, p, data[p])
	}
}

// Records of produced files survive kill -9 of every server and a
// restart: the same versions are found, the files are consumed, and the
// next produce continues the versions.
func TestStageRecordsSurviveRestart(t *testing.T) {
	sc := stageUp(t)
	datadir := e2e.ServerDataDir(t, sc.tmpdir)
	paths := []string{"a.dat", "b.dat", "c/d.dat", "e.dat", "f.dat", "g/h/i.dat"}
	data := map[string][]byte{}
	for i, p := range paths {
		// Every other file small enough to travel in its record: its
		// bytes must survive in the metadata store too.
		n := 1000 * (i + 1)
		if i%2 == 1 {
			n += staging.InlineMax
		}
		data[p] = randBytes(uint64(100+i), n)
		writeFile(t, sc.prodA, p, data[p])
	}
	sc.produce(t, paths...)
	// Some files twice: version 2.
	sc.produce(t, paths[:3]...)
	before := recordsBeforeKill(t, sc, paths, data)

	// A consumer waiting when the servers die must not hang.
	consB := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	waiter := startStage(t, sc.env("node-b"), "consume", "--timeout", "1m", "--consumer-dir", consB, "late.dat")
	waiter.awaitWaiting(t, "late.dat")

	e2e.KillAll(t, sc.tmpdir)
	r := waiter.wait(t)
	t.Logf("a consumer waiting while the servers were killed: %v: %s", r.Err, strings.TrimSpace(r.Stderr))
	if last := strings.TrimSpace(r.Stderr[strings.LastIndex(strings.TrimSpace(r.Stderr), "\n")+1:]); r.Err == nil ||
		!strings.Contains(last, `consume "late.dat"`) || !strings.Contains(last, "unavailable") || strings.Contains(last, "deadline") {
		t.Errorf("a consumer waiting while the servers were killed: %v\nstdout:\n%s\nstderr:\n%s\nwant an error naming the file, before its deadline",
			r.Err, r.Stdout, r.Stderr)
	}
	e2e.MustRun(t, append([]string{"up", "-n", "2", "--tmpdir", sc.tmpdir, "--datadir", datadir}, sc.upArgs...)...)

	checkRecordsAfterRestart(t, sc, consB, paths, data, before)
	if out := sc.produce(t, "a.dat", "e.dat"); !strings.Contains(out, "produced a.dat version 3 ") || !strings.Contains(out, "produced e.dat version 2 ") {
		t.Fatalf("produce after the restart does not continue the versions:\n%s", out)
	}
}

// regexpLine reports whether out has a line whose first field is path and
// second version.
func regexpLine(out, path, version string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == path && f[1] == version {
			return true
		}
	}
	return false
}

// The server on node-b, owner of files produced there and metadata server
// of some of their records, killed with -9 and restarted in place: while
// it is down its files are unavailable, and once it is back a client that
// was connected all along finds the same records and fetches the files
// from the server's new address.
func TestStageOwnerRestartedInPlace(t *testing.T) {
	sc := stageUp(t)
	datadir := e2e.ServerDataDir(t, sc.tmpdir)
	paths := []string{"a.dat", "b.dat", "c.dat", "d.dat", "e.dat", "f.dat"}
	data := map[string][]byte{}
	for i, p := range paths {
		data[p] = randBytes(uint64(200+i), 70_000+i)
		writeFile(t, sc.prodB, p, data[p])
	}
	r := e2e.Run(t, sc.env("node-b"), append([]string{"stage", "produce", "--producer-dir", sc.prodB}, paths...)...)
	if r.Err != nil || strings.Count(r.Stdout, "version 1 ") != len(paths) || !strings.Contains(r.Stdout, "on node-b") {
		t.Fatalf("produce on node-b: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	consA := realDir(t, filepath.Join(sc.base, "cons-node-a"))
	c := e2e.Connect(t, sc.tmpdir, client.WithHost("node-a"), client.WithStageDirs("", consA))
	ctx := e2e.Ctx(t, time.Minute)
	before := map[string]client.StagedFile{}
	for _, p := range paths {
		rec, err := c.Lookup(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Owner.Rank != 1 || rec.Host != "node-b" || rec.Version != 1 {
			t.Fatalf("record of %s: %+v; want version 1 owned by rank 1 on node-b", p, rec)
		}
		before[p] = rec
	}
	// Consume one now, so that the client holds pooled connections to the
	// server about to die.
	if got, err := c.Consume(ctx, paths[0]); err != nil || got.How != client.Fetched {
		t.Fatalf("consume before the kill: %+v, %v", got, err)
	}

	list, err := cluster.ReadList(sc.tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	victim := list.Servers[1]
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim.PID); err != nil {
		t.Fatal(err)
	}
	checkOwnerDown(t, sc, consA, paths)
	restartInPlace(t, ctx, sc, datadir)
	checkOwnerBack(t, ctx, sc, c, consA, paths, data, before, victim.Addr)
}

// checkOwnerDown: with rank 1 down, the records it holds cannot be looked
// up and no file it owns can be consumed: both fail as unavailable, naming
// it, and leave nothing behind.
func checkOwnerDown(t *testing.T, sc *stageCluster, consA string, paths []string) {
	t.Helper()
	held := 0
	probe := e2e.Connect(t, sc.tmpdir, client.WithHost("node-a"), client.WithStageDirs("", consA))
	for _, p := range paths[1:] {
		got, err := probe.Consume(e2e.Ctx(t, 20*time.Second), p)
		if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "rank 1") {
			t.Fatalf("consume %s with its owner down: %+v, %v; want ErrUnavailable naming rank 1", p, got, err)
		}
		if _, err := probe.Lookup(e2e.Ctx(t, 20*time.Second), p); err != nil {
			if !errors.Is(err, pdc.ErrUnavailable) {
				t.Fatalf("lookup %s with rank 1 down: %v", p, err)
			}
			held++
		}
	}
	if held == 0 || held == len(paths)-1 {
		t.Fatalf("rank 1 holds %d of the %d records; pick names spread over both metadata servers", held, len(paths)-1)
	}
	if got := listFiles(t, consA); !slices.Equal(got, []string{paths[0]}) {
		t.Fatalf("failed consumes left %v", got)
	}
}

// restartInPlace restarts rank 1 with its data dir and waits until it
// serves; the test's cleanup kills it.
func restartInPlace(t *testing.T, ctx context.Context, sc *stageCluster, datadir string) {
	t.Helper()
	restarted := exec.Command(e2e.Bin(), "server", "--rank", "1", "--size", "2", "--tmpdir", sc.tmpdir, "--datadir", datadir,
		"--host", "node-b", "--stage-producer-dir", sc.prodB)
	logs, err := restarted.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	restarted.Stdout = restarted.Stderr
	if err := restarted.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	serving := make(chan struct{})
	go func(serving chan struct{}) {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			if serving != nil && strings.Contains(sc.Text(), "serving") {
				close(serving)
				serving = nil
			}
		}
		_ = restarted.Wait()
		close(exited)
	}(serving)
	t.Cleanup(func() {
		_ = restarted.Process.Kill()
		<-exited
	})
	select {
	case <-serving:
	case <-exited:
		t.Fatal("the restarted server exited")
	case <-ctx.Done():
		t.Fatal("the restarted server never said it was serving")
	}
}

// checkOwnerBack: the client connected before the kill finds every record
// as it was and fetches each file from the restarted owner, not from the
// dead server's address; a produce then makes version 2.
func checkOwnerBack(t *testing.T, ctx context.Context, sc *stageCluster, c *client.Client, consA string, paths []string, data map[string][]byte, before map[string]client.StagedFile, deadAddr string) {
	t.Helper()
	for _, p := range paths {
		rec, err := c.Lookup(ctx, p)
		if err != nil {
			t.Fatalf("lookup %s after the restart: %v", p, err)
		}
		b := before[p]
		if rec.Version != b.Version || rec.CRC != b.CRC || rec.Size != b.Size || rec.Owner.Rank != 1 || !rec.Produced.Equal(b.Produced) {
			t.Fatalf("record of %s after the restart: %+v, before: %+v", p, rec, b)
		}
		got, err := c.Consume(ctx, p)
		if err != nil {
			t.Fatalf("consume %s after the restart: %v", p, err)
		}
		want := client.Fetched
		if p == paths[0] {
			want = client.Cached
		}
		if got.How != want || got.Version != 1 {
			t.Fatalf("consume %s after the restart: %s version %d, want %s version 1", p, got.How, got.Version, want)
		}
		if want == client.Fetched && got.Owner.Addr == deadAddr {
			t.Errorf("consume %s fetched from the dead server's address %s", p, deadAddr)
		}
		sameFile(t, consA, p, data[p])
	}
	r := e2e.Run(t, sc.env("node-b"), "stage", "produce", "--producer-dir", sc.prodB, paths[1])
	if r.Err != nil || !strings.Contains(r.Stdout, "produced "+paths[1]+" version 2 ") {
		t.Fatalf("produce after the restart: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
}

// stageStallRole consumes $PDC_E2E_PATH by stream (host and dirs from the
// environment), says "progress DONE TOTAL" once the first bytes arrive
// and then stalls inside the fetch until it is killed.
func stageStallRole(ctx context.Context, c *client.Client, out *bufio.Writer) error {
	_, err := c.Consume(ctx, os.Getenv("PDC_E2E_PATH"), client.WithTransport("stream"), client.WithProgress(func(done, total int64) {
		fmt.Fprintf(out, "progress %d %d\n", done, total)
		out.Flush()
		<-ctx.Done()
	}))
	return err
}

// A consumer killed in the middle of a fetch leaves its temporary file
// behind; the next consume of that file on the host fetches it whole and
// clears the leftover away.
func TestStageConsumerKilledMidTransfer(t *testing.T) {
	sc := stageUp(t)
	want := randBytes(51, 32<<20)
	writeFile(t, sc.prodA, "big.bin", want)
	sc.produce(t, "big.bin")
	consB := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	cmd, out, _ := e2e.ClientProc(t, sc.tmpdir, "stage-stall", "PDC_HOST=node-b", "PDC_STAGE_CONSUMER_DIR="+consB,
		"PDC_STAGE_PRODUCER_DIR=", "PDC_STAGE_SHARED=", "PDC_DTL=", "PDC_E2E_PATH=big.bin")
	if !out.Scan() || !strings.HasPrefix(out.Text(), "progress ") {
		t.Fatalf("the stalling consumer said %q (%v), not its progress", out.Text(), out.Err())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	left := listFiles(t, consB)
	if len(left) != 1 || !strings.HasPrefix(left[0], ".big.bin.pdc-tmp-") {
		t.Fatalf("the killed consumer left %v; want its temporary file", left)
	}

	r := sc.consume(t, "node-b", consB, "big.bin")
	if r.Err != nil || !hasConsumed(r.Stdout, "big.bin", 1, filepath.Join(consB, "big.bin"), "fetched") {
		t.Fatalf("consume after a consumer was killed mid-fetch: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, consB, "big.bin", want)
	if got := listFiles(t, consB); !slices.Equal(got, []string{"big.bin"}) {
		t.Fatalf("the consumer dir holds %v after the next consume; want only big.bin", got)
	}
}

// One produce naming a file twice (as the same path or two spellings of
// it) records it like two produces: it must not wait on its own lock on
// the file until its deadline.
func TestStageProduceSameFileTwice(t *testing.T) {
	sc := stageUp(t)
	writeFile(t, sc.prodA, "twice.dat", randBytes(7, 5000))
	pc := e2e.Connect(t, sc.tmpdir, client.WithHost("node-a"), client.WithStageDirs(sc.prodA, ""))
	ctx := e2e.Ctx(t, 20*time.Second)
	recs, err := pc.Produce(ctx, "twice.dat", "./twice.dat", filepath.Join(sc.prodA, "twice.dat"))
	if err != nil {
		t.Fatalf("produce of one file named three times: %v", err)
	}
	if len(recs) != 3 {
		t.Fatalf("produce of one file named three times: %d records, want 3", len(recs))
	}
	for i, r := range recs {
		if r.Path != "twice.dat" || r.Version != uint64(i+1) || r.Size != 5000 {
			t.Errorf("record %d: %+v, want twice.dat version %d of 5000 bytes", i, r, i+1)
		}
	}
	if r, err := pc.Lookup(ctx, "twice.dat"); err != nil || r.Version != 3 {
		t.Errorf("lookup after the produce: %+v, %v; want version 3", r, err)
	}
}
