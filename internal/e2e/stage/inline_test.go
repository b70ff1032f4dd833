package stage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/staging"
)

// A file small enough to travel in its record (empty ones too) is written
// by a consumer on another host from the lookup's answer, or from the
// answer to its wait, without asking the owner: removed from the producer
// dir after its produce, it is still consumed as produced. Produced again,
// the new version's bytes come, never the old ones.
func TestStageSmallFilesComeInTheirRecord(t *testing.T) {
	sc := stageUp(t)
	consB := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	files := map[string][]byte{
		"small.dat":     randBytes(51, 1<<10),
		"empty.dat":     {},
		"largest.dat":   randBytes(52, staging.InlineMax),
		"d/e/small.dat": randBytes(53, 100),
	}
	var paths []string
	for p, b := range files {
		writeFile(t, sc.prodA, p, b)
		paths = append(paths, p)
	}
	late := startStage(t, sc.env("node-b"), "consume", "--timeout", "1m", "--consumer-dir", consB, "late.dat")
	late.awaitWaiting(t, "late.dat")
	sc.produce(t, paths...)
	// The owner would refuse them now ("removed"): they must not be asked
	// for.
	for _, p := range paths {
		if err := os.Remove(filepath.Join(sc.prodA, p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range paths {
		r := sc.consume(t, "node-b", consB, "--timeout", "20s", p)
		if r.Err != nil || !hasConsumed(r.Stdout, p, 1, filepath.Join(consB, p), "inline") {
			t.Fatalf("consume of %s, removed at the owner after its produce: %v\nstdout:\n%s\nstderr:\n%s", p, r.Err, r.Stdout, r.Stderr)
		}
		sameFile(t, consB, p, files[p])
	}
	noTemp(t, consB)

	lateData := randBytes(54, 3000)
	writeFile(t, sc.prodA, "late.dat", lateData)
	sc.produce(t, "late.dat")
	if r := late.wait(t); r.Err != nil || !hasConsumed(r.Stdout, "late.dat", 1, filepath.Join(consB, "late.dat"), "inline") {
		t.Fatalf("a consumer waiting for a small file: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, consB, "late.dat", lateData)

	// Produced again, same size: version 2's bytes, inline.
	c := sc.client(t, "node-b", consB)
	ctx := e2e.Ctx(t, time.Minute)
	for i := range 3 {
		next := randBytes(uint64(60+i), len(lateData))
		writeFile(t, sc.prodA, "late.dat", next)
		if out := sc.produce(t, "late.dat"); !strings.Contains(out, fmt.Sprintf("late.dat version %d ", 2+i)) {
			t.Fatalf("produce again:\n%s", out)
		}
		got, err := c.Consume(ctx, "late.dat")
		if err != nil || got.How != client.Inline || got.Version != uint64(2+i) || got.Moved != int64(len(next)) {
			t.Fatalf("consume after produce %d: %+v, %v; want version %d inline", i+2, got, err, i+2)
		}
		sameFile(t, consB, "late.dat", next)
	}
	noTemp(t, consB)
}
