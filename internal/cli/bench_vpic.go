package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/bench"
)

func init() {
	register(command{name: "bench-vpic-client", summary: "one client process of bench vpic", run: runBenchVPICClient, hidden: true})
	register(command{name: "bench-vpic-raw-client", summary: "one client process of bench vpic's raw ceiling", run: runBenchVPICRawClient, hidden: true})
}

// benchVPIC runs VPIC-IO (each client process writes its particles of 8
// variables) and then BD-CATS (each reads another's particles back and
// checks every value) with 1, 2 and 4 client processes: Go processes
// (bench-vpic-client), or with --c the C programs make capi installs
// (pdc_vpicio, pdc_bdcats; bench_vpic_c.go).
func benchVPIC(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench vpic", "[flags]")
	bo := addBenchOpts(fs, "vpic")
	procsFlag := fs.String("procs", "1,2,4", "client processes per case, comma-separated")
	n := fs.Uint64("n", 4<<20, "particles per client process")
	servers := fs.Int("servers", 2, "server processes")
	steps := fs.Int("steps", 3, "time steps per round: each writes and reads its own 8 objects, next to the raw ceiling; a round reports the median of its steps")
	partFlag := fs.String("partition", "region-static", "partition strategy of the 8 objects")
	useC := fs.Bool("c", false, "run the C VPIC-IO and BD-CATS of libpdc (pdc_vpicio, pdc_bdcats: make capi) instead of Go client processes")
	cPrefix := fs.String("c-prefix", "", "with --c: the folder make capi installed libpdc into (default $PDC_CAPI_PREFIX, else the one this pdc is in, else build/capi)")
	ext := externalFlags(fs)
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if err := ext.check(); err != nil {
		return fmt.Errorf("bench vpic: %w", err)
	}
	part, err := parsePartition(*partFlag)
	if err != nil {
		return fmt.Errorf("bench vpic: --partition: %w: %w", err, errUsage)
	}
	procs, err := parseCounts(*procsFlag)
	if err != nil {
		return fmt.Errorf("bench vpic: --procs: %w: %w", err, errUsage)
	}
	run, err := bo.begin(e)
	if err != nil {
		return err
	}
	defer run.close()
	dir, err := os.MkdirTemp("", "pdc-bench-vpic-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tmpdir, datadir := filepath.Join(dir, "tmp"), filepath.Join(dir, "data")
	if ext.cluster != "" {
		tmpdir = ext.cluster
	}
	var cprogs *vpicC // nil: Go client processes
	if *useC {
		if cprogs, err = newVPICC(e, *cPrefix, tmpdir); err != nil {
			return fmt.Errorf("bench vpic --c: %w", err)
		}
	}
	label, rawTCP, stop, err := vpicCluster(ctx, e, run, ext, *servers, dir, tmpdir, datadir)
	if err != nil {
		return fmt.Errorf("bench vpic: %w", err)
	}
	defer stop()
	c, err := client.Connect(ctx, client.WithTmpDir(tmpdir))
	if err != nil {
		return fmt.Errorf("bench vpic: %w", err)
	}
	defer c.Close()
	ct, _, err := c.CreateContainer(ctx, "vpic", client.Persistent)
	if err != nil {
		return fmt.Errorf("bench vpic: %w", err)
	}
	v := &vpicBench{run: run, c: c, ct: ct, cprogs: cprogs, tmpdir: tmpdir, rawTCP: rawTCP, n: *n, steps: *steps, part: part,
		label: label, writer: "VPIC-IO write", reader: "BD-CATS read, every value checked"}
	if cprogs != nil {
		v.label = strings.Replace(label, "vpic", "vpic C", 1)
		v.writer, v.reader = "VPIC-IO write (C, "+vpicCWriter+")", "BD-CATS read, every value checked (C, "+vpicCReader+")"
	}
	err = run.rounds(ctx, func(ctx context.Context, _ int) ([]bench.Result, error) { return v.round(ctx, procs) })
	if err != nil {
		return fmt.Errorf("bench vpic: %w", err)
	}
	return run.finish()
}

// vpicCluster starts the raw source and a cluster of servers in dir, or
// takes the external one; it returns the bench's label, the raw source's
// address, and how to stop what it started.
func vpicCluster(ctx context.Context, e *env, run *benchRun, ext *external, servers int, dir, tmpdir, datadir string) (string, string, func(), error) {
	if ext.cluster != "" {
		return "vpic (" + ext.label + ")", ext.raw, func() {}, nil
	}
	rawTCP, stopRaw, err := startChild(ctx, "bench-raw-source", "--unix", filepath.Join(dir, "raw.sock"))
	if err != nil {
		return "", "", nil, err
	}
	o := upOptions{n: servers, tmpdir: tmpdir, datadir: datadir, roles: "both", secret: true, timeout: time.Minute, durability: "process",
		cpuprofile: run.serverProfile()}
	if _, err := up(ctx, e.stderr, o); err != nil {
		stopRaw()
		return "", "", nil, err
	}
	run.started(tmpdir)
	stop := func() {
		down(context.Background(), io.Discard, tmpdir, time.Minute)
		stopRaw()
	}
	return fmt.Sprintf("vpic (%d servers)", servers), rawTCP, stop, nil
}

// vpicBench is one run of pdc bench vpic.
type vpicBench struct {
	run    *benchRun
	c      *client.Client
	ct     *client.Container
	cprogs *vpicC // nil: Go client processes
	tmpdir string
	rawTCP string // the raw ceiling's source
	n      uint64 // particles per process
	steps  int
	part   client.Partition
	// label is the bench's name; writer and reader name its phases.
	label, writer, reader string
}

// round measures every process count wanted.
func (v *vpicBench) round(ctx context.Context, procs []int) ([]bench.Result, error) {
	var rs []bench.Result
	for _, p := range procs {
		if !v.run.want().Any(v.label, v.writer+v.what(p), v.reader+v.what(p)) {
			continue
		}
		r, err := v.procsCase(ctx, p)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r...)
	}
	return rs, nil
}

func (v *vpicBench) what(p int) string {
	return fmt.Sprintf(", %d procs x %d particles x 8 vars", p, v.n)
}

// procsCase measures the case of p client processes: each step's phases
// next to the raw ceiling measured the same way right before them: as
// many client processes, started afresh, each with its buffer touched
// before the start signal, each moving its rank's bytes over its own
// connection, timed from the signal until the last is done. Each phase
// reports the median of the steps.
func (v *vpicBench) procsCase(ctx context.Context, p int) ([]bench.Result, error) {
	bytes := int64(p) * int64(v.n) * 4 * int64(len(bench.VPICVars))
	rawArgs := make([][]string, p)
	for r := range rawArgs {
		rawArgs[r] = []string{"bench-vpic-raw-client", "--addr", v.rawTCP, "--bytes", strconv.FormatUint(v.n*4*uint64(len(bench.VPICVars)), 10)}
	}
	times := map[string][]time.Duration{}
	for step := range v.steps {
		d, err := runProcs(ctx, rawArgs)
		if err != nil {
			return nil, fmt.Errorf("%s, step %d, raw tcp: %w", count(p, "process", "processes"), step, err)
		}
		times["raw"] = append(times["raw"], d)
		if err := v.step(ctx, p, step, times); err != nil {
			return nil, err
		}
	}
	raw := float64(bytes) / bench.Median(times["raw"]).Seconds() / 1e9
	var rs []bench.Result
	for _, phase := range []string{"write", "read"} {
		what := v.writer
		if phase == "read" {
			what = v.reader
		}
		rs = append(rs, bench.VPICRate(v.label, what+v.what(p), bytes, bench.Median(times[phase]), raw))
	}
	return rs, nil
}

// step creates the step's 8 objects, times its write and its read phase
// by p processes into times, and deletes the objects, untimed.
func (v *vpicBench) step(ctx context.Context, p, step int, times map[string][]time.Duration) error {
	run := fmt.Sprintf("%d-%d-step%d", p, time.Now().UnixNano(), step)
	var err error
	if v.cprogs != nil {
		err = v.cprogs.create(ctx, run, v.n, p, v.part)
	} else {
		err = bench.VPICCreate(ctx, v.ct, run, uint64(p)*v.n, v.part)
	}
	if err != nil {
		return err
	}
	for _, phase := range []string{"write", "read"} {
		d, err := v.phase(ctx, p, run, phase)
		if err != nil {
			return fmt.Errorf("%s, step %d, %s: %w", count(p, "process", "processes"), step, phase, err)
		}
		times[phase] = append(times[phase], d)
	}
	// Untimed: the step's objects are not needed again.
	if err := bench.VPICDelete(ctx, v.c, run); err != nil {
		return fmt.Errorf("%s, step %d: %w", count(p, "process", "processes"), step, err)
	}
	return nil
}

// phase runs the write or the read of run by p processes, C or Go, and
// returns how long it took.
func (v *vpicBench) phase(ctx context.Context, p int, run, phase string) (time.Duration, error) {
	ranks := make([]int, p)
	for r := range ranks {
		// BD-CATS reads the particles of the next rank.
		ranks[r] = r
		if phase == "read" {
			ranks[r] = (r + 1) % p
		}
	}
	switch {
	case v.cprogs != nil && phase == "write":
		return v.cprogs.phase(ctx, vpicCWriter, run, v.n, ranks)
	case v.cprogs != nil:
		return v.cprogs.phase(ctx, vpicCReader, run, v.n, ranks)
	}
	args := make([][]string, p)
	for r, rank := range ranks {
		args[r] = []string{"bench-vpic-client", "--tmpdir", v.tmpdir, "--run", run, "--rank", strconv.Itoa(rank),
			"--n", strconv.FormatUint(v.n, 10), "--phase", phase}
	}
	return runProcs(ctx, args)
}

func runBenchVPICClient(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench-vpic-client", "")
	tmpdir := fs.String("tmpdir", "", "")
	run := fs.String("run", "", "")
	rank := fs.Uint64("rank", 0, "")
	n := fs.Uint64("n", 0, "")
	phase := fs.String("phase", "write", "")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	c, err := client.Connect(ctx, client.WithTmpDir(*tmpdir))
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := bench.OpenVPICRank(ctx, c, *run, *rank, *n)
	if err != nil {
		return err
	}
	if *phase == "write" {
		r.Fill()
	}
	if err := awaitGo(e); err != nil {
		return err
	}
	if *phase == "write" {
		err = r.Write(ctx, c)
	} else {
		err = r.Fetch(ctx, c)
	}
	if err != nil {
		r.Close(ctx)
		return err
	}
	// Timed up to here, as VPIC-IO and BD-CATS time their transfers:
	// closing flushes (fsyncs) the data, which PDC never does, and the
	// check of every value read costs the client more CPU than the read
	// (about 3 times what 128 MiB takes over raw TCP here). Both come
	// after; runProcs fails the run if this process then fails.
	fmt.Fprintln(e.stdout, "done")
	if *phase == "read" {
		if err := r.Check(); err != nil {
			r.Close(ctx)
			return err
		}
	}
	return r.Close(ctx)
}

// runBenchVPICRawClient is one process of bench vpic's ceiling: set up as
// a bench-vpic-client is (connected, its buffer touched), released by the
// same signal, it fetches its rank's bytes from the raw source.
func runBenchVPICRawClient(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench-vpic-raw-client", "")
	addr := fs.String("addr", "", "")
	n := fs.Int64("bytes", 0, "")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	f, err := bench.DialRawFetcher(ctx, *addr)
	if err != nil {
		return err
	}
	defer f.Close()
	// A small exchange first, as the client's opens are.
	if err := f.Fetch(ctx, make([]byte, 64)); err != nil {
		return err
	}
	buf := make([]byte, *n)
	for i := range buf {
		buf[i] = 0xFF
	}
	if err := awaitGo(e); err != nil {
		return err
	}
	if err := f.Fetch(ctx, buf); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "done")
	return nil
}
