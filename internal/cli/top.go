package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metrics"
)

func init() {
	register(command{name: "top", summary: "a live view of the servers: requests, latency, bytes, transfers, stores (needs --metrics-addr)", usage: "[flags]",
		examples: []string{"pdc up -n 2 --metrics-addr 127.0.0.1:0 && pdc top", "pdc top --once --json"}, run: runTop})
}

// Terminal control: clear the screen and put the cursor home, so that
// each view is drawn over the last.
const clearScreen = "\x1b[H\x1b[2J"

func runTop(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "top", "[flags]")
	tmpdir := fs.String("tmpdir", e.tmpDirDefault(), "the cluster's tmpdir ($PDC_TMPDIR)")
	interval := fs.Duration("interval", 2*time.Second, "time between views; rates are over it")
	once := fs.Bool("once", false, "print one view (rates over one --interval) and exit")
	asJSON := fs.Bool("json", false, "print the view as JSON (implies --once)")
	count := fs.Int("n", 0, "stop after this many views (0: until interrupted)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for each server's metrics")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("top: unexpected argument %q: %w", fs.Arg(0), errUsage)
	}
	if *interval <= 0 || *count < 0 {
		return fmt.Errorf("top: --interval %v, -n %d: want a positive interval and a count of 0 or more: %w", *interval, *count, errUsage)
	}
	if *once || *asJSON {
		*count = 1
	}
	dir := cluster.Dir{Path: *tmpdir}
	hc := &http.Client{Timeout: *timeout}
	defer hc.CloseIdleConnections()
	snap := func() (*metrics.ClusterSnapshot, error) {
		sctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		s, err := metrics.Snap(sctx, hc, dir)
		if err != nil {
			return nil, fmt.Errorf("top: %w", err)
		}
		return s, nil
	}
	prev, err := snap()
	if err != nil {
		return err
	}
	if noMetrics(prev) {
		var all []string
		var ranks []int
		for _, smp := range prev.Servers {
			all = append(all, smp.Server.Label())
			ranks = append(ranks, smp.Server.Rank)
		}
		return fmt.Errorf("top: no server of the cluster in %s serves metrics (%s): %s: %w",
			*tmpdir, strings.Join(all, ", "), startWithMetrics(ranks, *tmpdir), pdc.ErrNotFound)
	}
	live := !*once && !*asJSON && isTerminal(e.stdout)
	t := time.NewTicker(*interval)
	defer t.Stop()
	var last metrics.ClusterView
	for n := 0; *count == 0 || n < *count; n++ {
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil // interrupted: the view on screen is the last
		}
		cur, err := snap()
		if err != nil {
			return err
		}
		v := metrics.View(prev, cur)
		prev = cur
		last = v
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(v); err != nil {
				return err
			}
			return unscraped(v, *tmpdir)
		}
		var b strings.Builder
		if live {
			b.WriteString(clearScreen)
		}
		printTop(&b, *tmpdir, v, live)
		if _, err := io.WriteString(e.stdout, b.String()); err != nil {
			return fmt.Errorf("top: %w", err)
		}
	}
	return unscraped(last, *tmpdir)
}

// unscraped fails a view that ends top (--once, --json, -n) in which a
// server could not be scraped, as pdc status fails when one is not up:
// a script saw exit 0 and a table of dashes, or JSON of zeros, for a
// cluster whose servers were all dead. A server that serves no metrics
// at all (started without --metrics-addr) is no failure to scrape: it
// is named apart, with how to start it with an address, instead of
// sending the user to pdc status for a server that is up.
func unscraped(v metrics.ClusterView, tmpdir string) error {
	var none, bad []string
	var noneRanks []int
	for _, s := range v.Servers {
		label := fmt.Sprintf("rank %d (%s)", s.Rank, s.Addr)
		switch {
		case s.MetricsAddr == "":
			none = append(none, label)
			noneRanks = append(noneRanks, s.Rank)
		case s.Error != "":
			bad = append(bad, label)
		}
	}
	var parts []string
	if len(none) > 0 {
		parts = append(parts, fmt.Sprintf("%s %s no metrics: %s",
			strings.Join(none, ", "), plural(len(none), "serves", "serve"), startWithMetrics(noneRanks, tmpdir)))
	}
	if len(bad) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %s could not be scraped (%s; why is under the view, and pdc status says which are down)",
			len(bad), count(len(v.Servers), "server", "servers"), strings.Join(bad, ", ")))
	}
	msg := "top: " + strings.Join(parts, "; ")
	switch {
	case len(none) > 0 && len(bad) > 0:
		return fmt.Errorf("%s: %w: %w", msg, pdc.ErrNotFound, pdc.ErrUnavailable)
	case len(none) > 0:
		return fmt.Errorf("%s: %w", msg, pdc.ErrNotFound)
	case len(bad) > 0:
		return fmt.Errorf("%s: %w", msg, pdc.ErrUnavailable)
	}
	return nil
}

// startWithMetrics says how to give the servers of ranks, of the
// cluster in tmpdir, started without --metrics-addr, a metrics address:
// a server takes one only at start, so each must be started again with
// it, by hand, or, for a cluster of pdc up (whose --restart-dead
// restarts servers with the flags the cluster was started with), by
// starting the cluster again.
func startWithMetrics(ranks []int, tmpdir string) string {
	n, rank := len(ranks), "R"
	if n == 1 {
		rank = fmt.Sprint(ranks[0])
	}
	return fmt.Sprintf("%s started without --metrics-addr, which a server takes only at start; start %s again with one "+
		"(stop it, then pdc server --rank %s ... --metrics-addr 127.0.0.1:0), or, for a cluster of pdc up, "+
		"pdc down --tmpdir %s, then pdc up with its flags and --metrics-addr 127.0.0.1:0",
		plural(n, "it was", "they were"), plural(n, "it", "each"), rank, tmpdir)
}

func noMetrics(s *metrics.ClusterSnapshot) bool {
	for _, smp := range s.Servers {
		if smp.MetricsAddr != "" {
			return false
		}
	}
	return true
}

func printTop(w io.Writer, tmpdir string, v metrics.ClusterView, live bool) {
	fmt.Fprintf(w, "pdc top: %s, tmpdir %s, %s, rates over %v", count(len(v.Servers), "server", "servers"), tmpdir,
		v.Time.Format(time.TimeOnly), v.Interval.Round(time.Millisecond))
	if live {
		fmt.Fprint(w, " (Ctrl-C quits)")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "RANK\tROLES\tREQ/S\tP99\tIN/S\tOUT/S\tXFERS\tQUEUED\tSTORE\tCLIENTS\tERRORS\tERR/S\t")
	for _, s := range v.Servers {
		if s.Error != "" {
			fmt.Fprintf(tw, "%d\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", s.Rank, s.Roles)
			continue
		}
		p99 := "-"
		if s.P99Seconds > 0 {
			p99 = time.Duration(s.P99Seconds * float64(time.Second)).Round(time.Microsecond).String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%s\t%s\t%s\t%.0f\t%.0f\t%s\t%.0f\t%.0f\t%.1f\t\n", s.Rank, s.Roles,
			s.RequestsPerSec, p99, humanBytes(uint64(s.InBytesPerSec)), humanBytes(uint64(s.OutBytesPerSec)),
			s.TransfersInFlight, s.TransfersQueued, humanBytes(uint64(s.StoreBytes)), s.Clients, s.Errors, s.ErrorsPerSec)
	}
	tw.Flush()
	for _, s := range v.Servers {
		if s.Error != "" {
			fmt.Fprintf(w, "rank %d: %s\n", s.Rank, s.Error)
		}
	}
}
