package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// pdc bench vpic runs its Go client processes and reports each phase
// next to the raw ceiling.
func TestBenchVPIC(t *testing.T) {
	out := e2e.MustRun(t, "bench", "vpic", "--n", "1000", "--steps", "1", "--procs", "1,2", "--json")
	e2e.CheckVPICRows(t, out, "vpic (2 servers)", []string{"1", "2"}, "VPIC-IO write, ", "BD-CATS read, every value checked, ")
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
