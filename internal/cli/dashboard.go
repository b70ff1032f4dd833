package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/dashboard"
	"github.com/pdcgo/pdc/internal/metrics"
	"github.com/pdcgo/pdc/internal/server"
)

func init() {
	register(command{name: "dashboard", summary: "serve a web page of the cluster: servers, load plots, objects, transfers, staging, errors (needs --metrics-addr)",
		usage: "[--addr HOST:PORT] [flags]",
		long: "The page is served from the binary and polls /api/snapshot and /api/history (docs/design/0030-dashboard.md). " +
			"It listens on loopback unless given a host; beyond loopback it needs the cluster secret, and the address printed carries its token. " +
			"pdc up --dashboard ADDR has rank 0 serve the same page for as long as the cluster runs.",
		examples: []string{"pdc up -n 2 --metrics-addr 127.0.0.1:0 && pdc dashboard  # then open http://127.0.0.1:7080/",
			"pdc up -n 4 --dashboard 127.0.0.1:7080  # rank 0 serves it"},
		run: runDashboard})
}

// defaultDashboardAddr is where pdc dashboard listens unless told.
const defaultDashboardAddr = "127.0.0.1:7080"

func runDashboard(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "dashboard", "[--addr HOST:PORT] [flags]")
	addr := fs.String("addr", defaultDashboardAddr, "where to serve the page: HOST:PORT, or :PORT for loopback; beyond loopback the page needs the cluster secret's token (printed)")
	tmpdir := fs.String("tmpdir", e.tmpDirDefault(), "the cluster's tmpdir ($PDC_TMPDIR)")
	secretFile := secretFileFlag(e, fs)
	insecure := fs.Bool("insecure", false, "serve beyond loopback without a token (anyone who reaches the address sees the cluster)")
	interval := fs.Duration("interval", 2*time.Second, "time between snapshots of the servers' metrics")
	history := fs.Duration("history", 5*time.Minute, "how far back the page's plots go")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("dashboard: unexpected argument %q: %w", fs.Arg(0), errUsage)
	}
	if *interval <= 0 || *history < *interval {
		return fmt.Errorf("dashboard: --interval %v, --history %v: want a positive interval and a history at least as long: %w", *interval, *history, errUsage)
	}
	secret, err := dashboardSecret(*secretFile, *tmpdir)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	d, err := dashboard.Serve(dashboard.Config{Dir: cluster.Dir{Path: *tmpdir}, Addr: *addr, Secret: secret, Insecure: *insecure,
		Interval: *interval, History: *history})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "pdc dashboard: %s (cluster in %s; Ctrl-C stops it)\n", d.URL(), *tmpdir)
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return d.Close(cctx)
}

// dashboardSecret is the cluster secret of --secret-file, else the
// tmpdir's (nil if it has none).
func dashboardSecret(secretFile, tmpdir string) ([]byte, error) {
	if secretFile != "" {
		return cluster.ReadSecret(secretFile)
	}
	return cluster.SecretIn(tmpdir)
}

// serveDashboard serves the dashboard of a server's cluster from the
// server process (pdc server --dashboard, which pdc up --dashboard gives
// rank 0), with the server's secret and --insecure.
func serveDashboard(addr string, cfg server.Config) (stop func(), err error) {
	secret, err := dashboardSecret(cfg.SecretFile, cfg.TmpDir)
	if err != nil {
		return nil, err
	}
	d, err := dashboard.Serve(dashboard.Config{Dir: cluster.Dir{Path: cfg.TmpDir}, Addr: addr, Secret: secret, Insecure: cfg.Insecure, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	cfg.Logger.Info("serving the dashboard", "url", d.URL())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = d.Close(ctx)
	}, nil
}

// printDashboard says where pdc up --dashboard's page is: at the address
// given, with its token beyond loopback, or, for port 0, in rank 0's log.
func printDashboard(w io.Writer, addr, tmpdir string, procs []cluster.Proc) {
	full, err := metrics.ListenAddr(addr)
	if err != nil {
		return
	}
	if _, port, _ := net.SplitHostPort(full); port == "0" {
		for _, p := range procs {
			if p.Rank == 0 {
				fmt.Fprintf(w, "dashboard: served by rank 0; its address is in %s (\"serving the dashboard\")\n", p.Log)
			}
		}
		return
	}
	u := "http://" + dashboard.OpenAddr(full) + "/"
	if !cluster.IsLoopback(full) {
		if secret, err := cluster.SecretIn(tmpdir); err == nil && len(secret) > 0 {
			u += "?token=" + dashboard.Token(secret)
		}
	}
	fmt.Fprintf(w, "dashboard: %s\n", u)
}
