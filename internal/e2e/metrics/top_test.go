package metrics_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/metrics"
)

// TestTopOnceAndJSON prints one view of a two-server cluster, as a table
// and as JSON, and checks the numbers against the work done.
func TestTopOnceAndJSON(t *testing.T) {
	tmpdir := e2e.Up(t, 2, "--metrics-addr", "127.0.0.1:0")
	out := e2e.MustRun(t, "top", "--tmpdir", tmpdir, "--once", "--interval", "200ms")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "REQ/S") || !strings.Contains(lines[1], "P99") {
		t.Fatalf("pdc top --once printed:\n%s\nwant a title, a header and a line per server", out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("pdc top --once to a pipe printed terminal controls:\n%q", out)
	}
	for rank, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) < 12 || f[0] != fmt.Sprint(rank) || f[1] != "both" {
			t.Errorf("line %q: want rank %d, role both and 12 columns", l, rank)
		}
	}

	st := e2e.MustRun(t, "status", "--tmpdir", tmpdir)
	for _, s := range []string{"rank 0 metrics: http://127.0.0.1:", "rank 1 metrics: http://127.0.0.1:"} {
		if !strings.Contains(st, s) {
			t.Errorf("pdc status does not say %q:\n%s", s, st)
		}
	}

	// A client connected to every server shows in the view.
	c := e2e.Connect(t, tmpdir)
	if _, err := c.Status(e2e.Ctx(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	js := e2e.MustRun(t, "top", "--tmpdir", tmpdir, "--json", "--interval", "10ms")
	var v metrics.ClusterView
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("pdc top --json: %v\n%s", err, js)
	}
	if len(v.Servers) != 2 || v.Interval <= 0 {
		t.Fatalf("pdc top --json: %d servers, interval %v; want 2 and more than 0:\n%s", len(v.Servers), v.Interval, js)
	}
	for _, s := range v.Servers {
		if s.Error != "" || s.MetricsAddr == "" || s.Clients < 1 || s.Requests < 1 || s.StoreBytes <= 0 {
			t.Errorf("rank %d: %+v: want no error, a metrics address, a client, requests and a store", s.Rank, s)
		}
	}
}

// TestTopRedrawsOnATerminal runs pdc top on a pseudo-terminal and checks
// that it draws each view over the last (clears the screen and homes
// the cursor), and that every view has a line per server.
func TestTopRedrawsOnATerminal(t *testing.T) {
	tmpdir := e2e.Up(t, 2, "--metrics-addr", "127.0.0.1:0")
	ptm, pts := e2e.OpenPTY(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2e.CommandBin(t, "top"), "top", "--tmpdir", tmpdir, "--interval", "100ms", "-n", "3")
	cmd.Stdout, cmd.Stderr = pts, pts
	cmd.Env = append(os.Environ(), "TERM=xterm")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close() // the child has it
	var screen strings.Builder
	r := bufio.NewReader(ptm)
	for {
		b, err := r.ReadByte()
		if err != nil {
			break // EIO once the child has exited and closed the terminal
		}
		screen.WriteByte(b)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("pdc top: %v\n%s", err, screen.String())
	}
	views := strings.Split(screen.String(), "\x1b[H\x1b[2J")
	if len(views) != 4 || views[0] != "" {
		t.Fatalf("pdc top -n 3 on a terminal drew %d views (want 3, each after a clear):\n%q", len(views)-1, screen.String())
	}
	for i, v := range views[1:] {
		// The terminal turns each \n into \r\n.
		lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(v, "\r", "")), "\n")
		if len(lines) != 4 || !strings.Contains(lines[0], "Ctrl-C") || !strings.HasPrefix(strings.TrimSpace(lines[2]), "0 ") {
			t.Errorf("view %d:\n%s\nwant a title, a header and a line per server", i, v)
		}
	}
}
