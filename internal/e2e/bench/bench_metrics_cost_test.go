package bench_test

import (
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
)

// bench rpc --metrics-cost: every case against a server with metrics,
// its ceiling the same calls against one without, servers pinned apart
// from the client, and the server with metrics scraped meanwhile.
func TestBenchRPCMetricsCost(t *testing.T) {
	stdout, stderr := runPlainPdc(t, e2e.PlainBin(t), "bench", "rpc", "--metrics-cost", "--rounds", "1", "--duration", "300ms", "--json")
	if runtime.NumCPU() >= 2 && os.Getenv(cluster.ServerCPUsEnv) == "" && !strings.Contains(stderr, "servers on CPU") {
		t.Errorf("stderr does not say where the servers run:\n%s", stderr)
	}
	if n := len(costResults(t, stdout, "rpc (with metrics)")); n != 6 {
		t.Errorf("%d cases, want 6:\n%s", n, stdout)
	}
}

// costResult is a line of a --metrics-cost run's --json output.
type costResult struct {
	Bench, Case, Ceiling string
	Value                float64
	CeilingValue         float64 `json:"ceiling_value"`
	Ratio                float64
	Target               string
}

// costResults decodes a --metrics-cost run's output and checks that every
// case is bench's, against the same case without metrics, with figures.
func costResults(t *testing.T, stdout, bench string) map[string]costResult {
	t.Helper()
	out := map[string]costResult{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r costResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out[r.Case] = r
		if r.Bench != bench || r.Ceiling != "the same, without metrics" || r.Value <= 0 || r.CeilingValue <= 0 || r.Ratio <= 0 ||
			!strings.Contains(r.Target, "0.98") {
			t.Errorf("%s", line)
		}
	}
	return out
}

// bench io --metrics-cost: each io case on a cluster with metrics against
// the same case on one without.
func TestBenchIOMetricsCost(t *testing.T) {
	stdout, _ := runPlainPdc(t, e2e.PlainBin(t), "bench", "io", "--metrics-cost", "--rounds", "2", "--size", "8MiB", "--regions", "1MiB",
		"--partitions", "region-static", "--storage", "offset", "--servers", "1", "--small", "256", "--json")
	cases := costResults(t, stdout, "io (with metrics)")
	for _, want := range []string{"write 8 MiB, region-static, offset, 1 MiB regions", "read 8 MiB, region-static, offset, 1 MiB regions",
		"write 256 regions of 4 KiB, start_all/wait_all", "read 256 regions of 4 KiB, start_all/wait_all"} {
		if _, ok := cases[want]; !ok {
			t.Errorf("no case %q in:\n%s", want, stdout)
		}
	}
}
