package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/internal/cli"
	"github.com/pdcgo/pdc/internal/e2e"
)

// pdc bench all --quick runs every benchmark in rounds and writes one
// report with every target case's median and range; bench compare reads
// it; --cpuprofile leaves a CPU profile of the benchmark process and of
// every server.
func TestBenchAllQuick(t *testing.T) {
	dir := t.TempDir()
	report, profs := filepath.Join(dir, "report.json"), filepath.Join(dir, "prof")
	// The report's plumbing is under test, not the servers' concurrency
	// (every other e2e test runs them race-built): race-built, the 15
	// clusters of bench all cost several times the CPU.
	pdcBin := e2e.PlainBin(t)
	run := func(args ...string) (string, string) {
		t.Helper()
		return runPlainPdc(t, pdcBin, args...)
	}
	_, stderr := run("bench", "all", "--quick", "--rounds", "2", "--out", report, "--cpuprofile", profs)
	for _, w := range []string{"bench all: 8 benchmarks, 2 rounds each; before: load ", "cores", "after: load "} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if strings.Contains(stderr, "no case matches target") {
		t.Errorf("bench all missed target cases:\n%s", stderr)
	}

	checkBenchReport(t, report)
	// Every case carries median, min and max in the file itself.
	checkReportFields(t, report)

	// A report compared with itself: nothing moved.
	out, _ := run("bench", "compare", report, report)
	if !strings.Contains(out, "same within noise") || strings.Contains(out, "faster") || strings.Contains(out, "slower") || strings.Contains(out, "only in") {
		t.Errorf("compare of a report with itself:\n%s", out)
	}
	if !strings.Contains(out, "rpc: 64B sequential p50") {
		t.Errorf("compare lacks the rpc case:\n%s", out)
	}

	// Profiles: the benchmark process's and every server's, gzipped.
	checkBenchProfiles(t, profs)
}

// runPlainPdc runs pdcBin with args and returns its stdout and stderr,
// failing the test if it fails.
func runPlainPdc(t *testing.T, pdcBin string, args ...string) (string, string) {
	t.Helper()
	// bench all starts some 15 clusters: more than e2e.Run's two
	// minutes on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pdcBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("pdc %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

// checkBenchReport checks the report's header, its benchmarks in order,
// each case's rounds, median within its range, and a case for every
// target.
func checkBenchReport(t *testing.T, report string) {
	t.Helper()
	f, err := os.Open(report)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := bench.ReadReport(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Machine.Cores < 1 || rep.Machine.Go == "" || rep.Machine.Revision == "" || rep.Load.Before.Cores < 1 || rep.Rounds != 2 {
		t.Errorf("report header: machine %+v, load %+v, rounds %d", rep.Machine, rep.Load, rep.Rounds)
	}
	var names []string
	for _, b := range rep.Benchmarks {
		names = append(names, b.Name)
		if len(b.Cases) == 0 {
			t.Errorf("benchmark %s: no cases", b.Name)
		}
	}
	if got, want := strings.Join(names, ","), "rpc,meta,dtl,io,vpic,stage,query,search"; got != want {
		t.Errorf("benchmarks %s, want %s", got, want)
	}
	cases := rep.Cases()
	for _, c := range cases {
		if len(c.Rounds) < 2 && !strings.Contains(c.Case, "restart") && !strings.Contains(c.Case, "memory") && !strings.Contains(c.Case, "load ") {
			t.Errorf("%s: %d rounds, want 2", c.Key(), len(c.Rounds))
		}
		if c.Min > c.Median || c.Median > c.Max || c.RatioMin > c.RatioMedian || c.RatioMedian > c.RatioMax {
			t.Errorf("%s: median %v outside [%v, %v] or ratio %v outside [%v, %v]", c.Key(), c.Median, c.Min, c.Max, c.RatioMedian, c.RatioMin, c.RatioMax)
		}
	}
	for _, p := range cli.AllTargets {
		re := regexp.MustCompile(p)
		found := false
		for _, c := range cases {
			if re.MatchString(c.Key()) {
				found = true
				if c.Max <= 0 {
					t.Errorf("%s: max %v", c.Key(), c.Max)
				}
			}
		}
		if !found {
			t.Errorf("no case matches target %s", p)
		}
	}
}

// checkReportFields checks every case carries median, min and max, of
// values and ratios, and its rounds in the file itself.
func checkReportFields(t *testing.T, report string) {
	t.Helper()
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Benchmarks []struct {
			Cases []map[string]any `json:"cases"`
		} `json:"benchmarks"`
	}
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	for _, b := range generic.Benchmarks {
		for _, c := range b.Cases {
			for _, k := range []string{"median", "min", "max", "ratio_median", "ratio_min", "ratio_max", "rounds"} {
				if _, ok := c[k]; !ok {
					t.Errorf("case %v lacks %q", c["case"], k)
				}
			}
		}
	}
}

// checkBenchProfiles checks profs holds a gzipped CPU profile of each
// benchmark process and of every server.
func checkBenchProfiles(t *testing.T, profs string) {
	t.Helper()
	var benchProfs, serverProfs int
	ents, err := os.ReadDir(profs)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		b, err := os.ReadFile(filepath.Join(profs, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s: %d bytes, not a gzipped profile", ent.Name(), len(b))
		}
		switch {
		case strings.HasSuffix(ent.Name(), ".bench.pprof"):
			benchProfs++
		case strings.HasSuffix(ent.Name(), ".server.pprof"):
			serverProfs++
		}
	}
	// One per benchmark; servers: rpc 1, meta 1, io 1+2, vpic 2, stage 2,
	// query 1, search 1 (dtl starts none).
	if benchProfs != 8 || serverProfs != 11 {
		t.Errorf("%d benchmark and %d server profiles, want 8 and 11: %v", benchProfs, serverProfs, ents)
	}
}
