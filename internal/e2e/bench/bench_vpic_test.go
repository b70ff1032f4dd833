package bench_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/internal/e2e"
)

// pdc bench vpic runs its Go client processes and reports each phase
// next to the raw ceiling, measured the same way: as many client
// processes, released and timed as the phase's are.
func TestBenchVPIC(t *testing.T) {
	out := e2e.MustRun(t, "bench", "vpic", "--n", "1000", "--steps", "2", "--procs", "1,2", "--json", "--rounds", "1")
	e2e.CheckVPICRows(t, out, "vpic (2 servers)", []string{"1", "2"}, "VPIC-IO write, ", "BD-CATS read, every value checked, ")
	if n := strings.Count(out, `"ceiling":"`+bench.VPICCeiling+`"`); n != 4 {
		t.Errorf("%d rows measured against %q, want 4:\n%s", n, bench.VPICCeiling, out)
	}
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
		// The tests run in internal/e2e/bench, which has no build/capi.
		{[]string{"PDC_CAPI_PREFIX="}, nil,
			[]string{"no pdc_vpicio and pdc_bdcats in build/capi/bin", "build them with `make capi`", "--c-prefix"}},
	} {
		r := e2e.Run(t, tc.env, append([]string{"bench", "vpic", "--c", "--n", "10"}, tc.args...)...)
		if r.Err == nil {
			t.Fatalf("bench vpic --c %v with %v: no error", tc.args, tc.env)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("bench vpic --c %v with %v: stderr lacks %q:\n%s", tc.args, tc.env, w, r.Stderr)
			}
		}
	}
}

// A BD-CATS reader says it is done once its bytes are read, before it
// checks them (the check costs more than the read, and is not timed),
// and still fails when a value is wrong: here, an object never written.
func TestBenchVPICClientChecksAfterDone(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	c := e2e.Connect(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	ct, _, err := c.CreateContainer(ctx, "vpic", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	if err := bench.VPICCreate(ctx, ct, "unwritten", 1000, client.RegionStatic); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, e2e.CommandBin(t, "bench-vpic-client"), "bench-vpic-client", "--tmpdir", tmpdir, "--run", "unwritten",
		"--rank", "0", "--n", "1000", "--phase", "read")
	cmd.Stdin = strings.NewReader("go\n")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err == nil {
		t.Fatalf("a reader of unwritten particles succeeded; stdout:\n%s", stdout.String())
	}
	if got := strings.Fields(stdout.String()); !slices.Equal(got, []string{"ready", "done"}) {
		t.Fatalf("the reader printed %q, want ready and done before its check failed (%v: %s)", got, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "read 0x0, wrote") {
		t.Fatalf("the reader failed without naming the wrong value: %v: %s", err, stderr.String())
	}
}
