package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"
)

// ReportFormat names the layout of a Report file; a reader refuses others.
const ReportFormat = "pdc-bench-report/1"

// Report is what `pdc bench all` writes: the machine, the load around the
// run, and every case of every benchmark with its rounds.
type Report struct {
	Format     string            `json:"format"`
	Machine    Machine           `json:"machine"`
	Args       []string          `json:"args"`
	Rounds     int               `json:"rounds"`
	Load       LoadSpan          `json:"load"`
	Seconds    float64           `json:"seconds"`
	Benchmarks []BenchmarkReport `json:"benchmarks"`
}

// BenchmarkReport is one benchmark's cases and the load around it.
type BenchmarkReport struct {
	Name    string    `json:"name"`
	Args    []string  `json:"args,omitempty"`
	Load    LoadSpan  `json:"load"`
	Seconds float64   `json:"seconds"`
	Cases   []Summary `json:"cases"`
}

// Revision, when set at link time (make bench-all: -ldflags "-X
// github.com/pdcgo/pdc/internal/bench.Revision=COMMIT"), names the commit
// of a binary built without VCS stamping (-buildvcs=false, or from a git
// worktree where go cannot stamp it).
var Revision string

// Machine is what a figure depends on besides the code.
type Machine struct {
	Cores    int    `json:"cores"`
	CPU      string `json:"cpu"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	Revision string `json:"revision"`
	// Modified says the binary was built from a tree with changes not
	// committed at Revision.
	Modified bool      `json:"modified,omitempty"`
	Date     time.Time `json:"date"`
}

// ThisMachine describes this machine and this binary.
func ThisMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC().Truncate(time.Second)}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = runtime.GOOS + " " + strings.TrimSpace(string(b))
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				m.Revision = s.Value
			case "vcs.modified":
				m.Modified = s.Value == "true"
			}
		}
	}
	if m.Revision == "" {
		m.Revision = Revision
	}
	if m.Revision == "" {
		m.Revision = "unknown (built without VCS stamping; make bench-all sets it)"
	}
	return m
}

// Cases lists every case of the report, benchmark by benchmark.
func (r *Report) Cases() []Summary {
	var out []Summary
	for _, b := range r.Benchmarks {
		out = append(out, b.Cases...)
	}
	return out
}

// ReadReport reads a Report file, or the JSON lines of one benchmark's
// --json (one Summary per line), as a report of its cases alone. Lines of
// the same case, from several runs appended to one file, are one case
// with all their rounds.
func ReadReport(rd io.Reader) (*Report, error) {
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	var r Report
	if err := json.Unmarshal(b, &r); err == nil && r.Format != "" {
		if r.Format != ReportFormat {
			return nil, fmt.Errorf("report format %q: this pdc reads %q", r.Format, ReportFormat)
		}
		return &r, nil
	}
	// Every round of every line, so that lines of one case from several
	// runs (an old binary without rounds, run five times) read as one
	// case of their rounds together.
	var rounds []Result
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<16), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var s Summary
		if err := json.Unmarshal(line, &s); err != nil || s.Case == "" {
			return nil, fmt.Errorf("neither a bench all report (%s) nor JSON lines of cases: %q", ReportFormat, trunc(line, 80))
		}
		if len(s.Rounds) == 0 { // a one-round Result line
			s.Rounds = []Round{{Value: s.Value, CeilingValue: s.CeilingValue, Ratio: s.Ratio}}
		}
		for _, r := range s.Rounds {
			rounds = append(rounds, Result{Bench: s.Bench, Case: s.Case, Unit: s.Unit, Ceiling: s.Ceiling, Target: s.Target,
				Value: r.Value, CeilingValue: r.CeilingValue, Ratio: r.Ratio})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	cases := Summarize(rounds)
	if len(cases) == 0 {
		return nil, fmt.Errorf("no cases")
	}
	return &Report{Benchmarks: []BenchmarkReport{{Name: "lines", Cases: cases}}}, nil
}

func trunc(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// Verdicts of a comparison. A change is called only when the two runs'
// ranges do not overlap: rounds that overlap could be the same code on a
// machine whose speed drifts. A case with a ceiling is judged on its
// ratio's range as well; where the two disagree, the verdict is "machine
// moved (ceiling X -> Y)" if the ceiling's own rounds moved, else
// "unsure: ... by its figure, ... by its ratio".
const (
	VerdictFaster = "faster"
	VerdictSlower = "slower"
	VerdictSame   = "same within noise"
	// VerdictMachineMoved is the start of the verdict of a case whose
	// figure and ratio to its ceiling tell different stories.
	VerdictMachineMoved = "machine moved"
	// VerdictUnsure starts the verdict of a case whose figure and ratio
	// disagree while its ceiling did not move.
	VerdictUnsure  = "unsure"
	VerdictOneSide = "one round: not judged"
	VerdictOldOnly = "only in old"
	VerdictNewOnly = "only in new"
)

// Change is one case of a comparison.
type Change struct {
	Key      string
	Unit     string
	Old, New *Summary
	// Percent is the new median's change from the old one (positive:
	// the figure grew, which is better for rates and worse for times).
	Percent float64
	Verdict string
}

// Compare matches the cases of two reports by benchmark and case name,
// in the old report's order, then the new report's cases the old lacks.
func Compare(old, cur *Report) []Change {
	newByKey := map[string]*Summary{}
	nc := cur.Cases()
	for i := range nc {
		newByKey[nc[i].Key()] = &nc[i]
	}
	seen := map[string]bool{}
	var out []Change
	oc := old.Cases()
	for i := range oc {
		o := &oc[i]
		k := o.Key()
		if seen[k] {
			continue
		}
		seen[k] = true
		n, ok := newByKey[k]
		if !ok {
			out = append(out, Change{Key: k, Unit: o.Unit, Old: o, Verdict: VerdictOldOnly})
			continue
		}
		out = append(out, compareCase(k, o, n))
	}
	for i := range nc {
		n := &nc[i]
		if k := n.Key(); !seen[k] {
			seen[k] = true
			out = append(out, Change{Key: k, Unit: n.Unit, New: n, Verdict: VerdictNewOnly})
		}
	}
	return out
}

func compareCase(k string, o, n *Summary) Change {
	c := Change{Key: k, Unit: n.Unit, Old: o, New: n}
	if o.Median != 0 {
		c.Percent = (n.Median - o.Median) / o.Median * 100
	}
	if len(o.Rounds) < 2 || len(n.Rounds) < 2 {
		c.Verdict = VerdictOneSide
		return c
	}
	c.Verdict = rangeVerdict(o.Min, o.Max, n.Min, n.Max, n.LowerIsBetter)
	if !hasCeiling(o) || !hasCeiling(n) {
		return c
	}
	// The ceiling was measured in the same rounds: a machine that got
	// slower or faster as a whole (another tenant on the VM) moves the
	// figure and its ceiling together and leaves the ratio where it
	// was. The ratio is better higher, whatever the unit.
	r := rangeVerdict(o.RatioMin, o.RatioMax, n.RatioMin, n.RatioMax, false)
	if r == c.Verdict {
		return c
	}
	// They disagree. Only a ceiling whose own rounds moved says the
	// machine moved; a ceiling that stayed put means the two ranges are
	// of different widths, and neither reading is sure.
	oLo, oHi := ceilingRange(o)
	nLo, nHi := ceilingRange(n)
	if rangeVerdict(oLo, oHi, nLo, nHi, false) != VerdictSame {
		c.Verdict = fmt.Sprintf("%s (ceiling %s -> %s)", VerdictMachineMoved, sigNum(o.CeilingValue), sigNum(n.CeilingValue))
	} else {
		c.Verdict = fmt.Sprintf("%s: %s by its figure, %s by its ratio", VerdictUnsure, c.Verdict, r)
	}
	return c
}

// ceilingRange is the lowest and highest ceiling of a case's rounds.
func ceilingRange(s *Summary) (lo, hi float64) {
	vs := make([]float64, len(s.Rounds))
	for i, r := range s.Rounds {
		vs[i] = r.CeilingValue
	}
	_, lo, hi = Spread(vs)
	return lo, hi
}

// sigNum prints a figure below 1 to three significant digits, which num
// would round away (a raw round trip of 0.031 ms).
func sigNum(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.3g", v)
	}
	return num(v)
}

// rangeVerdict calls a change between two ranges only where they do not
// overlap.
func rangeVerdict(oMin, oMax, nMin, nMax float64, lowerIsBetter bool) string {
	switch {
	case nMin <= oMax && oMin <= nMax:
		return VerdictSame
	case (nMin > oMax) != lowerIsBetter:
		return VerdictFaster
	default:
		return VerdictSlower
	}
}

// hasCeiling says whether a case's ratio is to a ceiling measured in its
// rounds, not to a fixed target.
func hasCeiling(s *Summary) bool {
	if s.Ceiling == "" || s.Ceiling == "target" || s.RatioMax <= 0 {
		return false
	}
	for _, r := range s.Rounds {
		if r.CeilingValue <= 0 {
			return false
		}
	}
	return true
}

// WriteCompare prints a comparison as a table: each case's old and new
// median [range], the change and the verdict, then the ratios to the
// ceilings, which a busier machine moves less than the figures.
func WriteCompare(w io.Writer, cs []Change) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tOLD [RANGE]\tNEW [RANGE]\tUNIT\tCHANGE\tVERDICT\tRATIO OLD -> NEW")
	side := func(s *Summary) string {
		if s == nil {
			return "-"
		}
		return spreadText(s.Median, s.Min, s.Max, len(s.Rounds), num)
	}
	ratio := func(s *Summary) string {
		if s == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f", s.RatioMedian)
	}
	for _, c := range cs {
		change := "-"
		if c.Old != nil && c.New != nil && c.Old.Median != 0 {
			change = fmt.Sprintf("%+.1f%%", c.Percent)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s -> %s\n", c.Key, side(c.Old), side(c.New), c.Unit, change, c.Verdict, ratio(c.Old), ratio(c.New))
	}
	return tw.Flush()
}
