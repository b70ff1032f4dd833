package clienttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/server"
)

// Options shape a cluster. The zero value is one server on this host.
type Options struct {
	// Servers is how many servers to run; default 1, or len(Hosts).
	Servers int
	// Hosts, when set, is the host name each server reports (one per
	// server), so that one process can stand for several nodes: a
	// client on host H treats only the servers of H as local.
	Hosts []string
	// Dir holds the cluster's tmpdir, data and producer directories;
	// default a new temporary directory of the test. Starting again on
	// the Dir of a stopped cluster restarts it on its stores.
	Dir string
	// Staging gives each server a staging producer directory,
	// Cluster.ProducerDir(rank).
	Staging bool
	// SecretFile, when set, is the cluster secret's file; clients then
	// need it too (client.WithSecretFile).
	SecretFile string
	// Logger receives the servers' logs; default discarded.
	Logger *slog.Logger
	// StartTimeout bounds the start; default one minute.
	StartTimeout time.Duration
}

// Cluster is a running in-process cluster.
type Cluster struct {
	tb   testing.TB
	dir  string
	opts Options
	// stops[rank] stops the server and waits for it; errs[rank] is what
	// its Run returned.
	stops []func()
	errs  []error
}

// Start runs a cluster for tb and returns once every server is ready. The
// cluster stops when tb's test ends; a server that failed fails the test.
func Start(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	n := o.Servers
	if n == 0 {
		n = max(len(o.Hosts), 1)
	}
	if len(o.Hosts) != 0 && len(o.Hosts) != n {
		tb.Fatalf("clienttest: %d hosts for %d servers: want one per server", len(o.Hosts), n)
	}
	if o.Dir == "" {
		o.Dir = tb.TempDir()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = time.Minute
	}
	c := &Cluster{tb: tb, dir: o.Dir, opts: o, errs: make([]error, n)}
	ready := make(chan int, n)
	for rank := range n {
		cfg := server.Config{Rank: rank, Size: n, TmpDir: c.TmpDir(), DataDir: c.DataDir(), SecretFile: o.SecretFile,
			Logger: o.Logger, Ready: func(cluster.Server, *cluster.List) { ready <- rank }}
		if len(o.Hosts) > 0 {
			cfg.Host = o.Hosts[rank]
		}
		if o.Staging {
			cfg.StageProducerDir = c.ProducerDir(rank)
			if err := os.MkdirAll(cfg.StageProducerDir, 0o755); err != nil {
				tb.Fatalf("clienttest: %v", err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.errs[rank] = server.Run(ctx, cfg)
		}()
		c.stops = append(c.stops, sync.OnceFunc(func() { cancel(); <-done }))
	}
	tb.Cleanup(c.stopAll)
	timer := time.NewTimer(o.StartTimeout)
	defer timer.Stop()
	for range n {
		select {
		case <-ready:
		case <-timer.C:
			c.stopAll()
			tb.Fatalf("clienttest: %d servers in %s did not start within %v", n, c.dir, o.StartTimeout)
		}
	}
	return c
}

// stopAll stops every server and reports those that failed, once.
func (c *Cluster) stopAll() {
	if err := c.StopAll(); err != nil {
		c.tb.Errorf("clienttest: %v", err)
		c.errs = make([]error, len(c.errs))
	}
}

// Stop stops the server of rank and waits until it has; the other servers
// keep running, and clients get pdc.ErrUnavailable from it. It returns
// what the server's run returned (nil for a clean stop). Idempotent.
func (c *Cluster) Stop(rank int) error {
	c.stops[rank]()
	return c.errs[rank]
}

// StopAll stops every server and waits until they have, as the test's end
// does; Start on the same Dir then restarts the cluster on its stores.
func (c *Cluster) StopAll() error {
	var wg sync.WaitGroup
	for _, stop := range c.stops {
		wg.Go(stop)
	}
	wg.Wait()
	return c.Err()
}

// Err joins the errors of the servers that have stopped with one.
func (c *Cluster) Err() error {
	var errs []error
	for rank, err := range c.errs {
		if err != nil {
			errs = append(errs, fmt.Errorf("server %d: %w", rank, err))
		}
	}
	return errors.Join(errs...)
}

// Dir is the directory that holds the cluster.
func (c *Cluster) Dir() string { return c.dir }

// TmpDir is the cluster's tmpdir ($PDC_TMPDIR): where clients find it.
func (c *Cluster) TmpDir() string { return filepath.Join(c.dir, "tmp") }

// DataDir is where the servers keep their stores.
func (c *Cluster) DataDir() string { return filepath.Join(c.dir, "data") }

// ProducerDir is the staging producer directory of the server of rank
// (with Options.Staging).
func (c *Cluster) ProducerDir(rank int) string {
	if len(c.opts.Hosts) > 0 {
		return filepath.Join(c.dir, "prod-"+c.opts.Hosts[rank])
	}
	return filepath.Join(c.dir, fmt.Sprintf("prod-%d", rank))
}

// Connect returns a client of the cluster, closed when tb's test ends.
// Options come after the cluster's own (its tmpdir, its secret), so they
// can override them.
func (c *Cluster) Connect(tb testing.TB, opts ...client.Option) *client.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.StartTimeout)
	defer cancel()
	base := []client.Option{client.WithTmpDir(c.TmpDir())}
	if c.opts.SecretFile != "" {
		base = append(base, client.WithSecretFile(c.opts.SecretFile))
	}
	cl, err := client.Connect(ctx, append(base, opts...)...)
	if err != nil {
		tb.Fatalf("clienttest: connect to %s: %v", c.TmpDir(), err)
	}
	tb.Cleanup(func() { cl.Close() })
	return cl
}
