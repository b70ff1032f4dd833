package e2e

import (
	"encoding/json"
	"strings"
	"testing"
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

// CheckVPICRows checks that out, from pdc bench vpic --json with 1000
// particles per process, has a write and a read row per process count, in
// order, labelled bench and naming what wrote and read, each with a
// figure.
func CheckVPICRows(t *testing.T, out, bench string, procs []string, writer, reader string) {
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
