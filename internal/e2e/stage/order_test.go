package stage_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// pdc stage consume --parallel 2 of eight files takes them in the order
// given: it waits for the first two, and each file produced in that order
// arrives (and frees a slot for the next) before the later ones exist.
func TestStageConsumeParallelInOrder(t *testing.T) {
	sc := stageUp(t)
	cons := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	paths := make([]string, 8)
	for i := range paths {
		paths[i] = fmt.Sprintf("step%d.dat", i)
	}
	proc := startStage(t, sc.env("node-b"), append([]string{"consume", "--timeout", "2m", "--parallel", "2", "--consumer-dir", cons}, paths...)...)
	proc.awaitWaiting(t, paths[0], paths[1])
	for i, p := range paths {
		b := randBytes(uint64(100+i), 1000+i)
		writeFile(t, sc.prodA, p, b)
		sc.produce(t, p)
		if i+2 < len(paths) {
			// The slot p held goes to the next file in line, which is
			// not produced yet: p has arrived.
			proc.awaitWaiting(t, paths[i+2])
			sameFile(t, cons, p, b)
		}
	}
	r := proc.wait(t)
	if r.Err != nil {
		t.Fatalf("consume: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	for i, p := range paths {
		if !hasConsumed(r.Stdout, p, 1, filepath.Join(cons, p), "inline") {
			t.Errorf("consume did not report %s as come in its record (inline):\n%s", p, r.Stdout)
		}
		sameFile(t, cons, p, randBytes(uint64(100+i), 1000+i))
	}
}

// --timeout 0 and --timeout inf wait for the producer without a
// deadline; -h says so; a negative timeout is refused.
func TestStageConsumeNoTimeout(t *testing.T) {
	sc := stageUp(t)
	cons := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	for _, tm := range []string{"0", "inf"} {
		rel := "late-" + tm + ".dat"
		proc := startStage(t, sc.env("node-b"), "consume", "--timeout", tm, "--consumer-dir", cons, rel)
		proc.awaitWaiting(t, rel)
		b := randBytes(7, 3000)
		writeFile(t, sc.prodA, rel, b)
		sc.produce(t, rel)
		r := proc.wait(t)
		if r.Err != nil || !hasConsumed(r.Stdout, rel, 1, filepath.Join(cons, rel), "inline") {
			t.Fatalf("consume --timeout %s: %v\nstdout:\n%s\nstderr:\n%s", tm, r.Err, r.Stdout, r.Stderr)
		}
		sameFile(t, cons, rel, b)
	}
	r := sc.consume(t, "node-b", cons, "-h")
	if !strings.Contains(r.Stdout+r.Stderr, "0 or inf: wait without limit") {
		t.Errorf("pdc stage consume -h does not say how to wait without limit:\n%s%s", r.Stdout, r.Stderr)
	}
	r = sc.consume(t, "node-b", cons, "--timeout", "-1s", "x.dat")
	if r.Err == nil || !strings.Contains(r.Stderr, "negative") {
		t.Errorf("consume --timeout -1s: %v\n%s", r.Err, r.Stderr)
	}
}
