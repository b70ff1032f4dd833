package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/bench"
)

// allBench is one benchmark of bench all: its arguments at the reduced
// sizes that keep the whole run under 10 minutes on 2 cores, and at the
// tiny sizes of --quick (a check that everything runs, in seconds).
type allBench struct {
	name        string
	args, quick []string
	run         func(ctx context.Context, e *env, args []string) error
}

// allBenches are the benchmarks bench all runs, in order. Not soak (a
// crash loop, not a figure) nor hosts (root and a bed of namespaces).
var allBenches = []allBench{
	{name: "rpc", run: benchRPC,
		args:  []string{"--duration", "500ms"},
		quick: []string{"--duration", "30ms"}},
	{name: "meta", run: benchMeta,
		args:  []string{"--n", "5000", "--procs", "4", "--durability", "process", "--restart-objects", "50000"},
		quick: []string{"--n", "100", "--procs", "2", "--durability", "process", "--restart-objects", "0"}},
	{name: "dtl", run: benchDTL,
		args:  []string{"--sizes", "4KiB,1MiB,64MiB", "--big", "0", "--budget", "100ms"},
		quick: []string{"--sizes", "4KiB,1MiB", "--big", "0", "--budget", "1ms"}},
	{name: "io", run: benchIO,
		args:  []string{"--servers", "1,2", "--size", "64MiB", "--regions", "1MiB", "--small", "65536"},
		quick: []string{"--servers", "1,2", "--size", "2MiB", "--regions", "1MiB", "--partitions", "object-static", "--storage", "offset", "--small", "64"}},
	{name: "vpic", run: benchVPIC,
		// The standalone shape (1, 2 and 4 processes, 3 steps a round,
		// the median of the steps) at a quarter of the particles.
		args:  []string{"--procs", "1,2,4", "--n", "1048576", "--steps", "3"},
		quick: []string{"--procs", "1,4", "--n", "1024", "--steps", "1"}},
	{name: "stage", run: benchStage,
		args:  []string{"--sizes", "1KiB,1MiB,1GiB", "--budget", "100ms", "--min-consumes", "1"},
		quick: []string{"--sizes", "1KiB,1MiB,2MiB", "--modes", "stream,shm", "--budget", "1ms", "--min-consumes", "1"}},
	{name: "query", run: benchQuery,
		args:  []string{"--size", "16MiB", "--servers", "2"},
		quick: []string{"--size", "1MiB", "--servers", "1", "--partitions", "region-static"}},
	{name: "search", run: benchSearch,
		args:  []string{"--objects", "10000", "--servers", "2", "--samples", "50", "--scan-samples", "3", "--put-cost=false"},
		quick: []string{"--objects", "10000", "--servers", "1", "--samples", "2", "--scan-samples", "1", "--put-cost=false"}},
}

// AllTargets are the cases of issue 28's table, as patterns over
// "bench: case" of a bench all report: every one must be in it, at any
// size (--quick shrinks the sizes in the names).
var AllTargets = []string{
	`^rpc: 64B sequential (p50|rate)$`,
	`^meta \(process\): create, 1 client, one at a time$`,
	`^meta \(process\): open, 1 client, one at a time$`,
	`^meta \(process\): tag put, 1 client, one at a time$`,
	`^meta \(process\): tag get, 1 client, one at a time$`,
	`^meta \(process\): create, 1 client, batches of \d+$`,
	`^io \(1 server\): write \d+ [KMG]iB, .*, 1 MiB regions$`,
	`^io \(1 server\): read \d+ [KMG]iB, .*, 1 MiB regions$`,
	`^io \(2 servers\): write \d+ [KMG]iB, .*, 1 MiB regions$`,
	`^io \(2 servers\): read \d+ [KMG]iB, .*, 1 MiB regions$`,
	`^io \(1 server\): write \d+ regions of 4 KiB, start_all/wait_all$`,
	`^vpic \(2 servers\): VPIC-IO write, 1 procs x `,
	`^vpic \(2 servers\): VPIC-IO write, 4 procs x `,
	`^vpic \(2 servers\): BD-CATS read, every value checked, 1 procs x `,
	`^vpic \(2 servers\): BD-CATS read, every value checked, 4 procs x `,
	`^stage: consume \d+ [MG]iB by \w+$`,
	`^stage: consume 1 MiB by \w+ p50$`,
	`^stage: consume 1 KiB by \w+ p50$`,
	`^dtl: `,
	`^query: `,
	`^search: `,
}

// benchAll runs every benchmark at reduced sizes and writes one report.
func benchAll(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench all", "[flags]")
	out := fs.String("out", "", "write the report (JSON: machine, load, every case's rounds) to this file")
	rounds := fs.Int("rounds", 5, "rounds of every benchmark")
	only := fs.String("only", "", "run only these benchmarks, comma-separated (rpc, meta, dtl, io, vpic, stage, query, search)")
	cpuprofile := fs.String("cpuprofile", "", "write every benchmark's CPU profiles (its own and its servers') into this directory")
	quick := fs.Bool("quick", false, "tiny sizes: checks that every benchmark runs (seconds); its figures mean nothing")
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, `Usage: pdc bench all [flags]

Runs every benchmark (rpc, meta, dtl, io, vpic, stage, query, search) at
reduced sizes, all rounds included, in under 10 minutes on 2 cores, prints
the table and writes one report for pdc bench compare. Not soak (a crash
loop, not a figure: pdc bench soak) nor hosts (needs root and a bed of
network namespaces: pdc bench hosts).

`)
		fs.SetOutput(e.stderr)
		fs.PrintDefaults()
	}
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench all: unexpected argument %q: %w", fs.Arg(0), errUsage)
	}
	if *rounds < 1 {
		return fmt.Errorf("bench all: --rounds %d: want at least 1: %w", *rounds, errUsage)
	}
	chosen, err := selectBenches(*only)
	if err != nil {
		return err
	}
	if *out != "" {
		// Fail now, not after ten minutes of measuring.
		if st, err := os.Stat(filepath.Dir(*out)); err != nil || !st.IsDir() {
			return fmt.Errorf("bench all: --out %s: its directory does not exist: %w", *out, errUsage)
		}
	}
	rep := bench.Report{Format: bench.ReportFormat, Machine: bench.ThisMachine(), Args: append([]string{"bench", "all"}, args...), Rounds: *rounds}
	rep.Load.Before = bench.ReadLoad()
	cpu0 := bench.ReadCPU()
	t0 := time.Now()
	fmt.Fprintf(e.stderr, "bench all: %s, %s each; before: %s\n", count(len(chosen), "benchmark", "benchmarks"), count(*rounds, "round", "rounds"), rep.Load.Before)
	if err := runAll(ctx, e, &rep, chosen, *quick, *rounds, *cpuprofile); err != nil {
		return err
	}
	rep.Load.After, rep.Load.Others = bench.ReadLoad(), cpu0.Others(bench.ReadCPU())
	rep.Seconds = time.Since(t0).Seconds()
	if *only == "" {
		for _, m := range missingTargets(rep.Cases()) {
			fmt.Fprintf(e.stderr, "bench all: no case matches target %s\n", m)
		}
	}
	if err := bench.WriteSummaryTable(e.stdout, rep.Cases()); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "bench all: %s in %s; before: %s; after: %s%s\n", count(len(rep.Cases()), "case", "cases"), time.Since(t0).Round(time.Second), rep.Load.Before, rep.Load.After, othersText(rep.Load.Others))
	if w := rep.Load.Warning(); w != "" {
		fmt.Fprintf(e.stderr, "bench all: %s\n", w)
	}
	if *out != "" {
		return writeAllReport(e, &rep, *out)
	}
	return nil
}

// selectBenches is the benchmarks --only names, in its order (all of
// them without it).
func selectBenches(only string) ([]allBench, error) {
	if only == "" {
		return allBenches, nil
	}
	var chosen []allBench
	for _, n := range strings.Split(only, ",") {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(allBenches, func(b allBench) bool { return b.name == n })
		if i < 0 {
			return nil, fmt.Errorf("bench all: --only: unknown benchmark %q (known: rpc, meta, dtl, io, vpic, stage, query, search): %w", n, errUsage)
		}
		chosen = append(chosen, allBenches[i])
	}
	return chosen, nil
}

// runAll runs the benchmarks chosen one after the other, each's summaries
// and load going into its report in rep.
func runAll(ctx context.Context, e *env, rep *bench.Report, chosen []allBench, quick bool, rounds int, cpuprofile string) error {
	sub := *e
	var cur *bench.BenchmarkReport
	sub.benchSink = func(name string, load bench.LoadSpan, ss []bench.Summary) {
		cur.Load, cur.Cases = load, ss
	}
	for _, b := range chosen {
		bargs := b.args
		if quick {
			bargs = b.quick
		}
		bargs = append(slices.Clone(bargs), "--rounds", strconv.Itoa(rounds))
		if cpuprofile != "" {
			bargs = append(bargs, "--cpuprofile", cpuprofile)
		}
		rep.Benchmarks = append(rep.Benchmarks, bench.BenchmarkReport{Name: b.name, Args: append([]string{"bench", b.name}, bargs...)})
		cur = &rep.Benchmarks[len(rep.Benchmarks)-1]
		bt := time.Now()
		fmt.Fprintf(e.stderr, "bench all: pdc bench %s %s\n", b.name, strings.Join(bargs, " "))
		if err := b.run(ctx, &sub, bargs); err != nil {
			return fmt.Errorf("bench all: %w", err)
		}
		cur.Seconds = time.Since(bt).Seconds()
	}
	return nil
}

// writeAllReport writes rep to the file out, atomically.
func writeAllReport(e *env, rep *bench.Report, out string) error {
	b, err := json.MarshalIndent(rep, "", " ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(out, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench all: --out: %w", err)
	}
	fmt.Fprintf(e.stderr, "bench all: report in %s\n", out)
	return nil
}

// missingTargets lists the patterns of AllTargets no case matches.
func missingTargets(ss []bench.Summary) []string {
	var out []string
	for _, t := range AllTargets {
		re := regexp.MustCompile(t)
		if !slices.ContainsFunc(ss, func(s bench.Summary) bool { return re.MatchString(s.Key()) }) {
			out = append(out, t)
		}
	}
	return out
}

// benchCompare prints what moved between two reports.
func benchCompare(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench compare", "OLD.json NEW.json")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("bench compare: want two reports, OLD and NEW: %w", errUsage)
	}
	var reps [2]*bench.Report
	for i, p := range fs.Args() {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("bench compare: %w", err)
		}
		reps[i], err = bench.ReadReport(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("bench compare: %s: %w", p, err)
		}
	}
	for i, r := range reps {
		if r.Machine.Cores > 0 {
			fmt.Fprintf(e.stderr, "%s: %s, %s, %s, revision %s, %s; load %.2f before, %.2f after\n", fs.Arg(i), r.Machine.CPU, count(r.Machine.Cores, "core", "cores"),
				r.Machine.Go, r.Machine.Revision, r.Machine.Date.Format(time.RFC3339), r.Load.Before.Load1, r.Load.After.Load1)
			if w := r.Load.Warning(); w != "" {
				fmt.Fprintf(e.stderr, "%s: %s\n", fs.Arg(i), w)
			}
		}
	}
	return bench.WriteCompare(e.stdout, bench.Compare(reps[0], reps[1]))
}
