package access_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
)

// A cluster listening on a wildcard address publishes an address other
// hosts can dial: this host's address on the route to rank 0 (the default
// route's for rank 0), never 0.0.0.0 or [::] (issue 26). Clients work
// through the published addresses.
func TestListenWildcardPublishesReachable(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", "[::]:0"} {
		t.Run(listen, func(t *testing.T) {
			tmpdir, list := startByHand(t, 3, "--listen", listen)
			want := cluster.ReachableIP("", listen == "0.0.0.0:0")
			for _, s := range list.Servers {
				host, _, err := net.SplitHostPort(s.Addr)
				if err != nil {
					t.Fatal(err)
				}
				if ip := net.ParseIP(host); ip == nil || !ip.Equal(want) {
					t.Errorf("rank %d publishes %s; want this host's address %s", s.Rank, s.Addr, want)
				}
			}
			rv, err := cluster.ReadRendezvous(tmpdir)
			if err != nil {
				t.Fatal(err)
			}
			if rv.Addr != list.Servers[0].Addr {
				t.Errorf("rank 0's rendezvous record says %s, the list %s", rv.Addr, list.Servers[0].Addr)
			}
			roundTrip(t, tmpdir)
		})
	}
}

// startByHand starts n `pdc server` processes as a launcher would (the
// README's recipe), with a cluster secret in the tmpdir, and returns the
// tmpdir and the server list once it is complete. The servers are stopped
// when the test ends.
func startByHand(t *testing.T, n int, args ...string) (string, *cluster.List) {
	t.Helper()
	tmpdir := filepath.Join(t.TempDir(), "tmp")
	if err := os.MkdirAll(tmpdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.NewSecret(tmpdir); err != nil {
		t.Fatal(err)
	}
	return tmpdir, startServers(t, n, tmpdir, args...)
}

// startServers starts n `pdc server` processes with tmpdir and args and
// returns the server list once it is complete. The servers are stopped
// when the test ends.
func startServers(t *testing.T, n int, tmpdir string, args ...string) *cluster.List {
	t.Helper()
	datadir := filepath.Join(t.TempDir(), "data")
	t.Cleanup(func() { e2e.Cleanup(t, tmpdir) })
	for rank := range n {
		cmd := exec.Command(e2e.Bin(), append([]string{"server", "--rank", strconv.Itoa(rank), "--size", strconv.Itoa(n),
			"--tmpdir", tmpdir, "--datadir", datadir}, args...)...)
		log, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
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
	list, err := cluster.WaitForList(e2e.Ctx(t, time.Minute), tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// roundTrip writes an object's region through the CLI and reads it back.
func roundTrip(t *testing.T, tmpdir string) {
	t.Helper()
	in := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(in, []byte("0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "c")
	e2e.MustRun(t, "obj", "create", "--tmpdir", tmpdir, "--cont", "c", "--dims", "16", "--type", "uint8", "o")
	e2e.MustRun(t, "put", "--tmpdir", tmpdir, "o", "--region", "0:16", in)
	out := filepath.Join(t.TempDir(), "out")
	e2e.MustRun(t, "get", "--tmpdir", tmpdir, "o", "--region", "0:16", out)
	if b, err := os.ReadFile(out); err != nil || string(b) != "0123456789abcdef" {
		t.Fatalf("read back %q, %v", b, err)
	}
}

// --advertise replaces the published host, keeping each server's port.
func TestAdvertiseHost(t *testing.T) {
	tmpdir := e2e.Up(t, 2, "--listen", "0.0.0.0:0", "--advertise", "localhost")
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Servers {
		if !strings.HasPrefix(s.Addr, "localhost:") || strings.HasSuffix(s.Addr, ":0") {
			t.Errorf("rank %d publishes %s; want localhost:<its port>", s.Rank, s.Addr)
		}
	}
	e2e.MustRun(t, "ping", "--tmpdir", tmpdir)
}

// A malformed --advertise is refused with a message naming what is wrong.
func TestAdvertiseRefusesBad(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--listen", "0.0.0.0:0", "--advertise", "0.0.0.0:7000"}, "a wildcard address names no host others can reach"},
		{[]string{"server", "--listen", "0.0.0.0:0", "--advertise", "[::]"}, "a wildcard address names no host"},
		{[]string{"server", "--advertise", "node3:99999"}, `port "99999" is not 1..65535`},
		{[]string{"server", "--advertise", "a:b:c"}, "want HOST:PORT, or HOST"},
		{[]string{"server", "--listen", "unix:" + filepath.Join(dir, "s"), "--advertise", "node3"}, "listens on a Unix socket"},
		{[]string{"up", "-n", "2", "--listen", "0.0.0.0:0", "--advertise", "node3:7000"}, "names one port for 2 servers"},
	} {
		args := append(tc.args, "--tmpdir", filepath.Join(dir, "tmp"), "--datadir", filepath.Join(dir, "data"))
		r := e2e.Run(t, nil, args...)
		if r.Err == nil || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("pdc %q: err %v, stderr %q; want it to fail saying %q", tc.args, r.Err, r.Stderr, tc.want)
		}
	}
}

// A server that listens beyond loopback without a cluster secret refuses
// to start, saying how to give one; with --insecure it starts and warns,
// once (issue 26).
func TestBeyondLoopbackNeedsSecret(t *testing.T) {
	dir := t.TempDir()
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", net.JoinHostPort(cluster.ReachableIP("", true).String(), "0")} {
		r := e2e.Run(t, nil, "server", "--listen", listen, "--tmpdir", filepath.Join(dir, "tmp"), "--datadir", filepath.Join(dir, "data"))
		if r.Err == nil || !strings.Contains(r.Stderr, "without a cluster secret") || !strings.Contains(r.Stderr, "--secret-file") ||
			!strings.Contains(r.Stderr, "--insecure") || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
			t.Errorf("pdc server --listen %s without a secret: err %v, stderr %q; want one line saying to give --secret-file or --insecure", listen, r.Err, r.Stderr)
		}
	}
	r := e2e.Run(t, nil, "up", "-n", "2", "--listen", "0.0.0.0:0", "--secret=false", "--tmpdir", filepath.Join(dir, "tmp2"), "--datadir", filepath.Join(dir, "data"))
	if r.Err == nil || !strings.Contains(r.Stderr, "--insecure") {
		t.Errorf("pdc up --listen 0.0.0.0:0 --secret=false: err %v, stderr %q; want a refusal naming --insecure", r.Err, r.Stderr)
	}

	tmpdir := e2e.Up(t, 2, "--listen", "0.0.0.0:0", "--secret=false", "--insecure")
	e2e.MustRun(t, "ping", "--tmpdir", tmpdir)
	for rank := range 2 {
		log, err := os.ReadFile(filepath.Join(tmpdir, "logs", "server-"+string(rune('0'+rank))+".log"))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(log), "running without a cluster secret"); n != 1 {
			t.Errorf("rank %d logged the insecure warning %d times; want once:\n%s", rank, n, log)
		}
	}
	// Stopped from this host, although through its published address.
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
}

// Every client command takes the cluster secret's file from --secret-file
// or $PDC_SECRET_FILE, for a secret kept outside the tmpdir, as the README
// says (issue 26).
func TestClientsTakeSecretFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := cluster.NewSecret(dir); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, cluster.SecretFile)
	tmpdir := filepath.Join(t.TempDir(), "tmp")
	prod := t.TempDir()
	startServers(t, 2, tmpdir, "--listen", "0.0.0.0:0", "--secret-file", secret, "--stage-producer-dir", prod)
	in := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(in, []byte("0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(filepath.Join(prod, "f"), []byte("staged"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"status"},
		{"ping"},
		{"cont", "create", "c"},
		{"cont", "ls"},
		{"obj", "create", "--cont", "c", "--dims", "16", "--type", "uint8", "o"},
		{"obj", "ls", "--cont", "c"},
		{"obj", "tag", "put", "o", "k", "v"},
		{"query", "k=v"},
		{"put", "o", in},
		{"get", "o", out},
		{"checkpoint"},
		{"fsck"},
		{"stage", "produce", "--producer-dir", prod, "f"},
	} {
		args = append(args, "--tmpdir", tmpdir)
		if r := e2e.Run(t, nil, args...); r.Err == nil || !strings.Contains(r.Stderr, "no cluster secret given") {
			t.Errorf("pdc %q without the secret: err %v, stderr %q; want a refusal: no cluster secret given", args, r.Err, r.Stderr)
		}
		if r := e2e.Run(t, nil, append(args, "--secret-file", secret)...); r.Err != nil && !strings.Contains(r.Stderr, "not found") {
			t.Errorf("pdc %q --secret-file: %v\n%s", args, r.Err, r.Stderr)
		}
		if args[0] != "status" && args[0] != "put" && args[0] != "stage" {
			continue // $PDC_SECRET_FILE is the flag's default: three commands show it
		}
		if r := e2e.Run(t, []string{"PDC_SECRET_FILE=" + secret}, args...); r.Err != nil && !strings.Contains(r.Stderr, "exists") && !strings.Contains(r.Stderr, "not found") {
			t.Errorf("pdc %q with $PDC_SECRET_FILE: %v\n%s", args, r.Err, r.Stderr)
		}
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "0123456789abcdef" {
		t.Fatalf("read back %q, %v", b, err)
	}
	if r := e2e.Run(t, nil, "down", "--tmpdir", tmpdir); r.Err == nil {
		t.Fatalf("pdc down without the secret stopped the cluster")
	}
	e2e.MustRun(t, "down", "--tmpdir", tmpdir, "--secret-file", secret)
}

// With a secret, every connection proves it before any request, shutdown
// included: a client with the wrong secret cannot stop a server, one
// with the right secret can, from any node.
func TestShutdownNeedsTheSecret(t *testing.T) {
	dir := t.TempDir()
	if _, err := cluster.NewSecret(dir); err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(dir, cluster.SecretFile)
	tmpdir := e2e.Up(t, 2, "--listen", "0.0.0.0:0")
	r := e2e.Run(t, nil, "down", "--tmpdir", tmpdir, "--secret-file", wrong, "--timeout", "20s")
	if r.Err == nil || !strings.Contains(r.Stderr, "wrong cluster secret") {
		t.Fatalf("pdc down with the wrong secret: err %v, stderr %q; want a refusal: wrong cluster secret", r.Err, r.Stderr)
	}
	e2e.MustRun(t, "ping", "--tmpdir", tmpdir)
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
}
