package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func summary(bench, name, unit string, vals ...float64) Summary {
	var rs []Result
	for _, v := range vals {
		rs = append(rs, Result{Bench: bench, Case: name, Unit: unit, Value: v, CeilingValue: 1, Ratio: v})
	}
	return Summarize(rs)[0]
}

func testReport(ss ...Summary) *Report {
	return &Report{Format: ReportFormat, Benchmarks: []BenchmarkReport{{Name: "x", Cases: ss}}}
}

// Compare calls a change only when the ranges of the two runs do not
// overlap, in the direction that is better for the unit.
func TestCompareVerdicts(t *testing.T) {
	old := testReport(
		summary("b", "rate up", "ops/s", 100, 110, 105),
		summary("b", "rate overlap", "ops/s", 100, 110, 105),
		summary("b", "rate down", "ops/s", 100, 110, 105),
		summary("b", "time down", "us", 50, 55, 60),
		summary("b", "time up", "us", 50, 55, 60),
		summary("b", "touching", "GB/s", 1, 2, 3),
		summary("b", "once", "s", 1),
		summary("b", "gone", "ops/s", 1, 2),
	)
	cur := testReport(
		summary("b", "rate up", "ops/s", 120, 125, 130),
		summary("b", "rate overlap", "ops/s", 108, 140, 150),
		summary("b", "rate down", "ops/s", 80, 90, 99),
		summary("b", "time down", "us", 30, 35, 40),
		summary("b", "time up", "us", 61, 70, 80),
		summary("b", "touching", "GB/s", 3, 4, 5),
		summary("b", "once", "s", 0.5),
		summary("b", "new", "ops/s", 1, 2),
	)
	want := map[string]string{
		"b: rate up":      VerdictFaster,
		"b: rate overlap": VerdictSame,
		"b: rate down":    VerdictSlower,
		"b: time down":    VerdictFaster,
		"b: time up":      VerdictSlower,
		"b: touching":     VerdictSame,
		"b: once":         VerdictOneSide,
		"b: gone":         VerdictOldOnly,
		"b: new":          VerdictNewOnly,
	}
	cs := Compare(old, cur)
	if len(cs) != len(want) {
		t.Fatalf("%d changes, want %d", len(cs), len(want))
	}
	for _, c := range cs {
		if c.Verdict != want[c.Key] {
			t.Errorf("%s: %q, want %q", c.Key, c.Verdict, want[c.Key])
		}
	}
	if c := cs[0]; c.Key != "b: rate up" || c.Percent < 19 || c.Percent > 19.1 {
		t.Errorf("first change %s %+.2f%%, want rate up +19.05%%", c.Key, c.Percent)
	}
	if cs[len(cs)-1].Key != "b: new" {
		t.Errorf("cases only in the new report come last")
	}
	var b bytes.Buffer
	if err := WriteCompare(&b, cs); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"105 [100-110]", "125 [120-130]", "+19.0%", "only in old", "same within noise"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, b.String())
		}
	}
}

// ReadReport reads a bench all report and a benchmark's --json lines, and
// refuses another format.
func TestReadReport(t *testing.T) {
	rep := testReport(summary("b", "c", "ops/s", 1, 2, 3))
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadReport(bytes.NewReader(js))
	if err != nil || len(got.Cases()) != 1 || got.Cases()[0].Median != 2 {
		t.Fatalf("report: %+v, %v", got, err)
	}
	var lines bytes.Buffer
	if err := WriteSummaryJSON(&lines, rep.Cases()); err != nil {
		t.Fatal(err)
	}
	// An old one-round Result line too.
	lines.WriteString(`{"bench":"b","case":"old","value":4,"unit":"us","ceiling":"raw","ceiling_value":2,"ratio":0.5}` + "\n")
	got, err = ReadReport(&lines)
	if err != nil || len(got.Cases()) != 2 {
		t.Fatalf("lines: %+v, %v", got, err)
	}
	if o := got.Cases()[1]; o.Median != 4 || o.Min != 4 || o.RatioMedian != 0.5 || len(o.Rounds) != 1 || !o.LowerIsBetter {
		t.Errorf("one-round line read as %+v", o)
	}
	// The same one-round case from two more runs of an old binary: one
	// case of three rounds.
	lines.Reset()
	for _, v := range []string{"4", "8", "6"} {
		lines.WriteString(`{"bench":"b","case":"old","value":` + v + `,"unit":"us","ceiling":"raw","ceiling_value":2,"ratio":0.5}` + "\n")
	}
	got, err = ReadReport(&lines)
	if err != nil || len(got.Cases()) != 1 {
		t.Fatalf("three runs' lines: %+v, %v", got, err)
	}
	if o := got.Cases()[0]; len(o.Rounds) != 3 || o.Median != 6 || o.Min != 4 || o.Max != 8 {
		t.Errorf("three runs of one case read as %+v", o)
	}
	if _, err := ReadReport(strings.NewReader(`{"format":"other/9"}`)); err == nil {
		t.Errorf("another format read without error")
	}
	if _, err := ReadReport(strings.NewReader("not json\n")); err == nil {
		t.Errorf("text read without error")
	}
}

// withCeiling is a case measured next to a ceiling: each round's value
// and ceiling, as latencies (ratio = ceiling / value) or rates.
func withCeiling(name, unit string, pairs ...[2]float64) Summary {
	var rs []Result
	for _, p := range pairs {
		if LowerIsBetter(unit) {
			rs = append(rs, latency("b", name, p[0], unit, "raw", p[1]))
		} else {
			rs = append(rs, rate("b", name, p[0], unit, "raw", p[1]))
		}
	}
	return Summarize(rs)[0]
}

// A case with a ceiling is judged on its ratio too: a machine that got
// slower as a whole moves the figure and the ceiling together, and that
// is not our code getting slower.
func TestCompareMachineMoved(t *testing.T) {
	old := testReport(
		// Seen: search index p50 0.45 -> 0.57 ms, ratio 0.07 -> 0.07.
		withCeiling("machine slower", "ms", [2]float64{0.44, 0.031}, [2]float64{0.45, 0.0315}, [2]float64{0.46, 0.032}),
		withCeiling("machine faster", "GB/s", [2]float64{1.0, 2.0}, [2]float64{1.05, 2.1}, [2]float64{1.1, 2.2}),
		withCeiling("really slower", "ms", [2]float64{0.44, 0.031}, [2]float64{0.45, 0.0315}, [2]float64{0.46, 0.032}),
		withCeiling("really faster", "GB/s", [2]float64{1.0, 2.0}, [2]float64{1.05, 2.0}, [2]float64{1.1, 2.0}),
		withCeiling("ceiling moved alone", "GB/s", [2]float64{1.0, 2.0}, [2]float64{1.05, 2.0}, [2]float64{1.1, 2.0}),
		withCeiling("noise", "GB/s", [2]float64{1.0, 2.0}, [2]float64{1.05, 2.0}, [2]float64{1.1, 2.0}),
		// Seen: io write 1.78 [1.11-1.85] -> 2.85 [2.30-2.97] GB/s with
		// its ceiling at 3.02 both times, ratio ranges overlapping.
		withCeiling("ratio noisier", "GB/s", [2]float64{1.1, 2.0}, [2]float64{1.8, 2.0}, [2]float64{1.85, 3.0}),
	)
	cur := testReport(
		withCeiling("machine slower", "ms", [2]float64{0.56, 0.039}, [2]float64{0.57, 0.040}, [2]float64{0.58, 0.041}),
		withCeiling("machine faster", "GB/s", [2]float64{1.5, 3.0}, [2]float64{1.55, 3.1}, [2]float64{1.6, 3.2}),
		withCeiling("really slower", "ms", [2]float64{0.56, 0.031}, [2]float64{0.57, 0.0315}, [2]float64{0.58, 0.032}),
		withCeiling("really faster", "GB/s", [2]float64{1.5, 2.0}, [2]float64{1.55, 2.0}, [2]float64{1.6, 2.0}),
		withCeiling("ceiling moved alone", "GB/s", [2]float64{1.0, 3.0}, [2]float64{1.05, 3.0}, [2]float64{1.1, 3.0}),
		withCeiling("noise", "GB/s", [2]float64{0.9, 2.0}, [2]float64{1.05, 2.0}, [2]float64{1.2, 2.0}),
		withCeiling("ratio noisier", "GB/s", [2]float64{2.3, 3.1}, [2]float64{2.85, 3.0}, [2]float64{2.97, 3.1}),
	)
	want := map[string]string{
		"b: machine slower":      "machine moved (ceiling 0.0315 -> 0.04)",
		"b: machine faster":      "machine moved (ceiling 2.10 -> 3.10)",
		"b: really slower":       VerdictSlower,
		"b: really faster":       VerdictFaster,
		"b: ceiling moved alone": "machine moved (ceiling 2.00 -> 3.00)",
		"b: noise":               VerdictSame,
		"b: ratio noisier":       "unsure: faster by its figure, same within noise by its ratio",
	}
	for _, c := range Compare(old, cur) {
		if c.Verdict != want[c.Key] {
			t.Errorf("%s: %q, want %q", c.Key, c.Verdict, want[c.Key])
		}
	}
}
