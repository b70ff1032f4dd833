package bed_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/bed"
	"go.uber.org/goleak"
)

// roleEnv makes the test binary, run on a node, play a role instead of
// running the tests: "echo" listens on $BED_ADDR:0, prints its port and
// echoes what each connection sends; "dial" connects to $BED_ADDR,
// sends $BED_BYTES bytes, reads them back and prints "ok".
const roleEnv = "BED_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		// Every test ends with the goroutines it started stopped.
		goleak.VerifyTestMain(m)
	case "echo":
		os.Exit(echo(os.Getenv("BED_ADDR")))
	case "dial":
		n, _ := strconv.Atoi(os.Getenv("BED_BYTES"))
		if err := dial(os.Getenv("BED_ADDR"), n, 3*time.Second); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("ok")
		os.Exit(0)
	}
	os.Exit(2)
}

func echo(host string) int {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

// dial sends n bytes to the echo server at addr and reads them back.
func dial(addr string, n int, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(i * 7)
	}
	errc := make(chan error, 1)
	go func() { _, err := c.Write(out); errc <- err }()
	in := make([]byte, n)
	if _, err := io.ReadFull(c, in); err != nil {
		return err
	}
	if err := <-errc; err != nil {
		return err
	}
	if string(in) != string(out) {
		return errors.New("echo differs")
	}
	return nil
}

// startEcho runs the echo role on n and returns its address.
func startEcho(t *testing.T, n *bed.Node) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := n.Command(context.Background(), exe)
	cmd.Env = append(os.Environ(), roleEnv+"=echo", "BED_ADDR="+n.Addr.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("echo on %s printed no port: %v", n.Name, sc.Err())
	}
	port, err := strconv.Atoi(sc.Text())
	if err != nil {
		t.Fatalf("echo on %s: %s", n.Name, sc.Text())
	}
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(port))
}

// dialFrom runs the dial role on n against addr with bytes bytes.
func dialFrom(n *bed.Node, addr string, bytes int) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := n.Command(ctx, exe)
	cmd.Env = append(os.Environ(), roleEnv+"=dial", "BED_ADDR="+addr, "BED_BYTES="+strconv.Itoa(bytes))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func TestNodesReachEachOtherUnlessPartitioned(t *testing.T) {
	b := bed.Start(t, 2)
	n1, n2 := b.Nodes[0], b.Nodes[1]
	if n1.Addr == n2.Addr || !n1.Addr.IsValid() || !b.Host.IsValid() {
		t.Fatalf("addresses: host %v, nodes %v %v", b.Host, n1.Addr, n2.Addr)
	}
	addr := startEcho(t, n1)
	if err := dialFrom(n2, addr, 1<<20); err != nil {
		t.Fatalf("%s to %s: %v", n2.Name, addr, err)
	}
	if err := n1.Partition(); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(n2, addr, 1); err == nil {
		t.Fatalf("%s reached partitioned %s", n2.Name, n1.Name)
	} else {
		t.Logf("partitioned: %v", err)
	}
	if err := n1.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(n2, addr, 1<<20); err != nil {
		t.Fatalf("after heal, %s to %s: %v", n2.Name, addr, err)
	}
	// The host namespace reaches the nodes too (over the bridge).
	if err := dial(addr, 1000, 10*time.Second); err != nil {
		t.Fatalf("host to %s: %v", addr, err)
	}
}

// TestCut: two nodes cut from each other still reach a third.
func TestCut(t *testing.T) {
	b := bed.Start(t, 3)
	n1, n2, n3 := b.Nodes[0], b.Nodes[1], b.Nodes[2]
	addr := startEcho(t, n1)
	if err := n2.Cut(n1); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(n2, addr, 1); err == nil {
		t.Fatalf("%s reached %s through a cut", n2.Name, n1.Name)
	} else {
		t.Logf("cut: %v", err)
	}
	if err := dialFrom(n3, addr, 1000); err != nil {
		t.Fatalf("%s to %s beside a cut: %v", n3.Name, n1.Name, err)
	}
	if err := n2.Uncut(n1); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(n2, addr, 1000); err != nil {
		t.Fatalf("after Uncut: %v", err)
	}
}

func TestNodeHostName(t *testing.T) {
	b := bed.Start(t, 2)
	for _, n := range b.Nodes {
		out, err := n.Command(context.Background(), "hostname").Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != n.Name {
			t.Errorf("host name on %s is %q", n.Name, got)
		}
	}
	self, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(self, "node-") {
		t.Errorf("the host's own name changed to %q", self)
	}
	for _, d := range []string{b.Shared, b.Nodes[0].DataDir, b.Nodes[1].ProducerDir, b.Nodes[1].ConsumerDir} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Errorf("dir %s: %v", d, err)
		}
	}
}

func TestLimit(t *testing.T) {
	b := bed.Start(t, 2)
	n1, n2 := b.Nodes[0], b.Nodes[1]
	if err := n1.Limit("1x"); err == nil {
		t.Error("Limit took a rate of 1x")
	}
	if err := n1.Limit("20mbit"); err != nil {
		t.Fatal(err)
	}
	host, node, err := n1.Qdiscs()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{host, node} {
		if !strings.Contains(q, "tbf") || !strings.Contains(q, "rate 20Mbit") {
			t.Errorf("no tbf at 20Mbit: %q", q)
		}
	}
	addr := startEcho(t, n1)
	if err := dialFrom(n2, addr, 256<<10); err != nil {
		t.Fatalf("through the limit: %v", err)
	}
	if err := n1.Unlimit(); err != nil {
		t.Fatal(err)
	}
	host, node, err = n1.Qdiscs()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(host+node, "tbf") {
		t.Errorf("tbf left after Unlimit: %q %q", host, node)
	}
}

func TestProxy(t *testing.T) {
	b := bed.Start(t, 1)
	target := startEcho(t, b.Nodes[0])
	p, err := bed.NewProxy(net.JoinHostPort(b.Host.String(), "0"), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if err := dial(p.Addr(), 1<<20, 10*time.Second); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	const delay = 40 * time.Millisecond
	p.SetLatency(delay, 20*time.Millisecond)
	c, err := net.DialTimeout("tcp", p.Addr(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 5)
	start := time.Now()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("round trip: %q %v", buf, err)
	}
	// Delayed both ways: a round trip takes at least twice the delay.
	if rtt := time.Since(start); rtt < 2*delay {
		t.Errorf("round trip took %v with a delay of %v each way", rtt, delay)
	}

	p.Reset()
	_, err = c.Read(buf)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after Reset: %v, want a connection reset", err)
	}
	// New connections still work.
	p.SetLatency(0, 0)
	if err := dial(p.Addr(), 1000, 10*time.Second); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
}

// TestSweep: what a killed bed process left behind goes at the next New;
// what a live one has stays.
func TestSweep(t *testing.T) {
	bed.Start(t, 1) // skips or fails as the others when there is no bed
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	d36 := strconv.FormatInt(int64(dead.Process.Pid), 36)
	live36 := strconv.FormatInt(int64(os.Getpid()), 36)
	deadNS := fmt.Sprintf("pdcbed-%d-900-1", dead.Process.Pid)
	liveNS := fmt.Sprintf("pdcbed-%d-900-1", os.Getpid())
	deadBr, deadV := "pb"+d36+"_p0_b", "pb"+d36+"_p0_1"
	liveBr := "pb" + live36 + "_p0_b"
	ctx := context.Background()
	for _, args := range [][]string{
		{"netns", "add", deadNS},
		{"netns", "add", liveNS},
		{"link", "add", deadBr, "type", "bridge"},
		{"link", "add", liveBr, "type", "bridge"},
		{"link", "add", deadV, "type", "veth", "peer", "name", "eth0", "netns", deadNS},
		{"link", "set", deadV, "master", deadBr, "up"},
	} {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "delete", liveNS).Run()
		_ = exec.Command("ip", "link", "delete", liveBr).Run()
	})
	if err := bed.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/run/netns/" + deadNS, "/sys/class/net/" + deadBr, "/sys/class/net/" + deadV} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left by a dead pid: %v", filepath.Base(p), err)
		}
	}
	for _, p := range []string{"/run/netns/" + liveNS, "/sys/class/net/" + liveBr} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s of a live pid swept: %v", filepath.Base(p), err)
		}
	}
}

// TestClose: Close kills what runs on the nodes, removes the links and
// may be called again.
func TestClose(t *testing.T) {
	b := bed.Start(t, 2)
	cmd := b.Nodes[1].Command(context.Background(), "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("sleep on a node ended well after Close")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close left a process running on a node")
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, n := range b.Nodes {
		if _, err := os.Stat("/run/netns/" + n.NS); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s after Close: %v", n.NS, err)
		}
	}
	links, _ := os.ReadDir("/sys/class/net")
	pfx := "pb" + strconv.FormatInt(int64(os.Getpid()), 36) + "_"
	for _, l := range links {
		if strings.HasPrefix(l.Name(), pfx) && !strings.Contains(l.Name(), "_p0_") {
			// Other tests of this process may run beds at the same
			// time only with t.Parallel, which these do not use.
			t.Errorf("link %s after Close", l.Name())
		}
	}
}
