package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// Result is one measured figure next to its ceiling.
type Result struct {
	Bench        string  `json:"bench"`
	Case         string  `json:"case"`
	Value        float64 `json:"value"`
	Unit         string  `json:"unit"`
	Ceiling      string  `json:"ceiling"`
	CeilingValue float64 `json:"ceiling_value"`
	// Ratio is the fraction of the ceiling achieved (1.0 = as fast).
	Ratio float64 `json:"ratio"`
	// Target, when set, is the ratio or value the figure must reach.
	Target string `json:"-"`
}

// latency builds a Result for a time (lower is better).
func latency(bench, name string, v float64, unit, ceiling string, cv float64) Result {
	r := Result{Bench: bench, Case: name, Value: v, Unit: unit, Ceiling: ceiling, CeilingValue: cv}
	if v > 0 {
		r.Ratio = cv / v
	}
	return r
}

// rate builds a Result for a rate (higher is better).
func rate(bench, name string, v float64, unit, ceiling string, cv float64) Result {
	r := Result{Bench: bench, Case: name, Value: v, Unit: unit, Ceiling: ceiling, CeilingValue: cv}
	if cv > 0 {
		r.Ratio = v / cv
	}
	return r
}

// WriteTable prints results as an aligned table.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BENCH\tCASE\tVALUE\tUNIT\tCEILING\tCEILING VALUE\tRATIO\tTARGET")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\n",
			r.Bench, r.Case, num(r.Value), r.Unit, r.Ceiling, num(r.CeilingValue), r.Ratio, r.Target)
	}
	return tw.Flush()
}

// WriteJSON prints one JSON object per line.
func WriteJSON(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
