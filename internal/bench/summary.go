package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Round is one round's figure of a case: ours, the ceiling measured in the
// same round, and their ratio.
type Round struct {
	Value        float64 `json:"value"`
	CeilingValue float64 `json:"ceiling_value"`
	Ratio        float64 `json:"ratio"`
}

// Summary is one case over all its rounds: the median and the range of
// the value and of the ratio to the ceiling. The ratio's median is the
// median of the rounds' ratios, each taken against the ceiling of its own
// round, not the ratio of the medians.
type Summary struct {
	Bench string `json:"bench"`
	Case  string `json:"case"`
	Unit  string `json:"unit"`
	// Median, Min and Max are of the rounds' values.
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// Value, CeilingValue and Ratio are the medians, under the names a
	// single Result has, for readers of the one-round format.
	Value        float64 `json:"value"`
	Ceiling      string  `json:"ceiling"`
	CeilingValue float64 `json:"ceiling_value"`
	Ratio        float64 `json:"ratio"`
	RatioMedian  float64 `json:"ratio_median"`
	RatioMin     float64 `json:"ratio_min"`
	RatioMax     float64 `json:"ratio_max"`
	// LowerIsBetter holds for times and sizes, not for rates.
	LowerIsBetter bool    `json:"lower_is_better,omitempty"`
	Target        string  `json:"target,omitempty"`
	Rounds        []Round `json:"rounds"`
	// Load is the machine's load around the benchmark, when printed on
	// its own (bench all records it once for the file).
	Load *LoadSpan `json:"load,omitempty"`
}

// Summarize groups results by benchmark and case, in the order each case
// first appears, one round per appearance. A benchmark that runs its
// measurement N times (each with its ceiling) hands all N results of a
// case here; a case measured once (a restart, a load) has one round.
func Summarize(rs []Result) []Summary {
	type key struct{ bench, name string }
	idx := map[key]int{}
	var out []Summary
	for _, r := range rs {
		k := key{r.Bench, r.Case}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Summary{Bench: r.Bench, Case: r.Case, Unit: r.Unit, Ceiling: r.Ceiling,
				LowerIsBetter: LowerIsBetter(r.Unit), Target: r.Target})
		}
		out[i].Rounds = append(out[i].Rounds, Round{Value: r.Value, CeilingValue: r.CeilingValue, Ratio: r.Ratio})
		if r.Target != "" {
			out[i].Target = r.Target // the last round's says how far it is
		}
	}
	for i := range out {
		s := &out[i]
		vals, ceils, ratios := make([]float64, len(s.Rounds)), make([]float64, len(s.Rounds)), make([]float64, len(s.Rounds))
		for j, r := range s.Rounds {
			vals[j], ceils[j], ratios[j] = r.Value, r.CeilingValue, r.Ratio
		}
		s.Median, s.Min, s.Max = Spread(vals)
		s.CeilingValue, _, _ = Spread(ceils)
		s.RatioMedian, s.RatioMin, s.RatioMax = Spread(ratios)
		s.Value, s.Ratio = s.Median, s.RatioMedian
	}
	return out
}

// Spread returns the median, the minimum and the maximum of vs (the
// median of an even count is the mean of the middle two); zeros for none.
func Spread(vs []float64) (med, lo, hi float64) {
	if len(vs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// LowerIsBetter says whether a smaller figure in unit is the better one:
// times and sizes; rates and ratios are better higher.
func LowerIsBetter(unit string) bool {
	switch unit {
	case "ns", "us", "ms", "s", "B", "us/tag":
		return true
	}
	return false
}

// WriteSummaryTable prints summaries as an aligned table, each figure as
// its median and, over more than one round, its range:
// "0.71 [0.66-0.74]".
func WriteSummaryTable(w io.Writer, ss []Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BENCH\tCASE\tVALUE [RANGE]\tUNIT\tCEILING\tCEILING VALUE\tRATIO [RANGE]\tROUNDS\tTARGET")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n",
			s.Bench, s.Case, spreadText(s.Median, s.Min, s.Max, len(s.Rounds), num), s.Unit, s.Ceiling, num(s.CeilingValue),
			spreadText(s.RatioMedian, s.RatioMin, s.RatioMax, len(s.Rounds), func(v float64) string { return fmt.Sprintf("%.2f", v) }),
			len(s.Rounds), s.Target)
	}
	return tw.Flush()
}

func spreadText(med, lo, hi float64, n int, f func(float64) string) string {
	if n < 2 {
		return f(med)
	}
	return fmt.Sprintf("%s [%s-%s]", f(med), f(lo), f(hi))
}

// WriteSummaryJSON prints one JSON object per case and line.
func WriteSummaryJSON(w io.Writer, ss []Summary) error {
	enc := json.NewEncoder(w)
	for _, s := range ss {
		if err := enc.Encode(s); err != nil {
			return err
		}
	}
	return nil
}

// MatchCases keeps the results whose "bench: case" match.
func MatchCases(rs []Result, match func(string) bool) []Result {
	if match == nil {
		return rs
	}
	var out []Result
	for _, r := range rs {
		if match(r.Bench + ": " + r.Case) {
			out = append(out, r)
		}
	}
	return out
}

// Key names a case across runs: its benchmark and its case.
func (s Summary) Key() string { return s.Bench + ": " + strings.TrimSpace(s.Case) }

// Want says whether a case, named "bench: case", is to be measured: a
// benchmark skips the work of the cases it rules out where it can tell
// beforehand. A nil Want wants every case.
type Want func(key string) bool

// Any says whether any of bench's cases named is wanted.
func (w Want) Any(bench string, names ...string) bool {
	if w == nil {
		return true
	}
	for _, n := range names {
		if w(bench + ": " + n) {
			return true
		}
	}
	return false
}
