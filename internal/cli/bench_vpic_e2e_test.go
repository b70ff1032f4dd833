package cli_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// vpicRow is one line of pdc bench vpic --json.
type vpicRow struct {
	Bench        string  `json:"bench"`
	Case         string  `json:"case"`
	Value        float64 `json:"value"`
	Unit         string  `json:"unit"`
	CeilingValue float64 `json:"ceiling_value"`
	Ratio        float64 `json:"ratio"`
}

// checkVPICRows checks that out has a write and a read row per process
// count, in order, labelled bench and naming what wrote and read.
func checkVPICRows(t *testing.T, out, bench string, procs []string, writer, reader string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2*len(procs) {
		t.Fatalf("%d result lines, want %d (write and read for %v processes):\n%s", len(lines), 2*len(procs), procs, out)
	}
	for i, l := range lines {
		var r vpicRow
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		what := writer
		if i%2 == 1 {
			what = reader
		}
		if r.Bench != bench || !strings.HasPrefix(r.Case, what) || !strings.Contains(r.Case, ", "+procs[i/2]+" procs x 1000 particles") {
			t.Errorf("row %d is %q / %q, want %q / %q with %s procs", i, r.Bench, r.Case, bench, what, procs[i/2])
		}
		if r.Unit != "GB/s" || r.Value <= 0 || r.CeilingValue <= 0 || r.Ratio <= 0 {
			t.Errorf("empty figure: %s", l)
		}
	}
}

// pdc bench vpic runs its Go client processes and reports each phase
// next to the raw ceiling.
func TestBenchVPIC(t *testing.T) {
	out := mustRun(t, "bench", "vpic", "--n", "1000", "--steps", "1", "--procs", "1,2", "--json")
	checkVPICRows(t, out, "vpic (2 servers)", []string{"1", "2"}, "VPIC-IO write, ", "BD-CATS read, every value checked, ")
}

// pdc bench vpic --c runs the C programs make capi installs, found by
// --c-prefix or $PDC_CAPI_PREFIX.
func TestBenchVPICC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds libpdc.so and its C programs; skipped with -short")
	}
	for _, tool := range []string{"gcc", "nm", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("building libpdc needs %s, which is not installed: %v", tool, err)
		}
	}
	prefix := filepath.Join(t.TempDir(), "capi")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "../../capi/install.sh", prefix).CombinedOutput(); err != nil {
		t.Fatalf("capi/install.sh: %v\n%s", err, out)
	}
	out := mustRun(t, "bench", "vpic", "--c", "--c-prefix", prefix, "--n", "1000", "--steps", "1", "--procs", "1,2", "--json")
	checkVPICRows(t, out, "vpic C (2 servers)", []string{"1", "2"},
		"VPIC-IO write (C, pdc_vpicio), ", "BD-CATS read, every value checked (C, pdc_bdcats), ")

	r := run(t, []string{"PDC_CAPI_PREFIX=" + prefix}, "bench", "vpic", "--c", "--n", "1000", "--steps", "1", "--procs", "3", "--partition", "object-static", "--json")
	if r.err != nil {
		t.Fatalf("bench vpic --c with $PDC_CAPI_PREFIX: %v\n%s", r.err, r.stderr)
	}
	checkVPICRows(t, r.stdout, "vpic C (2 servers)", []string{"3"},
		"VPIC-IO write (C, pdc_vpicio), ", "BD-CATS read, every value checked (C, pdc_bdcats), ")
}

// Without the C programs, pdc bench vpic --c says how to build them.
func TestBenchVPICCMissing(t *testing.T) {
	nowhere := filepath.Join(t.TempDir(), "nowhere")
	for _, tc := range []struct {
		env  []string
		args []string
		want []string
	}{
		{[]string{"PDC_CAPI_PREFIX="}, []string{"--c-prefix", nowhere},
			[]string{"--c-prefix " + nowhere + ": no pdc_vpicio and pdc_bdcats in " + nowhere + "/bin", "make capi CAPI_PREFIX=" + nowhere}},
		{[]string{"PDC_CAPI_PREFIX=" + nowhere}, nil,
			[]string{"$PDC_CAPI_PREFIX " + nowhere + ": no pdc_vpicio", "make capi CAPI_PREFIX=" + nowhere}},
		// The tests run in internal/cli, which has no build/capi.
		{[]string{"PDC_CAPI_PREFIX="}, nil,
			[]string{"no pdc_vpicio and pdc_bdcats in build/capi/bin", "build them with `make capi`", "--c-prefix"}},
	} {
		r := run(t, tc.env, append([]string{"bench", "vpic", "--c", "--n", "10"}, tc.args...)...)
		if r.err == nil {
			t.Fatalf("bench vpic --c %v with %v: no error", tc.args, tc.env)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("bench vpic --c %v with %v: stderr lacks %q:\n%s", tc.args, tc.env, w, r.stderr)
			}
		}
	}
}
