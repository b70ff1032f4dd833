package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// A server started without --metrics-addr is named apart from one that
// could not be scraped, with how to start it with an address: top said
// "could not be scraped ... pdc status says which are down" of servers
// that were up. With no server serving metrics, top names them all.
func TestTopNamesServersWithoutMetrics(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	var servers []cluster.Server
	for rank := range 3 {
		servers = append(servers, cluster.Server{Rank: rank, Addr: fmt.Sprintf("127.0.0.1:%d", 10+rank), Roles: "both", PID: os.Getpid(), Host: "h",
			Instance: fmt.Sprint("i", rank), Start: time.Now()})
	}
	d := cluster.Dir{Path: dir}
	if err := d.WriteList(&cluster.List{Size: 3, Created: time.Now(), Servers: servers}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	top := func() error {
		var out, errb bytes.Buffer
		return Run(ctx, []string{"top", "--tmpdir", dir, "--once", "--interval", "10ms"}, &out, &errb)
	}

	err = top()
	want := "no server of the cluster in " + dir + " serves metrics (rank 0 (127.0.0.1:10), rank 1 (127.0.0.1:11), rank 2 (127.0.0.1:12)): they were started without --metrics-addr"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "pdc down --tmpdir "+dir) {
		t.Errorf("top of a cluster without metrics: %v; want it to say %q and how to start it with them", err, want)
	}

	// Rank 0's metrics address has nobody behind it (down); ranks 1 and
	// 2 have none.
	if err := d.WriteMetricsAddr(cluster.MetricsAddr{Rank: 0, Instance: "i0", Addr: gone}); err != nil {
		t.Fatal(err)
	}
	err = top()
	for _, want := range []string{
		"rank 1 (127.0.0.1:11), rank 2 (127.0.0.1:12) serve no metrics: they were started without --metrics-addr",
		"start each again with one (stop it, then pdc server --rank R ... --metrics-addr 127.0.0.1:0)",
		"1 of 3 servers could not be scraped (rank 0 (127.0.0.1:10);",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("top with rank 0 down and ranks 1, 2 without metrics: %v; want it to say %q", err, want)
		}
	}
	if !errors.Is(err, pdc.ErrNotFound) || !errors.Is(err, pdc.ErrUnavailable) {
		t.Errorf("top with rank 0 down and ranks 1, 2 without metrics: %v; want ErrNotFound and ErrUnavailable", err)
	}
}
