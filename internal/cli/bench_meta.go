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
	"github.com/pdcgo/pdc/region"
)

func benchMeta(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench meta", "[flags]")
	bo := addBenchOpts(fs, "meta")
	n := fs.Int("n", 20000, "objects per case and round")
	procs := fs.Int("procs", 8, "client processes for the parallel case")
	durs := fs.String("durability", "process,sync", "durability settings to measure, comma-separated")
	restartObjects := fs.Int("restart-objects", 1000000, "objects the server holds for the restart and memory figures, measured once after the rounds (0: skip)")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	run, err := bo.begin(e)
	if err != nil {
		return err
	}
	defer run.close()
	rawAddr, stopEcho, err := startEcho(ctx)
	if err != nil {
		return fmt.Errorf("bench meta: %w", err)
	}
	defer stopEcho()
	for _, d := range strings.Split(*durs, ",") {
		if err := benchMetaOnce(ctx, e, run, rawAddr, strings.TrimSpace(d), *n, *procs, *restartObjects); err != nil {
			return fmt.Errorf("bench meta (%s): %w", d, err)
		}
		*restartObjects = 0 // once is enough
	}
	return run.finish()
}

func benchMetaOnce(ctx context.Context, e *env, run *benchRun, rawAddr, durability string, n, procs, restartObjects int) error {
	dir, err := os.MkdirTemp("", "pdc-bench-meta-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tmpdir, datadir := filepath.Join(dir, "tmp"), filepath.Join(dir, "data")
	o := upOptions{n: 1, tmpdir: tmpdir, datadir: datadir, roles: "both", secret: true, timeout: time.Minute, durability: durability,
		cpuprofile: run.serverProfile()}
	if _, err := up(ctx, e.stderr, o); err != nil {
		return err
	}
	defer down(context.Background(), io.Discard, tmpdir, time.Minute)
	run.started(tmpdir)
	err = run.rounds(ctx, func(ctx context.Context, round int) ([]bench.Result, error) {
		cont := fmt.Sprintf("parallel-%d", time.Now().UnixNano())
		return bench.Meta(ctx, bench.MetaConfig{
			TmpDir: tmpdir, RawAddr: rawAddr, N: n, Procs: procs, Label: durability, Want: run.want(),
			Parallel: func(ctx context.Context, procs, each int) (time.Duration, error) {
				return parallelCreates(ctx, tmpdir, cont, procs, each)
			},
			RawParallel: func(ctx context.Context, procs, each int) (time.Duration, error) {
				return parallelRaw(ctx, rawAddr, procs, each)
			},
		})
	})
	if err != nil || restartObjects == 0 {
		return err
	}
	r, err := benchRestart(ctx, o, restartObjects)
	run.add(r...)
	return err
}

// parallelCreates runs procs `pdc bench-meta-client` processes, releases
// them together once all are connected, and waits for them. It returns the
// time from the release: starting a process is not a create.
func parallelCreates(ctx context.Context, tmpdir, cont string, procs, each int) (time.Duration, error) {
	args := make([][]string, procs)
	for i := range args {
		args[i] = []string{"bench-meta-client", "--tmpdir", tmpdir, "--cont", cont,
			"--prefix", fmt.Sprintf("%s-p%d", cont, i), "--n", strconv.Itoa(each)}
	}
	return runProcs(ctx, args)
}

// parallelRaw is parallelCreates' ceiling: procs `pdc bench-raw-client`
// processes making each raw round trips to the echo server at addr.
func parallelRaw(ctx context.Context, addr string, procs, each int) (time.Duration, error) {
	args := make([][]string, procs)
	for i := range args {
		args[i] = []string{"bench-raw-client", "--addr", addr, "--n", strconv.Itoa(each)}
	}
	return runProcs(ctx, args)
}

func runBenchRawClient(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench-raw-client", "")
	addr := fs.String("addr", "", "")
	n := fs.Int("n", 0, "")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	// Connected and warmed before the start signal, as the metadata
	// clients are.
	if err := bench.RawRoundTrips(ctx, *addr, 64, *n, func() error { return awaitGo(e) }); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "done")
	return nil
}

func runBenchMetaClient(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench-meta-client", "")
	tmpdir := fs.String("tmpdir", "", "")
	cont := fs.String("cont", "", "")
	prefix := fs.String("prefix", "", "")
	n := fs.Int("n", 0, "")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	c, err := client.Connect(ctx, client.WithTmpDir(*tmpdir))
	if err != nil {
		return err
	}
	defer c.Close()
	ct, _, err := c.CreateContainer(ctx, *cont, client.Persistent)
	if err != nil {
		return err
	}
	props := client.ObjectProps{Dims: []uint64{1024, 1024}, Type: region.Float}
	// Warm the connection before the start signal.
	if _, err := c.Ping(ctx, 0); err != nil {
		return err
	}
	if err := awaitGo(e); err != nil {
		return err
	}
	for i := range *n {
		if _, err := ct.CreateObject(ctx, fmt.Sprintf("%s-%08d", *prefix, i), props); err != nil {
			return err
		}
	}
	fmt.Fprintln(e.stdout, "done")
	return nil
}

// benchRestart fills the server up to total objects, restarts it, and
// reports the restart time, the server's memory per object and the time
// a scrape of its metrics takes.
func benchRestart(ctx context.Context, o upOptions, total int) ([]bench.Result, error) {
	c, err := client.Connect(ctx, client.WithTmpDir(o.tmpdir))
	if err != nil {
		return nil, err
	}
	ct, _, err := c.CreateContainer(ctx, "fill", client.Persistent)
	if err != nil {
		c.Close()
		return nil, err
	}
	props := client.ObjectProps{Dims: []uint64{1024, 1024}, Type: region.Float}
	const per = 8192
	for i := 0; i < total; i += per {
		specs := make([]client.ObjectSpec, min(per, total-i))
		for j := range specs {
			specs[j] = client.ObjectSpec{Name: fmt.Sprintf("fill-%09d", i+j), Props: props}
		}
		objs, err := ct.CreateObjects(ctx, specs)
		if err != nil {
			c.Close()
			return nil, err
		}
		for _, ob := range objs {
			_ = ob.Close(ctx)
		}
	}
	c.Close()
	if _, err := down(ctx, io.Discard, o.tmpdir, time.Minute); err != nil {
		return nil, err
	}
	// Serving metrics, for the scrape figure; the empty restart, the
	// ceiling, serves them too.
	o.metricsAddr = "127.0.0.1:0"
	t0 := time.Now()
	procs, err := up(ctx, io.Discard, o)
	if err != nil {
		return nil, err
	}
	restart := time.Since(t0)
	// Touch a spread of objects, as clients would after a restart.
	c, err = client.Connect(ctx, client.WithTmpDir(o.tmpdir))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for i := 0; i < total; i += max(total/1000, 1) {
		ob, err := c.OpenObject(ctx, fmt.Sprintf("fill-%09d", i))
		if err != nil {
			return nil, fmt.Errorf("after restart: %w", err)
		}
		_ = ob.Close(ctx)
	}
	rss := rssBytes(procs[0].PID)
	r3, err := scrapeFigure(ctx, o.tmpdir, total)
	if err != nil {
		return nil, err
	}
	// The figures' ceilings: a restart of an empty server, and PDC's bound.
	empty := emptyRestart(ctx, o)
	r1 := bench.Result{Bench: "meta", Case: fmt.Sprintf("restart holding %d objects", total), Value: restart.Seconds(), Unit: "s",
		Ceiling: "restart of an empty server", CeilingValue: empty.Seconds(), Target: "< 3 s"}
	if restart > 0 {
		r1.Ratio = empty.Seconds() / restart.Seconds()
	}
	per1 := float64(rss) / float64(total)
	// The RSS goes in the target column: a case's name stays the same
	// from run to run, for bench compare.
	r2 := bench.Result{Bench: "meta", Case: fmt.Sprintf("server memory per object (%d objects)", total), Value: per1,
		Unit: "B", Ceiling: "target bound", CeilingValue: 1024, Ratio: 1024 / per1, Target: fmt.Sprintf("< 1 KiB (RSS %d MiB)", rss>>20)}
	return []bench.Result{r1, r2, r3}, nil
}

func emptyRestart(ctx context.Context, o upOptions) time.Duration {
	dir, err := os.MkdirTemp("", "pdc-bench-empty-")
	if err != nil {
		return 0
	}
	defer os.RemoveAll(dir)
	o.tmpdir, o.datadir = filepath.Join(dir, "tmp"), filepath.Join(dir, "data")
	// The downs run even once ctx ends (Ctrl-C): the directory is
	// removed on return, and servers left running would have no list to
	// be stopped by.
	stop := context.WithoutCancel(ctx)
	if _, err := up(ctx, io.Discard, o); err != nil {
		return 0
	}
	_, _ = down(stop, io.Discard, o.tmpdir, time.Minute)
	t0 := time.Now()
	if _, err := up(ctx, io.Discard, o); err != nil {
		return 0
	}
	d := time.Since(t0)
	_, _ = down(stop, io.Discard, o.tmpdir, time.Minute)
	return d
}

// rssBytes reads a process's resident set size from /proc.
func rssBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
