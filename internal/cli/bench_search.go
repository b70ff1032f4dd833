package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pdcgo/pdc/internal/bench"
)

func benchSearch(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench search", "[flags]")
	bo := addBenchOpts(fs, "search")
	objects := fs.Int("objects", 1000000, "objects, each with 4 tags (a power of ten, 10000 to 10000000)")
	servers := fs.Int("servers", 4, "server processes")
	samples := fs.Int("samples", 200, "queries per case and round through the index")
	scanSamples := fs.Int("scan-samples", 5, "queries per case and round by scan")
	putCost := fs.Bool("put-cost", true, "also measure tag puts on a cluster without the index")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	run, err := bo.begin(e)
	if err != nil {
		return err
	}
	defer run.close()
	dir, err := os.MkdirTemp("", "pdc-bench-search-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rawAddr, stopEcho, err := startEcho(ctx)
	if err != nil {
		return fmt.Errorf("bench search: %w", err)
	}
	defer stopEcho()
	start := func(name string, noIndex, noSuffix bool) (string, error) {
		o := upOptions{n: *servers, tmpdir: filepath.Join(dir, name, "tmp"), datadir: filepath.Join(dir, name, "data"),
			roles: "both", secret: true, timeout: time.Minute, noIndex: noIndex, noSuffixTree: noSuffix, cpuprofile: run.serverProfile()}
		if _, err := up(ctx, e.stderr, o); err != nil {
			return "", err
		}
		run.started(o.tmpdir)
		return o.tmpdir, nil
	}
	tmpdir, err := start("indexed", false, false)
	if err != nil {
		return fmt.Errorf("bench search: %w", err)
	}
	defer down(context.Background(), io.Discard, tmpdir, time.Minute)
	cfg := bench.SearchConfig{TmpDir: tmpdir, RawAddr: rawAddr, Objects: *objects, Samples: *samples, ScanSamples: *scanSamples, Rounds: bo.rounds,
		Progress: func(format string, args ...any) {
			fmt.Fprintf(e.stderr, "bench search: "+format+"\n", args...)
		}}
	if *putCost {
		plain, err := start("plain", true, false)
		if err != nil {
			return fmt.Errorf("bench search: %w", err)
		}
		defer down(context.Background(), io.Discard, plain, time.Minute)
		noSuffix, err := start("nosuffix", false, true)
		if err != nil {
			return fmt.Errorf("bench search: %w", err)
		}
		defer down(context.Background(), io.Discard, noSuffix, time.Minute)
		cfg.PlainTmpDir, cfg.NoSuffixTmpDir = plain, noSuffix
	}
	// The data set is loaded once; Search runs the rounds itself.
	rs, err := bench.Search(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench search: %w", err)
	}
	run.add(rs...)
	return run.finish()
}
