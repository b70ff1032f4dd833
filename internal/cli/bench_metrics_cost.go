package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metrics"
)

// benchMetricsCost is bench rpc --metrics-cost: the rpc cases against a
// server that serves metrics, each case's calls alternated in short turns
// with the same calls against one that does not, so that what metrics
// cost shows as the ratio in spite of the machine's drift, which separate
// runs with and without --metrics cannot resolve. The server with metrics
// is scraped every second meanwhile, as Prometheus would. The servers
// run on a CPU of their own, apart from this process (pinApart).
func benchMetricsCost(ctx context.Context, e *env, run *benchRun, dir string, dur time.Duration, size int) error {
	if note, err := pinApart(); err != nil {
		return err
	} else if note != "" {
		fmt.Fprintf(e.stderr, "bench rpc --metrics-cost: %s\n", note)
	}
	rawAddr, stopEcho, err := startEcho(ctx)
	if err != nil {
		return err
	}
	defer stopEcho()
	sides, stop, err := startCostClusters(ctx, e, run, dir, upOptions{n: 1, roles: "both", secret: true, timeout: time.Minute})
	defer stop()
	if err != nil {
		return err
	}
	return run.rounds(ctx, func(ctx context.Context, _ int) ([]bench.Result, error) {
		return bench.RPC(ctx, bench.RPCConfig{RawAddr: rawAddr, RPCAddr: sides[1].addr, Secret: sides[1].secret,
			Base: sides[0].addr, BaseSecret: sides[0].secret, Label: "with metrics", BaseLabel: "without metrics",
			BaseTarget: "ratio >= 0.98 (metrics cost < 2%)", Duration: dur, Size: size, Want: run.want()})
	})
}

// costSide is one of the two clusters of a --metrics-cost run.
type costSide struct {
	tmpdir, addr string // rank 0's address
	secret       []byte
}

// startCostClusters starts the two clusters of a --metrics-cost run as o
// says, under dir: [0] without metrics, [1] with them, scraped every
// second. stop stops the scrapes and both clusters; it is to be called
// even on an error.
func startCostClusters(ctx context.Context, e *env, run *benchRun, dir string, o upOptions) (sides [2]costSide, stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, f := range slices.Backward(stops) {
			f()
		}
	}
	for i, name := range []string{"without", "with"} {
		s := &sides[i]
		s.tmpdir = filepath.Join(dir, name, "tmp")
		o.tmpdir, o.datadir, o.cpuprofile, o.metricsAddr = s.tmpdir, filepath.Join(dir, name, "data"), run.serverProfile(), ""
		if name == "with" {
			o.metricsAddr = "127.0.0.1:0"
		}
		procs, err := up(ctx, e.stderr, o)
		if err != nil {
			return sides, stop, err
		}
		stops = append(stops, func() { _, _ = down(context.Background(), io.Discard, s.tmpdir, time.Minute) })
		run.started(s.tmpdir)
		if s.secret, err = cluster.SecretIn(s.tmpdir); err != nil {
			return sides, stop, err
		}
		s.addr = procs[0].Addr
	}
	m, err := cluster.Dir{Path: sides[1].tmpdir}.ReadMetricsAddr(0)
	if err != nil {
		return sides, stop, fmt.Errorf("the metrics address: %w", err)
	}
	stops = append(stops, scrapeEvery(ctx, "http://"+m.Addr+metrics.Path, time.Second))
	return sides, stop, nil
}

// benchIOMetricsCost is bench io --metrics-cost: each round runs the io
// cases once on a cluster of n servers without metrics and once on one
// with them (scraped every second), which goes first alternating from
// round to round, and reports each case with metrics against the same
// case without as its ceiling.
func benchIOMetricsCost(ctx context.Context, e *env, run *benchRun, cfg bench.IOConfig, n int, durability string) error {
	if note, err := pinApart(); err != nil {
		return err
	} else if note != "" {
		fmt.Fprintf(e.stderr, "bench io --metrics-cost: %s\n", note)
	}
	dir, err := os.MkdirTemp("", "pdc-bench-io-cost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rawTCP, stopRaw, err := startChild(ctx, "bench-raw-source")
	if err != nil {
		return err
	}
	defer stopRaw()
	sides, stop, err := startCostClusters(ctx, e, run, dir, upOptions{n: n, roles: "both", secret: true, timeout: time.Minute, durability: durability})
	defer stop()
	if err != nil {
		return err
	}
	cfg.RawTCP, cfg.Transport, cfg.Rounds, cfg.Progress = rawTCP, "stream", 1, nil
	return run.rounds(ctx, func(ctx context.Context, round int) ([]bench.Result, error) {
		return ioCostRound(ctx, cfg, [2]string{sides[0].tmpdir, sides[1].tmpdir}, round, bench.IO)
	})
}

// ioCostRound is one round of bench io --metrics-cost: the cases measured
// by measure (bench.IO) on the cluster in tmpdirs[0], without metrics, and
// on the one in tmpdirs[1], with them, the first going first in even
// rounds, each case with metrics reported against the same case without.
func ioCostRound(ctx context.Context, cfg bench.IOConfig, tmpdirs [2]string, round int,
	measure func(context.Context, bench.IOConfig) ([]bench.Result, error)) ([]bench.Result, error) {
	// Both sides' cases are named as they are reported, "io (with
	// metrics): ...": --case (cfg.Want) then picks the cases measured by
	// the names it keeps. Named "io: ...", a --case matching what is
	// reported measured nothing, and one matching what is measured kept
	// nothing.
	cfg.Label = "with metrics"
	var got [2][]bench.Result
	for _, i := range [2][2]int{{0, 1}, {1, 0}}[round%2] {
		c := cfg
		c.TmpDir = tmpdirs[i]
		rs, err := measure(ctx, c)
		if err != nil {
			return nil, err
		}
		got[i] = rs
	}
	return pairCost(got[1], got[0], "io ("+cfg.Label+")", "the same, without metrics", "ratio >= 0.98 (metrics cost < 2%)"), nil
}

// pairCost reports each result of with against the result of the same
// case in without as its ceiling. Every io figure is a rate.
func pairCost(with, without []bench.Result, name, ceiling, target string) []bench.Result {
	base := map[string]float64{}
	for _, r := range without {
		base[r.Case] = r.Value
	}
	var out []bench.Result
	for _, r := range with {
		b, ok := base[r.Case]
		if !ok || b <= 0 {
			continue
		}
		out = append(out, bench.Result{Bench: name, Case: r.Case, Value: r.Value, Unit: r.Unit, Ceiling: ceiling, CeilingValue: b, Ratio: r.Value / b, Target: target})
	}
	return out
}

// scrapeEvery GETs url every interval, reading the whole body, until the
// returned stop is called (it waits). Failures are the benchmark's
// business only if they stop the scrapes' cost from counting: they are
// ignored.
func scrapeEvery(ctx context.Context, url string, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: interval}
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, _, _ = timedGet(ctx, hc, url)
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		hc.CloseIdleConnections()
	}
}

// pinApart, unless $PDC_SERVER_CPUS says where servers run, pins the
// servers this process starts to the last CPU it may use and this process
// to the others. Unpinned, each server's threads land where the
// scheduler first puts them, next to the client or not, and sequential
// round trips to the two differ by up to 10% for that alone: two
// identical servers measured this way came out at 0.90 of each other,
// pinned at 0.99-1.00.
func pinApart() (string, error) {
	if os.Getenv(cluster.ServerCPUsEnv) != "" {
		return "", nil
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() < 2 {
		return "", err
	}
	last := -1
	for cpu := range 1024 {
		if set.IsSet(cpu) {
			last = cpu
		}
	}
	set.Clear(last)
	// Every thread of this process: a thread made later takes its
	// maker's mask. Again until a pass finds no thread it had not seen,
	// for threads made by unpinned ones while a pass ran.
	seen := map[int]bool{}
	for pass := 0; ; pass++ {
		tids, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return "", err
		}
		fresh := false
		for _, t := range tids {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || seen[tid] {
				continue
			}
			seen[tid], fresh = true, true
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return "", fmt.Errorf("pin this process apart from the servers: %w", err)
			}
		}
		if !fresh || pass == 100 {
			break
		}
	}
	if err := os.Setenv(cluster.ServerCPUsEnv, strconv.Itoa(last)); err != nil {
		return "", err
	}
	return fmt.Sprintf("servers on CPU %d, this process on the others ($%s chooses otherwise)", last, cluster.ServerCPUsEnv), nil
}
