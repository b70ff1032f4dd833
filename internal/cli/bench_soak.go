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

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/crashloop"
)

func init() {
	register(command{name: "bench-soak-worker", summary: "one client process of bench soak", run: runBenchSoakWorker, hidden: true})
}

// benchSoak runs the crash loop (internal/crashloop) for many cycles:
// real servers and client processes, kill -9 of both mid-operation,
// restarts, every acknowledged operation checked.
func benchSoak(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench soak", "[flags]")
	cycles := fs.Int("cycles", 500, "rounds of work, faults and restart")
	servers := fs.Int("n", 3, "number of servers")
	counts := fs.String("resize", "2,3,4", "server counts a restart picks from at random, comma-separated (region data moves to its new owners); empty: keep -n")
	workers := fs.Int("workers", 3, "client processes per cycle")
	work := fs.Duration("work", 2*time.Second, "how long the clients work in each cycle")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of every random choice (printed, to replay a run)")
	keep := fs.String("dir", "", "keep the cluster's files and the op logs in this directory (default: a temporary one, removed if nothing was found)")
	quiet := fs.Bool("q", false, "print only the summary, not a line per cycle")
	durability := fs.String("durability", "process", "the metadata servers' durability (pdc up --durability): process or sync")
	stop := fs.Bool("stop", false, "stop after the first cycle that finds a violation, keeping the files as it left them")
	dynOver := fs.Bool("dynamic-overwrites", crashloop.DynamicOverwritesSafe, "overwrite region-dynamic and region-local objects under faults (=false: write each of their cells once)")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	var sizes []int
	if *counts != "" {
		for _, s := range strings.Split(*counts, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				return fmt.Errorf("bench soak: --resize %q: want server counts: %w", *counts, errUsage)
			}
			sizes = append(sizes, n)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir := *keep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "pdc-soak-"); err != nil {
			return err
		}
	}
	var out io.Writer = e.stdout
	if *quiet {
		out = io.Discard
	}
	fmt.Fprintf(e.stdout, "soak: %s, %s, %s, seed %d, files in %s\n", count(*cycles, "cycle", "cycles"), count(*servers, "server", "servers"), count(*workers, "client", "clients"), *seed, dir)
	res, err := crashloop.Run(ctx, crashloop.Config{Bin: self, Dir: dir, Cycles: *cycles, Servers: *servers, ServerCounts: sizes,
		Workers: *workers, Work: *work, Seed: *seed, Out: out, DynamicOverwrites: dynOver, StopAtFirst: *stop, Durability: *durability})
	if res != nil {
		for _, p := range res.Problems {
			fmt.Fprintln(e.stdout, p)
		}
		fmt.Fprintln(e.stdout, res.Summary())
	}
	if err != nil {
		return fmt.Errorf("bench soak: %w (files kept in %s)", err, dir)
	}
	if res.Failed() {
		return fmt.Errorf("bench soak: %s, %s (files kept in %s): %w", count(res.Violations(), "violation", "violations"), count(res.ServerDeaths, "server death", "server deaths"), dir, pdc.ErrCorrupt)
	}
	if *keep == "" {
		return os.RemoveAll(dir)
	}
	return nil
}

// runBenchSoakWorker is one client process of the crash loop. It works
// until it is killed, or its stdin closes (its driver is gone).
func runBenchSoakWorker(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench-soak-worker", "[flags]")
	var cfg crashloop.WorkerConfig
	tmpdir := fs.String("tmpdir", e.tmpDirDefault(), "the cluster's tmpdir")
	fs.StringVar(&cfg.Log, "log", "", "op log to append to")
	fs.IntVar(&cfg.Proc, "proc", 0, "process number in the cycle")
	fs.IntVar(&cfg.Cycle, "cycle", 1, "cycle number")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed")
	fs.StringVar(&cfg.Container, "container", "", "container of the objects")
	objects := fs.String("objects", "", "file naming the objects known to exist, one a line")
	fs.IntVar(&cfg.Create, "create", 0, "objects this process may create")
	fs.BoolVar(&cfg.DynamicOverwrites, "dynamic-overwrites", false, "overwrite region-dynamic and region-local objects too")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if *objects != "" {
		b, err := os.ReadFile(*objects)
		if err != nil {
			return err
		}
		cfg.Objects = strings.Fields(string(b))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	// Small pages: a listing walks in many steps while the others work.
	c, err := client.Connect(ctx, client.WithTmpDir(*tmpdir), client.WithPageSize(5))
	if err != nil {
		return err
	}
	defer c.Close()
	cfg.Ready = func() { fmt.Fprintln(e.stdout, "ready") }
	if cfg.Log == "" {
		cfg.Log = filepath.Join(*tmpdir, fmt.Sprintf("soak-%d.log", cfg.Proc))
	}
	return crashloop.Work(ctx, c, cfg)
}
