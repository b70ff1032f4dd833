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
		return fmt.Errorf("bench vpic: --partition: %w", err)
	}
	procs, err := parseCounts(*procsFlag)
	if err != nil {
		return fmt.Errorf("bench vpic: --procs: %w", err)
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
	label := fmt.Sprintf("vpic (%d servers)", *servers)
	rawTCP := ext.raw
	if ext.cluster != "" {
		label = "vpic (" + ext.label + ")"
	} else {
		var stopRaw func()
		rawTCP, stopRaw, err = startChild(ctx, "bench-raw-source", "--unix", filepath.Join(dir, "raw.sock"))
		if err != nil {
			return fmt.Errorf("bench vpic: %w", err)
		}
		defer stopRaw()
		o := upOptions{n: *servers, tmpdir: tmpdir, datadir: datadir, roles: "both", secret: true, timeout: time.Minute, durability: "process",
			cpuprofile: run.serverProfile()}
		if _, err := up(ctx, e.stderr, o); err != nil {
			return fmt.Errorf("bench vpic: %w", err)
		}
		defer down(context.Background(), io.Discard, tmpdir, time.Minute)
		run.started(tmpdir)
	}
	c, err := client.Connect(ctx, client.WithTmpDir(tmpdir))
	if err != nil {
		return fmt.Errorf("bench vpic: %w", err)
	}
	defer c.Close()
	ct, _, err := c.CreateContainer(ctx, "vpic", client.Persistent)
	if err != nil {
		return fmt.Errorf("bench vpic: %w", err)
	}
	writer, reader := "VPIC-IO write", "BD-CATS read, every value checked"
	if cprogs != nil {
		label = strings.Replace(label, "vpic", "vpic C", 1)
		writer, reader = "VPIC-IO write (C, "+vpicCWriter+")", "BD-CATS read, every value checked (C, "+vpicCReader+")"
	}
	// One round: every process count, each step's phases next to the raw
	// ceiling measured the same way right before them: as many client
	// processes, started afresh, each with its buffer touched before the
	// start signal, each moving its rank's bytes over its own connection,
	// timed from the signal until the last is done.
	err = run.rounds(ctx, func(ctx context.Context, _ int) ([]bench.Result, error) {
		var rs []bench.Result
		for _, p := range procs {
			what := fmt.Sprintf(", %d procs x %d particles x 8 vars", p, *n)
			if !run.want().Any(label, writer+what, reader+what) {
				continue
			}
			bytes := int64(p) * int64(*n) * 4 * int64(len(bench.VPICVars))
			rawArgs := make([][]string, p)
			for r := range rawArgs {
				rawArgs[r] = []string{"bench-vpic-raw-client", "--addr", rawTCP, "--bytes", strconv.FormatUint(*n*4*uint64(len(bench.VPICVars)), 10)}
			}
			times := map[string][]time.Duration{}
			for step := range *steps {
				d, err := runProcs(ctx, rawArgs)
				if err != nil {
					return nil, fmt.Errorf("%d processes, step %d, raw tcp: %w", p, step, err)
				}
				times["raw"] = append(times["raw"], d)
				run := fmt.Sprintf("%d-%d-step%d", p, time.Now().UnixNano(), step)
				if cprogs != nil {
					err = cprogs.create(ctx, run, *n, p, part)
				} else {
					err = bench.VPICCreate(ctx, ct, run, uint64(p)*(*n), part)
				}
				if err != nil {
					return nil, err
				}
				for _, phase := range []string{"write", "read"} {
					ranks := make([]int, p)
					for r := range ranks {
						// BD-CATS reads the particles of the next rank.
						ranks[r] = r
						if phase == "read" {
							ranks[r] = (r + 1) % p
						}
					}
					var d time.Duration
					switch {
					case cprogs != nil && phase == "write":
						d, err = cprogs.phase(ctx, vpicCWriter, run, *n, ranks)
					case cprogs != nil:
						d, err = cprogs.phase(ctx, vpicCReader, run, *n, ranks)
					default:
						args := make([][]string, p)
						for r, rank := range ranks {
							args[r] = []string{"bench-vpic-client", "--tmpdir", tmpdir, "--run", run, "--rank", strconv.Itoa(rank),
								"--n", strconv.FormatUint(*n, 10), "--phase", phase}
						}
						d, err = runProcs(ctx, args)
					}
					if err != nil {
						return nil, fmt.Errorf("%d processes, step %d, %s: %w", p, step, phase, err)
					}
					times[phase] = append(times[phase], d)
				}
				// Untimed: the step's objects are not needed again.
				if err := bench.VPICDelete(ctx, c, run); err != nil {
					return nil, fmt.Errorf("%d processes, step %d: %w", p, step, err)
				}
			}
			raw := float64(bytes) / bench.Median(times["raw"]).Seconds() / 1e9
			for _, phase := range []string{"write", "read"} {
				what := writer
				if phase == "read" {
					what = reader
				}
				rs = append(rs, bench.VPICRate(label, what+fmt.Sprintf(", %d procs x %d particles x 8 vars", p, *n),
					bytes, bench.Median(times[phase]), raw))
			}
		}
		return rs, nil
	})
	if err != nil {
		return fmt.Errorf("bench vpic: %w", err)
	}
	return run.finish()
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
