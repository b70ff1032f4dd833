package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/pdcgo/pdc/internal/bench"
)

// benchOpts are the flags every benchmark takes: how many rounds, how to
// print, what to profile and which cases to keep.
type benchOpts struct {
	name       string
	asJSON     bool
	rounds     int
	cpuprofile string
	caseRE     string
	metrics    bool
}

func addBenchOpts(fs *flag.FlagSet, name string) *benchOpts {
	o := &benchOpts{name: name}
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object per case and line: the median, min and max, the ratio's median, min and max, each round's figures, and the load")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds: each measures every case and its ceiling again; the median and the range over the rounds are reported")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write CPU profiles into this directory: this process's (NAME.bench.pprof) and each server's (NAME.cN.rankR.server.pprof), for go tool pprof")
	fs.StringVar(&o.caseRE, "case", "", `keep only the cases whose "bench: case" matches this regular expression; benchmarks skip the work of cases it rules out where they can`)
	fs.BoolVar(&o.metrics, "metrics", false, "bench rpc and io: the servers they start serve Prometheus metrics (--metrics-addr 127.0.0.1:0); run with and without to measure what metrics cost")
	return o
}

// benchSink, when set on the env, takes a benchmark's summaries instead of
// its printing them: how bench all collects every benchmark into one file.
type benchSink func(name string, load bench.LoadSpan, ss []bench.Summary)

// benchRun is one benchmark's run: its rounds' results, the load around
// it, and its CPU profile.
type benchRun struct {
	e        *env
	o        *benchOpts
	match    *regexp.Regexp
	before   bench.Load
	cpu      bench.CPUSample
	rs       []bench.Result
	prof     *os.File
	clusters int
	tmpdirs  []string // clusters to stop before finishing
	t0       time.Time
	status   *status // on a terminal: the round under way
}

// begin validates the common flags, reads the load and starts the
// profile. The caller defers close and ends with finish.
func (o *benchOpts) begin(e *env) (*benchRun, error) {
	if o.rounds < 1 {
		return nil, fmt.Errorf("bench %s: --rounds %d: want at least 1: %w", o.name, o.rounds, errUsage)
	}
	r := &benchRun{e: e, o: o, t0: time.Now()}
	if o.caseRE != "" {
		re, err := regexp.Compile(o.caseRE)
		if err != nil {
			return nil, fmt.Errorf("bench %s: --case: %v: %w", o.name, err, errUsage)
		}
		r.match = re
	}
	if o.cpuprofile != "" {
		if err := os.MkdirAll(o.cpuprofile, 0o755); err != nil {
			return nil, fmt.Errorf("bench %s: --cpuprofile: %w", o.name, err)
		}
		f, err := os.Create(filepath.Join(o.cpuprofile, profName(o.name)+".bench.pprof"))
		if err != nil {
			return nil, fmt.Errorf("bench %s: --cpuprofile: %w", o.name, err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("bench %s: --cpuprofile: %w", o.name, err)
		}
		r.prof = f
	}
	r.before, r.cpu = bench.ReadLoad(), bench.ReadCPU()
	fmt.Fprintf(e.stderr, "bench %s: %s; before: %s\n", o.name, count(o.rounds, "round", "rounds"), r.before)
	r.status = newStatus(e.stderr, isTerminal(e.stderr), "bench "+o.name+": setting up")
	return r, nil
}

// profName makes a benchmark's name a file name.
func profName(name string) string {
	return strings.NewReplacer(" ", "-", "/", "-", "(", "", ")", "", ",", "").Replace(name)
}

// want is --case as a bench.Want (nil without it), for the benchmarks
// that can skip the work of the cases it rules out.
func (r *benchRun) want() bench.Want {
	if r.match == nil {
		return nil
	}
	return r.match.MatchString
}

// metricsAddr is the --metrics-addr to give the servers this run starts
// ("" without --metrics).
func (r *benchRun) metricsAddr() string {
	if !r.o.metrics {
		return ""
	}
	return "127.0.0.1:0"
}

// serverProfile is the --cpuprofile to give the servers of the next
// cluster this run starts ("" without --cpuprofile): one file per rank.
func (r *benchRun) serverProfile() string {
	if r.o.cpuprofile == "" {
		return ""
	}
	r.clusters++
	return filepath.Join(r.o.cpuprofile, fmt.Sprintf("%s.c%d.rank{rank}.server.pprof", profName(r.o.name), r.clusters))
}

// started notes a cluster finish stops first, so that its servers write
// their profiles before the figures are printed. Stopping one that is
// already down is harmless.
func (r *benchRun) started(tmpdir string) { r.tmpdirs = append(r.tmpdirs, tmpdir) }

// rounds runs round o.rounds times, each measuring its cases and their
// ceilings anew, and keeps every round's results.
func (r *benchRun) rounds(ctx context.Context, round func(ctx context.Context, i int) ([]bench.Result, error)) error {
	for i := range r.o.rounds {
		t0 := time.Now()
		r.status.set("bench %s: round %d of %d", r.o.name, i+1, r.o.rounds)
		rs, err := round(ctx, i)
		if err != nil {
			return fmt.Errorf("round %d of %d: %w", i+1, r.o.rounds, err)
		}
		r.rs = append(r.rs, rs...)
		r.status.printf("bench %s: round %d of %d: %s in %s\n", r.o.name, i+1, r.o.rounds, count(len(rs), "figure", "figures"), time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// within runs a measurement that makes its o.rounds rounds itself (one
// Result per case and round), for benchmarks whose cases must each run
// their rounds back to back on state set up once: bench io keeps one
// object per case, which it could not keep for every case at once.
func (r *benchRun) within(ctx context.Context, measure func(ctx context.Context, rounds int) ([]bench.Result, error)) error {
	t0 := time.Now()
	r.status.set("bench %s: %s", r.o.name, count(r.o.rounds, "round", "rounds"))
	rs, err := measure(ctx, r.o.rounds)
	if err != nil {
		return err
	}
	r.rs = append(r.rs, rs...)
	r.status.printf("bench %s: %s: %s in %s\n", r.o.name, count(r.o.rounds, "round", "rounds"), count(len(rs), "figure", "figures"), time.Since(t0).Round(time.Millisecond))
	return nil
}

// add keeps results measured outside the rounds (once: a restart, a load).
func (r *benchRun) add(rs ...bench.Result) { r.rs = append(r.rs, rs...) }

// close stops the profile; idempotent.
func (r *benchRun) close() {
	r.status.stop()
	if r.prof != nil {
		pprof.StopCPUProfile()
		r.prof.Close()
		r.prof = nil
	}
}

// finish stops the profile, reads the load again, and prints (or hands to
// bench all) the summaries of the kept cases.
func (r *benchRun) finish() error {
	r.close()
	if r.o.cpuprofile != "" {
		for _, t := range r.tmpdirs {
			_, _ = down(context.Background(), io.Discard, t, time.Minute)
		}
	}
	span := bench.LoadSpan{Before: r.before, After: bench.ReadLoad(), Others: r.cpu.Others(bench.ReadCPU())}
	var match func(string) bool
	if r.match != nil {
		match = r.match.MatchString
	}
	ss := bench.Summarize(bench.MatchCases(r.rs, match))
	fmt.Fprintf(r.e.stderr, "bench %s: %s, %s in %s; before: %s; after: %s%s\n", r.o.name, count(len(ss), "case", "cases"), count(r.o.rounds, "round", "rounds"),
		time.Since(r.t0).Round(time.Second), span.Before, span.After, othersText(span.Others))
	if w := span.Warning(); w != "" {
		fmt.Fprintf(r.e.stderr, "bench %s: %s\n", r.o.name, w)
	}
	if r.e.benchSink != nil {
		r.e.benchSink(r.o.name, span, ss)
		return nil
	}
	if r.o.asJSON {
		for i := range ss {
			ss[i].Load = &span
		}
		return bench.WriteSummaryJSON(r.e.stdout, ss)
	}
	return bench.WriteSummaryTable(r.e.stdout, ss)
}

// othersText is the CPU other processes took during a run, for the load
// line ("" where /proc could not tell).
func othersText(o *bench.OtherCPU) string {
	if o == nil {
		return ""
	}
	return fmt.Sprintf("; other processes: %.1f CPU-s, %.2f cores on average", o.Seconds, o.Cores)
}

// startCPUProfile profiles this process into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
