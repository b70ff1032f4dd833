package hosts_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/bed"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
)

// bedServers starts one `pdc server` on each of nodes, as a launcher
// does: rank i on nodes[i], listening on args' address, the tmpdir on the
// bed's shared directory. It returns the tmpdir and the complete list.
func bedServers(t *testing.T, b *bed.Bed, nodes []*bed.Node, tmpdir string, args ...string) *cluster.List {
	t.Helper()
	for rank, n := range nodes {
		cmd := n.Command(context.Background(), e2e.Bin(), append([]string{"server", "--rank", strconv.Itoa(rank), "--size", strconv.Itoa(len(nodes)),
			"--tmpdir", tmpdir, "--datadir", n.DataDir}, args...)...)
		log, err := os.Create(filepath.Join(n.Dir, "server.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		log.Close()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := cluster.WaitForList(ctx, tmpdir)
	if err != nil {
		for _, n := range nodes {
			l, _ := os.ReadFile(filepath.Join(n.Dir, "server.log"))
			t.Logf("%s:\n%s", n.Name, l)
		}
		t.Fatal(err)
	}
	return list
}

// bedRun runs pdc on node n and returns its output and error.
func bedRun(t *testing.T, n *bed.Node, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := n.Command(ctx, e2e.CommandBin(t, args...), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// The README's launcher recipe across hosts: three nodes each start a
// server with --listen 0.0.0.0:0 (one with [::]:0) and a secret in the
// shared tmpdir; each publishes its node's own address, and a client on
// a fourth node writes and reads through them (issue 26).
func TestWildcardClusterAcrossNodes(t *testing.T) {
	b := bed.Start(t, 4)
	tmpdir := filepath.Join(b.Shared, "pdc_tmp")
	if err := os.MkdirAll(tmpdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.NewSecret(tmpdir); err != nil {
		t.Fatal(err)
	}
	list := bedServers(t, b, b.Nodes[:3], tmpdir, "--listen", "0.0.0.0:0")
	for i, s := range list.Servers {
		host, _, err := net.SplitHostPort(s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if want := b.Nodes[i].Addr.String(); host != want || s.Host != b.Nodes[i].Name {
			t.Errorf("rank %d publishes %s on host %q; want its node's address %s and name %s", s.Rank, s.Addr, s.Host, want, b.Nodes[i].Name)
		}
	}
	c := b.Nodes[3]
	in := filepath.Join(c.Dir, "in")
	want := strings.Repeat("0123456789abcdef", 4096)
	if err := os.WriteFile(in, []byte(want), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"cont", "create", "c"},
		{"obj", "create", "--cont", "c", "--dims", "65536", "--type", "uint8", "--partition", "region-static", "o"},
		{"put", "o", in},
	} {
		if _, serr, err := bedRun(t, c, append(args, "--tmpdir", tmpdir)...); err != nil {
			t.Fatalf("pdc %q on %s: %v\n%s", args, c.Name, err, serr)
		}
	}
	got, serr, err := bedRun(t, c, "get", "o", "-", "--tmpdir", tmpdir)
	if err != nil || got != want {
		t.Fatalf("pdc get on %s: %d bytes, %v\n%s", c.Name, len(got), err, serr)
	}
	if _, serr, err := bedRun(t, c, "down", "--tmpdir", tmpdir); err != nil {
		t.Fatalf("pdc down from another node, with the secret: %v\n%s", err, serr)
	}
}

// A server run --insecure (no secret) takes shutdown only from its own
// host: pdc down from another node is refused, saying why, and the server
// keeps serving; from its node it stops (issue 26).
func TestInsecureShutdownOnlyFromItsHost(t *testing.T) {
	b := bed.Start(t, 2)
	tmpdir := filepath.Join(b.Shared, "pdc_tmp")
	bedServers(t, b, b.Nodes[:1], tmpdir, "--listen", "0.0.0.0:0", "--insecure")
	other := b.Nodes[1]
	_, serr, err := bedRun(t, other, "down", "--tmpdir", tmpdir, "--timeout", "20s")
	if err == nil || !strings.Contains(serr, "takes shutdown only from its own host") || !strings.Contains(serr, "permission denied") {
		t.Fatalf("pdc down from %s: err %v, stderr %q; want a refusal: shutdown only from its own host", other.Name, err, serr)
	}
	if out, serr, err := bedRun(t, other, "ping", "--tmpdir", tmpdir); err != nil {
		t.Fatalf("after the refused shutdown the server does not answer: %v\n%s%s", err, out, serr)
	}
	if _, serr, err := bedRun(t, b.Nodes[0], "down", "--tmpdir", tmpdir); err != nil {
		t.Fatalf("pdc down on the server's own node: %v\n%s", err, serr)
	}
}
