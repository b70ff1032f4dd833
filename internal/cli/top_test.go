package cli

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
)

// top --once and --json fail when a server could not be scraped, after
// printing the view, as status does when one is not up: they exited 0
// with a row of dashes, or JSON of zeros, for a cluster whose servers
// were dead. Here the one server's metrics address has nobody behind it.
func TestTopFailsWhenAServerCannotBeScraped(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	l := &cluster.List{Size: 1, Created: time.Now(), Servers: []cluster.Server{{Rank: 0, Addr: "127.0.0.1:9", Roles: "both", PID: os.Getpid(), Host: "h", Instance: "i1", Start: time.Now()}}}
	d := cluster.Dir{Path: dir}
	if err := d.WriteList(l); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteMetricsAddr(cluster.MetricsAddr{Rank: 0, Instance: "i1", Addr: gone}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"top", "--tmpdir", dir, "--once", "--interval", "10ms"},
		{"top", "--tmpdir", dir, "--json", "--interval", "10ms"},
	} {
		var out, errb bytes.Buffer
		err := Run(ctx, args, &out, &errb)
		if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "1 of 1 server could not be scraped") || !strings.Contains(out.String(), gone) {
			t.Errorf("pdc %s with its server's metrics gone: %v, stdout:\n%s\nwant the view, naming %s, then an error", strings.Join(args, " "), err, out.String(), gone)
		}
	}
}
