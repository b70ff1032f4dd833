package bench_test

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/bed"
	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/internal/e2e"
)

// pdc bench hosts builds its own bed, starts a server per node and
// measures io, vpic and stage from another node, unshaped and through a
// tbf limit: every case it runs reports a figure and a raw TCP ceiling
// measured across the same link.
func TestBenchHosts(t *testing.T) {
	if err := bed.Available(); err != nil {
		if os.Getenv(bed.RequiredEnv) == "1" {
			t.Fatalf("%v (and $%s=1)", err, bed.RequiredEnv)
		}
		t.Skip(err)
	}
	// What the run reports is under test, not the servers' concurrency
	// (internal/e2e/hosts runs them race-built across the bed): without the race
	// detector it costs a fraction of the CPU.
	args := []string{"bench", "hosts", "--json", "--servers", "2", "--limits", "none,200mbit",
		"--size", "16MiB", "--rounds", "1", "--partitions", "region-dynamic", "--procs", "2", "--n", "16384",
		"--stage-sizes", "1KiB,4MiB", "--budget", "1ms"}
	r := e2e.RunBin(t, e2e.PlainBin(t), nil, args...)
	if r.Err != nil {
		t.Fatalf("pdc %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Err, r.Stdout, r.Stderr)
	}
	out := r.Stdout
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r bench.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if r.Value <= 0 || r.CeilingValue <= 0 {
			t.Errorf("%s: %s: value %v, ceiling %v", r.Bench, r.Case, r.Value, r.CeilingValue)
		}
		if strings.HasPrefix(r.Bench, "stage") && strings.Contains(r.Case, "by shm") {
			t.Errorf("%s: %s: shm between hosts", r.Bench, r.Case)
		}
		seen[r.Bench]++
	}
	for _, b := range []string{"io", "vpic", "stage"} {
		for _, l := range []string{"unshaped", "200mbit"} {
			if k := b + " (hosts, " + l + ")"; seen[k] == 0 {
				t.Errorf("no results for %s; got %v", k, seen)
			}
		}
	}
}
