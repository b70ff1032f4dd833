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
	"github.com/pdcgo/pdc/internal/bench"
)

func benchIO(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench io", "[flags]")
	bo := addBenchOpts(fs, "io")
	serversFlag := fs.String("servers", "1,2", "server processes per cluster, comma-separated")
	sizeFlag := fs.String("size", "1GiB", "object size")
	regionsFlag := fs.String("regions", "64KiB,1MiB,16MiB", "region sizes, comma-separated")
	partsFlag := fs.String("partitions", "object-static,region-static,region-dynamic,region-local", "partition strategies, comma-separated")
	storFlag := fs.String("storage", "offset,region", "storage modes, comma-separated")
	small := fs.Int("small", 65536, "regions of 4 KiB in the start_all case (0: skip)")
	durability := fs.String("durability", "process", "the servers' durability")
	unix := fs.Bool("unix", false, "servers on Unix sockets, measured against a raw Unix socket")
	transport := fs.String("transport", "stream", "how payloads travel: stream (the connection) or shm (shared memory, measured against memcpy)")
	ext := externalFlags(fs)
	cost := fs.Bool("metrics-cost", false, "measure what serving metrics costs: two clusters of the first --servers count, one serving Prometheus metrics (scraped every second) and one not, each round's cases run on both in turn; the ceiling is the cluster without")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	run, err := bo.begin(e)
	if err != nil {
		return err
	}
	defer run.close()
	// bench.IO makes the rounds of each case back to back on one object,
	// each next to its own ceiling (run.within).
	cfg := bench.IOConfig{Small: *small, Want: run.want(), Progress: func(r bench.Result) {
		// The whole matrix takes a while: show each figure as it comes.
		fmt.Fprintf(e.stderr, "%s: %s: %.2f %s (%.2f of %s)\n", r.Bench, r.Case, r.Value, r.Unit, r.Ratio, r.Ceiling)
	}}
	if cfg.Small == 0 {
		cfg.Small = -1
	}
	if err := parseIOMatrix(&cfg, *sizeFlag, *regionsFlag, *partsFlag, *storFlag); err != nil {
		return fmt.Errorf("bench io: %w: %w", err, errUsage)
	}
	servers, err := parseCounts(*serversFlag)
	if err != nil {
		return fmt.Errorf("bench io: --servers: %w: %w", err, errUsage)
	}
	if err := ext.check(); err != nil {
		return fmt.Errorf("bench io: %w", err)
	}
	if *cost && (ext.cluster != "" || *unix || *transport != "stream") {
		// It would measure something else than asked, silently.
		return fmt.Errorf("bench io: --metrics-cost starts clusters of its own, on TCP with payloads on the stream: it takes no --cluster, --unix or --transport other than stream: %w", errUsage)
	}
	if ext.cluster != "" {
		// A cluster someone else started: measure it as it is.
		cfg.TmpDir, cfg.RawTCP, cfg.Transport, cfg.Label = ext.cluster, ext.raw, *transport, ext.label
		err := run.within(ctx, func(ctx context.Context, rounds int) ([]bench.Result, error) {
			cfg.Rounds = rounds
			return bench.IO(ctx, cfg)
		})
		if err != nil {
			return fmt.Errorf("bench io: %w", err)
		}
		return run.finish()
	}
	if *cost {
		if err := benchIOMetricsCost(ctx, e, run, cfg, servers[0], *durability); err != nil {
			return fmt.Errorf("bench io: %w", err)
		}
		return run.finish()
	}
	if err := benchIOLocal(ctx, e, run, cfg, servers, *durability, *unix, *transport); err != nil {
		return err
	}
	return run.finish()
}

// benchIOLocal measures a cluster of each count of servers, started in a
// temporary directory, next to a raw source it starts too.
func benchIOLocal(ctx context.Context, e *env, run *benchRun, cfg bench.IOConfig, servers []int, durability string, unix bool, transport string) error {
	dir, err := os.MkdirTemp("", "pdc-bench-io-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rawSock := filepath.Join(dir, "raw.sock")
	rawShm := filepath.Join(dir, "raw-shm.sock")
	rawTCP, stopRaw, err := startChild(ctx, "bench-raw-source", "--unix", rawSock, "--shm", rawShm)
	if err != nil {
		return fmt.Errorf("bench io: %w", err)
	}
	defer stopRaw()
	cfg.RawTCP = rawTCP
	if unix {
		cfg.RawUnix = rawSock
	}
	switch transport {
	case "stream":
		cfg.Transport = transport // not the default, which is shm on one host
	case "shm":
		cfg.Transport, cfg.RawShm = transport, rawShm
	default:
		return fmt.Errorf("bench io: --transport %q: want stream or shm: %w", transport, pdc.ErrInvalid)
	}
	for i, n := range servers {
		c := ioClusterConfig(cfg, i, n, unix, dir)
		if err := benchIOCluster(ctx, e, run, filepath.Join(dir, strconv.Itoa(n)), n, durability, unix, c); err != nil {
			return fmt.Errorf("bench io (%s): %w", c.Label, err)
		}
	}
	return nil
}

// parseIOMatrix sets the object size and the region sizes, partitions
// and storage modes of cfg from their flags.
func parseIOMatrix(cfg *bench.IOConfig, size, regions, parts, storage string) error {
	var err error
	if cfg.ObjectSize, err = parseSize(size); err != nil {
		return fmt.Errorf("--size: %w", err)
	}
	for _, s := range strings.Split(regions, ",") {
		n, err := parseSize(s)
		if err != nil {
			return fmt.Errorf("--regions: %w", err)
		}
		cfg.Regions = append(cfg.Regions, n)
	}
	for _, s := range strings.Split(parts, ",") {
		p, err := parsePartition(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--partitions: %w", err)
		}
		cfg.Partitions = append(cfg.Partitions, p)
	}
	for _, s := range strings.Split(storage, ",") {
		st, err := parseStorage(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--storage: %w", err)
		}
		cfg.Storages = append(cfg.Storages, st)
	}
	return nil
}

// ioClusterConfig is cfg for the i-th cluster, of n servers: its label,
// and the start_all case and the store floor on the first only (once is
// enough).
func ioClusterConfig(cfg bench.IOConfig, i, n int, unix bool, dir string) bench.IOConfig {
	c := cfg
	c.Label = fmt.Sprintf("%d server", n)
	if n > 1 {
		c.Label += "s"
	}
	if i > 0 {
		c.Small = -1
	} else {
		c.FloorDir = dir
	}
	if unix {
		c.Label += ", unix sockets"
	}
	if c.Transport == "shm" {
		c.Label += ", shm"
	}
	return c
}

func benchIOCluster(ctx context.Context, e *env, run *benchRun, dir string, n int, durability string, unix bool, cfg bench.IOConfig) error {
	tmpdir, datadir := filepath.Join(dir, "tmp"), filepath.Join(dir, "data")
	o := upOptions{n: n, tmpdir: tmpdir, datadir: datadir, roles: "both", secret: true, timeout: time.Minute, durability: durability, unix: unix,
		cpuprofile: run.serverProfile(), metricsAddr: run.metricsAddr()}
	if _, err := up(ctx, e.stderr, o); err != nil {
		return err
	}
	defer down(context.Background(), io.Discard, tmpdir, time.Minute)
	run.started(tmpdir)
	cfg.TmpDir = tmpdir
	return run.within(ctx, func(ctx context.Context, rounds int) ([]bench.Result, error) {
		cfg.Rounds = rounds
		return bench.IO(ctx, cfg)
	})
}

// parsePartition reads a strategy by its name or number.
func parsePartition(s string) (client.Partition, error) {
	for _, p := range bench.Partitions {
		if s == p.String() || s == strconv.Itoa(int(p)) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown partition %q (want object-static, region-static, region-dynamic or region-local): %w", s, pdc.ErrInvalid)
}

// parseStorage reads "offset" or "region".
func parseStorage(s string) (client.Storage, error) {
	switch s {
	case "offset":
		return client.StorageByOffset, nil
	case "region":
		return client.StorageByRegion, nil
	}
	return 0, fmt.Errorf("unknown storage mode %q (want offset or region): %w", s, pdc.ErrInvalid)
}

// parseCounts reads a comma-separated list of positive counts ("1,2,4").
func parseCounts(list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count: %w", s, pdc.ErrInvalid)
		}
		out = append(out, n)
	}
	return out, nil
}
