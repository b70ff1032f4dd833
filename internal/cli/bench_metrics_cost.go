package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metrics"
)

// benchMetricsCost is bench rpc --metrics-cost: the rpc cases against a
// server that serves metrics, each case's calls alternated in short turns
// with the same calls against one that does not, so that what metrics
// cost shows as the ratio in spite of the machine's drift, which separate
// runs with and without --metrics cannot resolve. The server with metrics
// is scraped every second meanwhile, as Prometheus would.
func benchMetricsCost(ctx context.Context, e *env, run *benchRun, dir string, dur time.Duration, size int) error {
	rawAddr, stopEcho, err := startEcho(ctx)
	if err != nil {
		return err
	}
	defer stopEcho()
	type side struct {
		tmpdir, addr string
		secret       []byte
	}
	var sides [2]side
	for i, name := range []string{"without", "with"} {
		s := &sides[i]
		s.tmpdir = filepath.Join(dir, name, "tmp")
		o := upOptions{n: 1, tmpdir: s.tmpdir, datadir: filepath.Join(dir, name, "data"), roles: "both", secret: true, timeout: time.Minute,
			cpuprofile: run.serverProfile()}
		if name == "with" {
			o.metricsAddr = "127.0.0.1:0"
		}
		procs, err := up(ctx, e.stderr, o)
		if err != nil {
			return err
		}
		defer down(context.Background(), io.Discard, s.tmpdir, 30*time.Second)
		run.started(s.tmpdir)
		if s.secret, err = cluster.SecretIn(s.tmpdir); err != nil {
			return err
		}
		s.addr = procs[0].Addr
	}
	m, err := cluster.Dir{Path: sides[1].tmpdir}.ReadMetricsAddr(0)
	if err != nil {
		return fmt.Errorf("the metrics address: %w", err)
	}
	stop := scrapeEvery(ctx, "http://"+m.Addr+metrics.Path, time.Second)
	defer stop()
	return run.rounds(ctx, func(ctx context.Context, _ int) ([]bench.Result, error) {
		return bench.RPC(ctx, bench.RPCConfig{RawAddr: rawAddr, RPCAddr: sides[1].addr, Secret: sides[1].secret,
			Base: sides[0].addr, BaseSecret: sides[0].secret, Label: "with metrics", BaseLabel: "without metrics",
			BaseTarget: "ratio >= 0.98 (metrics cost < 2%)", Duration: dur, Size: size, Want: run.want()})
	})
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
