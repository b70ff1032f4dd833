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

	"github.com/pdcgo/pdc/internal/bench"
)

func benchQuery(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench query", "[flags]")
	bo := addBenchOpts(fs, "query")
	serversFlag := fs.String("servers", "2", "server processes per cluster, comma-separated")
	sizeFlag := fs.String("size", "256MiB", "object size")
	partsFlag := fs.String("partitions", "region-static,region-dynamic", "partition strategies, comma-separated")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	// Each of --rounds calls bench.Query once, which writes the object
	// (not timed) and times each query once next to its plain read.
	cfg := bench.QueryConfig{Rounds: 1, Progress: func(r bench.Result) {
		fmt.Fprintf(e.stderr, "%s: %s: %.2f %s (%.2f of %s)\n", r.Bench, r.Case, r.Value, r.Unit, r.Ratio, r.Ceiling)
	}}
	var err error
	if cfg.ObjectSize, err = parseSize(*sizeFlag); err != nil {
		return fmt.Errorf("bench query: --size: %w: %w", err, errUsage)
	}
	for _, s := range strings.Split(*partsFlag, ",") {
		p, err := parsePartition(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("bench query: --partitions: %w: %w", err, errUsage)
		}
		cfg.Partitions = append(cfg.Partitions, p)
	}
	servers, err := parseCounts(*serversFlag)
	if err != nil {
		return fmt.Errorf("bench query: --servers: %w: %w", err, errUsage)
	}
	run, err := bo.begin(e)
	if err != nil {
		return err
	}
	defer run.close()
	dir, err := os.MkdirTemp("", "pdc-bench-query-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, n := range servers {
		c := cfg
		c.Label = fmt.Sprintf("%d server", n)
		if n > 1 {
			c.Label += "s"
		}
		sub := filepath.Join(dir, strconv.Itoa(n))
		o := upOptions{n: n, tmpdir: filepath.Join(sub, "tmp"), datadir: filepath.Join(sub, "data"), roles: "both", secret: true, timeout: time.Minute,
			cpuprofile: run.serverProfile()}
		if _, err := up(ctx, e.stderr, o); err != nil {
			return fmt.Errorf("bench query: %w", err)
		}
		c.TmpDir = o.tmpdir
		err := run.rounds(ctx, func(ctx context.Context, _ int) ([]bench.Result, error) { return bench.Query(ctx, c) })
		down(context.Background(), io.Discard, o.tmpdir, time.Minute)
		if err != nil {
			return fmt.Errorf("bench query (%s): %w", c.Label, err)
		}
	}
	return run.finish()
}
