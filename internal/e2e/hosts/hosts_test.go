package hosts_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/bed"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
)

// hosts is a cluster of one pdc server per node on the first nodes of a
// bed, its tmpdir on the bed's shared directory, and a client process on
// the last node.
type hosts struct {
	t      *testing.T
	b      *bed.Bed
	tmpdir string
	srv    []*exec.Cmd // by rank
	logOff []int64     // by rank: the size of its log when it last started
}

// startHosts starts n servers on nodes 1..n of b and waits until they
// formed the cluster.
func startHosts(t *testing.T, b *bed.Bed, n int) *hosts {
	t.Helper()
	return startHostsWith(t, b, n, func(_ int, node *bed.Node) []string {
		return []string{"--listen", node.Addr.String() + ":0"}
	})
}

// startHostsWith is startHosts with each rank's listen (and advertise,
// roles) flags from listen.
func startHostsWith(t *testing.T, b *bed.Bed, n int, listen func(rank int, node *bed.Node) []string) *hosts {
	t.Helper()
	h := &hosts{t: t, b: b, tmpdir: filepath.Join(b.Shared, "tmp")}
	if err := os.MkdirAll(h.tmpdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.NewSecret(h.tmpdir); err != nil {
		t.Fatal(err)
	}
	h.waitReady(h.restart(n, listen), n)
	return h
}

// restart starts n servers on nodes 1..n (after down, with the same
// tmpdir and data dirs), and returns where their ready lines come.
func (h *hosts) restart(n int, listen func(rank int, node *bed.Node) []string) <-chan string {
	h.srv, h.logOff = make([]*exec.Cmd, n), make([]int64, n)
	ready := make(chan string, n)
	for r := range n {
		h.start(r, n, ready, listen(r, h.b.Nodes[r]))
	}
	return ready
}

// waitReady waits for n ready lines: the cluster formed.
func (h *hosts) waitReady(ready <-chan string, n int) {
	t := h.t
	t.Helper()
	timer := time.NewTimer(2 * time.Minute)
	defer timer.Stop()
	for range n {
		select {
		case line := <-ready:
			if !strings.HasPrefix(line, "ready") {
				t.Fatalf("a server did not start: %q; logs:\n%s", line, h.logs())
			}
		case <-timer.C:
			t.Fatalf("the cluster did not form in 2 min; logs:\n%s", h.logs())
		}
	}
}

// down stops the cluster with pdc down, from the host, and waits for the
// servers to exit.
func (h *hosts) down() {
	t := h.t
	t.Helper()
	e2e.MustRun(t, "down", "--tmpdir", h.tmpdir)
	for r, cmd := range h.srv {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		timer := time.NewTimer(time.Minute)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server of rank %d after pdc down: %v", r, err)
			}
		case <-timer.C:
			t.Fatalf("server of rank %d still runs a minute after pdc down", r)
		}
		timer.Stop()
	}
}

// log is what the server of rank logged since it was last started.
func (h *hosts) log(rank int) string {
	data, _ := os.ReadFile(filepath.Join(h.b.Nodes[rank].Dir, "server.log"))
	return string(data[min(h.logOff[rank], int64(len(data))):])
}

// start starts the server of rank on node rank+1, which sends its ready
// line (or what ended it) to ready.
func (h *hosts) start(rank, size int, ready chan<- string, listen []string) {
	t, node := h.t, h.b.Nodes[rank]
	logf, err := os.OpenFile(filepath.Join(node.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	if st, err := logf.Stat(); err == nil {
		h.logOff[rank] = st.Size()
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"server", "--rank", strconv.Itoa(rank), "--size", strconv.Itoa(size),
		"--tmpdir", h.tmpdir, "--datadir", node.DataDir}, listen...)
	cmd := node.Command(context.Background(), e2e.Bin(), args...)
	cmd.Env = append(os.Environ(), "PDC_READY_FD=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	h.srv[rank] = cmd
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		defer r.Close()
		line, err := bufio.NewReader(r).ReadString('\n')
		if err != nil {
			line = fmt.Sprintf("rank %d: %v", rank, err)
		}
		ready <- strings.TrimSpace(line)
	}()
}

func (h *hosts) logs() string {
	var b strings.Builder
	for r := range h.srv {
		data, _ := os.ReadFile(filepath.Join(h.b.Nodes[r].Dir, "server.log"))
		fmt.Fprintf(&b, "== rank %d (%s)\n%s", r, h.b.Nodes[r].Name, data)
	}
	return b.String()
}

// opsClient is the ops role (see clientRole) run on node.
type opsClient struct {
	t    *testing.T
	h    *hosts
	proc *exec.Cmd
	out  *bufio.Scanner
	in   *os.File
}

func (h *hosts) client(node *bed.Node, opTimeout time.Duration, env ...string) *opsClient {
	cmd := func(name string, args ...string) *exec.Cmd { return node.Command(context.Background(), name, args...) }
	proc, out, in := e2e.ClientProcWith(h.t, cmd, h.tmpdir, "ops", append(env, opTimeoutEnv+"="+opTimeout.String())...)
	return &opsClient{t: h.t, h: h, proc: proc, out: out, in: in}
}

// close ends the client process: its stdin closes, and it exits.
func (c *opsClient) close() {
	c.t.Helper()
	c.in.Close()
	if err := c.proc.Wait(); err != nil {
		c.t.Fatalf("client process: %v", err)
	}
}

// do sends a command and returns its answer line. The role answers each
// within its op deadline; the test waits far longer, so that a hang is
// told from a slow machine.
func (c *opsClient) do(cmd string) string {
	c.t.Helper()
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		c.t.Fatal(err)
	}
	return c.answer(cmd)
}

// answer waits for the answer to cmd, sent already.
func (c *opsClient) answer(cmd string) string {
	c.t.Helper()
	line := make(chan string, 1)
	go func() {
		if c.out.Scan() {
			line <- c.out.Text()
		} else {
			line <- fmt.Sprintf("client exited: %v", c.out.Err())
		}
	}()
	timer := time.NewTimer(3 * time.Minute)
	defer timer.Stop()
	select {
	case l := <-line:
		return l
	case <-timer.C:
		c.t.Fatalf("%s: no answer in 3 min (hung)", cmd)
		return ""
	}
}

// ok runs cmd and fails the test unless it succeeded.
func (c *opsClient) ok(cmd string) string {
	c.t.Helper()
	l := c.do(cmd)
	res, ok := strings.CutPrefix(l, "ok")
	if !ok {
		c.t.Fatalf("%s: %s\nserver logs:\n%s", cmd, l, c.h.logs())
	}
	return strings.TrimSpace(res)
}

// alive fails the test for each server that has exited.
func (h *hosts) alive() {
	h.t.Helper()
	for r, cmd := range h.srv {
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			h.t.Errorf("server of rank %d died: %v; logs:\n%s", r, err, h.logs())
		}
	}
}

// TestAcrossHosts: three servers on three nodes, as the README launches
// them (--listen 0.0.0.0:0, each publishing its node's address, its host
// name from the kernel), a client on a fourth: region I/O under every
// partition, tags and queries work across hosts.
func TestAcrossHosts(t *testing.T) {
	b := bed.Start(t, 4)
	h := startHostsWith(t, b, 3, func(int, *bed.Node) []string { return []string{"--listen", "0.0.0.0:0"} })
	list, err := cluster.ReadList(h.tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	for r, s := range list.Servers {
		if want := b.Nodes[r].Name; s.Host != want {
			t.Errorf("rank %d reports host %q, want %q (its node's name)", r, s.Host, want)
		}
		if !strings.HasPrefix(s.Addr, b.Nodes[r].Addr.String()+":") {
			t.Errorf("rank %d publishes %q, not on its node's address %v", r, s.Addr, b.Nodes[r].Addr)
		}
	}
	c := h.client(b.Nodes[3], time.Minute)
	c.ok("setup")
	c.ok("write 1")
	c.ok("read 1")
	c.ok("write 2")
	c.ok("read 2")
	if acked := c.ok("tag 1 30"); strings.Count(acked, ",") != 29 {
		t.Fatalf("tag 1 30 acknowledged %s", acked)
	}
	c.ok("find 1 30")
	h.alive()
}

// TestClientPartitionedFromDataServer (issue 26, item 5): a client cut off
// from a data server gets pdc.ErrUnavailable naming the server within its
// deadline, not a hang nor a bare timeout; after the link heals it goes
// on, nothing restarted.
func TestClientPartitionedFromDataServer(t *testing.T) {
	b := bed.Start(t, 4)
	h := startHosts(t, b, 3)
	// Twice the client's PeerTimeout (10s) and more: the client must
	// tell the partition from a slow server, not run out of time.
	const opTimeout = 30 * time.Second
	c := h.client(b.Nodes[3], opTimeout)
	c.ok("setup")
	c.ok("write 1")
	c.ok("read 1")

	cut := b.Nodes[1] // rank 1
	if err := cut.Partition(); err != nil {
		t.Fatal(err)
	}
	// read first: a write that fails on rank 1 may have written the
	// objects before it.
	for _, cmd := range []string{"read 1", "write 2"} {
		l := c.do(cmd)
		t.Logf("%s, rank 1 partitioned: %s", cmd, l)
		if !strings.HasPrefix(l, "err unavailable=true") {
			t.Errorf("%s with rank 1 partitioned: %s; want pdc.ErrUnavailable", cmd, l)
		}
		if !strings.Contains(l, cut.Addr.String()) {
			t.Errorf("%s: the error does not name rank 1 at %v: %s", cmd, cut.Addr, l)
		}
	}
	if err := cut.Heal(); err != nil {
		t.Fatal(err)
	}
	// Data servers confirm with rank 1 the dims of the objects it holds
	// the metadata of, once their lease ended (docs/design/0006, "Dims
	// leases"): the first dial to it after the heal may still fail, on
	// the neighbour entry the partition left failed (no route to host),
	// as the client's own first call after a heal may (0019, "Left").
	// Once, and only as unavailable, the write is tried again.
	if l := c.do("write 3"); !strings.HasPrefix(l, "ok") {
		t.Logf("write 3, just after the heal: %s", l)
		if !strings.HasPrefix(l, "err unavailable=true") {
			t.Fatalf("write 3 after the heal: %s", l)
		}
		c.ok("write 3")
	}
	c.ok("read 3")
	h.alive()
}

// TestProxyFaults: rank 1 is reached, by the client and by the other
// servers, only through a proxy (it advertises the proxy's address) that
// adds latency and jitter and resets every connection it carries in the
// middle of writes. A write that fails is retried; every acknowledged
// round reads back whole, and no server dies.
func TestProxyFaults(t *testing.T) {
	b := bed.Start(t, 4)
	// A fresh namespace has every port free: rank 1 listens on a fixed
	// one, which the proxy, started first, forwards to.
	target := b.Nodes[1].Addr.String() + ":7001"
	p, err := bed.NewProxy(b.Host.String()+":0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	p.SetLatency(3*time.Millisecond, 5*time.Millisecond)
	h := startHostsWith(t, b, 3, func(r int, node *bed.Node) []string {
		if r == 1 {
			return []string{"--listen", target, "--advertise", p.Addr()}
		}
		return []string{"--listen", node.Addr.String() + ":0"}
	})
	c := h.client(b.Nodes[3], time.Minute)
	c.ok("setup")
	const rounds = 10
	resets, failed := 0, 0
	for k := 1; k <= rounds; k++ {
		// The reset lands while the write is on its way, or just before
		// or after it: each is a case the client must survive.
		if _, err := fmt.Fprintf(c.in, "write %d\n", k); err != nil {
			t.Fatal(err)
		}
		reseted := make(chan struct{})
		reset := time.AfterFunc(time.Duration(rand.N(80))*time.Millisecond, func() { p.Reset(); close(reseted) })
		l := c.answer(fmt.Sprintf("write %d", k))
		if reset.Stop() {
			p.Reset() // the write was quicker: reset what it left open
		} else {
			<-reseted // not into the read below
		}
		resets++
		for try := 0; !strings.HasPrefix(l, "ok"); try++ {
			failed++
			t.Logf("write %d with a reset: %s", k, l)
			if !strings.HasPrefix(l, "err unavailable=true") {
				t.Fatalf("write %d, connections reset: %s; want ok or pdc.ErrUnavailable", k, l)
			}
			if try == 3 {
				t.Fatalf("write %d failed 4 times after one reset", k)
			}
			l = c.do(fmt.Sprintf("write %d", k))
		}
		c.ok(fmt.Sprintf("read %d", k))
	}
	t.Logf("%d resets, %d writes failed and were retried, %d acknowledged rounds of %d objects read back whole", resets, failed, rounds, len(partitions))
	h.alive()
}
