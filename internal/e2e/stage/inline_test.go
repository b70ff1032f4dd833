package stage_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// Consumers of one small file on one host, racing its re-produces: every
// consume gets a whole version (its bytes name it), and the copy never
// goes back to an older version than one it has held, although consumes
// that looked the file up before a re-produce install after those that
// looked it up after (their inline bytes must not replace the newer copy).
func TestStageSmallFileConsumersRaceReproduce(t *testing.T) {
	sc := stageUp(t)
	consB := realDir(t, filepath.Join(sc.base, "cons-node-b"))
	const rel = "racy.dat"
	prod := e2e.Connect(t, sc.tmpdir, client.WithHost("node-a"), client.WithStageDirs(sc.prodA, ""))
	ctx := e2e.Ctx(t, 2*time.Minute)
	writeFile(t, sc.prodA, rel, racyBody(1))
	if _, err := prod.Produce(ctx, rel); err != nil {
		t.Fatal(err)
	}
	const produces = 60
	stop := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for i := range 3 {
		c := sc.client(t, "node-b", consB)
		wg.Go(func() { consumeUntil(ctx, c, rel, i, stop, errs) })
	}
	wg.Go(func() { watchVersions(filepath.Join(consB, rel), stop, errs) })
	for v := 2; v <= produces; v++ {
		writeFile(t, sc.prodA, rel, racyBody(v))
		if _, err := prod.Produce(ctx, rel); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c := sc.client(t, "node-b", consB)
	got, err := c.Consume(ctx, rel)
	if err != nil || got.Version != produces {
		t.Fatalf("the last consume: %+v, %v; want version %d", got, err, produces)
	}
	sameFile(t, consB, rel, racyBody(produces))
	noTemp(t, consB)
}

// racyBody is version v of the re-produced file: it names its version.
func racyBody(v int) []byte {
	return fmt.Appendf(nil, "version %06d\n%s", v, strings.Repeat("x", 500+v%7))
}

// racyVersion is the version a racyBody names, -1 if none.
func racyVersion(b []byte) int {
	var v int
	if _, err := fmt.Sscanf(string(b), "version %d\n", &v); err != nil {
		return -1
	}
	return v
}

// consumeUntil is consumer i: it consumes rel until stop, sending to errs
// (and stopping) if a consume fails or its copy then holds an older
// version than the consume reported.
func consumeUntil(ctx context.Context, c *client.Client, rel string, i int, stop <-chan struct{}, errs chan<- error) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		got, err := c.Consume(ctx, rel)
		if err != nil {
			errs <- fmt.Errorf("consumer %d: %w", i, err)
			return
		}
		b, err := os.ReadFile(got.Local)
		if err != nil || racyVersion(b) < int(got.Version) {
			errs <- fmt.Errorf("consumer %d got version %d; its copy then holds version %d (%v)", i, got.Version, racyVersion(b), err)
			return
		}
	}
}

// watchVersions reads the copy at path until stop: its version, read as it
// changes, never goes down, and it is always a whole version.
func watchVersions(path string, stop <-chan struct{}, errs chan<- error) {
	last := 0
	for {
		select {
		case <-stop:
			return
		default:
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue // not consumed yet
		}
		v := racyVersion(b)
		if v < last || !bytes.Equal(b, racyBody(v)) {
			errs <- fmt.Errorf("the copy went from version %d to %d (%d bytes)", last, v, len(b))
			return
		}
		last = v
	}
}
