package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		in          []float64
		med, lo, hi float64
	}{
		{nil, 0, 0, 0},
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 4, 2, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
		{[]float64{7, 7}, 7, 7, 7},
	} {
		med, lo, hi := Spread(tc.in)
		if med != tc.med || lo != tc.lo || hi != tc.hi {
			t.Errorf("Spread(%v) = %v, %v, %v; want %v, %v, %v", tc.in, med, lo, hi, tc.med, tc.lo, tc.hi)
		}
	}
}

// Summarize reports each case's median and range over its rounds, and the
// median of the rounds' own ratios (each to its round's ceiling), not the
// ratio of the medians.
func TestSummarizeRounds(t *testing.T) {
	var rs []Result
	// Three rounds of two cases; the ceiling drifts from round to round.
	for i, ceil := range []float64{100, 50, 80} {
		v := []float64{90, 40, 60}[i]
		rs = append(rs, rate("b", "rate case", v, "ops/s", "raw", ceil))
		rs = append(rs, latency("b", "lat case", v/10, "us", "raw p50", ceil/20))
	}
	rs = append(rs, Result{Bench: "b", Case: "once", Value: 2, Unit: "s"})
	ss := Summarize(rs)
	if len(ss) != 3 {
		t.Fatalf("%d summaries, want 3: %+v", len(ss), ss)
	}
	r := ss[0]
	if r.Case != "rate case" || len(r.Rounds) != 3 {
		t.Fatalf("first summary %q with %d rounds", r.Case, len(r.Rounds))
	}
	if r.Median != 60 || r.Min != 40 || r.Max != 90 {
		t.Errorf("value median/min/max %v/%v/%v, want 60/40/90", r.Median, r.Min, r.Max)
	}
	// Ratios 0.9, 0.8, 0.75: median 0.8. The ratio of the medians would
	// be 60/80 = 0.75.
	if !near(r.RatioMedian, 0.8) || !near(r.RatioMin, 0.75) || !near(r.RatioMax, 0.9) {
		t.Errorf("ratio median/min/max %v/%v/%v, want 0.8/0.75/0.9", r.RatioMedian, r.RatioMin, r.RatioMax)
	}
	if r.Value != r.Median || r.Ratio != r.RatioMedian || r.CeilingValue != 80 {
		t.Errorf("value %v, ratio %v, ceiling %v: want the medians", r.Value, r.Ratio, r.CeilingValue)
	}
	if r.LowerIsBetter {
		t.Errorf("a rate is better higher")
	}
	l := ss[1]
	if !l.LowerIsBetter || l.Median != 6 {
		t.Errorf("latency case: lower is better %v, median %v", l.LowerIsBetter, l.Median)
	}
	// Latency ratios: ceil/20 / (v/10) = 5/9, 2.5/4, 4/6.
	if !near(l.RatioMin, 5.0/9) || !near(l.RatioMax, 4.0/6) || !near(l.RatioMedian, 2.5/4) {
		t.Errorf("latency ratios %v/%v/%v", l.RatioMedian, l.RatioMin, l.RatioMax)
	}
	if o := ss[2]; len(o.Rounds) != 1 || o.Median != 2 || o.Min != 2 || o.Max != 2 {
		t.Errorf("a case measured once: %+v", o)
	}

	var tbl bytes.Buffer
	if err := WriteSummaryTable(&tbl, ss); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tbl.String(), "60.0 [40.0-90.0]") || !strings.Contains(tbl.String(), "0.80 [0.75-0.90]") {
		t.Errorf("table lacks the median [range] of the value or the ratio:\n%s", tbl.String())
	}
	var js bytes.Buffer
	if err := WriteSummaryJSON(&js, ss); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d JSON lines, want one per case", len(lines))
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"median", "min", "max", "ratio_median", "ratio_min", "ratio_max", "rounds", "value", "ratio"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, lines[0])
		}
	}
	if n := len(m["rounds"].([]any)); n != 3 {
		t.Errorf("JSON has %d rounds, want 3", n)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestParseLoadavg(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0.52 0.58 0.59 1/467 12345\n", 0.52, true},
		{"10.37 8.39 5.81 9/149 16072", 10.37, true},
		{"", 0, false},
		{"x 1 2 3/4 5", 0, false},
		{"-1 1 2 3/4 5", 0, false},
		{"0.5", 0, false},
	} {
		got, err := ParseLoadavg(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseLoadavg(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	l := ReadLoad()
	if l.Cores < 1 {
		t.Errorf("ReadLoad: %d cores", l.Cores)
	}
}

func TestLoadWarning(t *testing.T) {
	// The load after a run counts the benchmark's own processes: it is
	// no sign that anything else ran.
	for _, quiet := range []LoadSpan{
		{Before: Load{Load1: 0.3, Cores: 2}, After: Load{Load1: 0.9, Cores: 2}},
		{Before: Load{Load1: 0.5, Cores: 2}, After: Load{Load1: 3, Cores: 2}},
		{Before: Load{Load1: 0.5, Cores: 2}, After: Load{Load1: 3, Cores: 2}, Others: &OtherCPU{Seconds: 1, Cores: 0.1}},
	} {
		if quiet.Busy() || quiet.Warning() != "" {
			t.Errorf("%+v: busy %v, warning %q", quiet, quiet.Busy(), quiet.Warning())
		}
	}
	for _, s := range []LoadSpan{
		{Before: Load{Load1: 1.5, Cores: 2}, After: Load{Load1: 0.5, Cores: 2}},
		{Before: Load{Load1: 0.5, Cores: 2}, After: Load{Load1: 3, Cores: 2}, Others: &OtherCPU{Seconds: 30, Cores: 0.8}},
	} {
		if !s.Busy() || !strings.Contains(s.Warning(), "figures taken under load") {
			t.Errorf("%+v: busy %v, warning %q", s, s.Busy(), s.Warning())
		}
	}
}
