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
		return fmt.Errorf("top: no server of the cluster in %s serves metrics: start it with pdc up --metrics-addr 127.0.0.1:0 (or pdc server --metrics-addr)", *tmpdir)
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
			return unscraped(v)
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
	return unscraped(last)
}

// unscraped fails a view that ends top (--once, --json, -n) in which a
// server could not be scraped, as pdc status fails when one is not up:
// a script saw exit 0 and a table of dashes, or JSON of zeros, for a
// cluster whose servers were all dead.
func unscraped(v metrics.ClusterView) error {
	var bad []string
	for _, s := range v.Servers {
		if s.Error != "" {
			bad = append(bad, fmt.Sprintf("rank %d (%s)", s.Rank, s.Addr))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("top: %d of %s could not be scraped (%s; why is under the view, and pdc status says which are down): %w",
		len(bad), count(len(v.Servers), "server", "servers"), strings.Join(bad, ", "), pdc.ErrUnavailable)
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
