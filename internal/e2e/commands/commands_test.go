package commands_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

func TestUpStatusPingDown(t *testing.T) {
	tmpdir := e2e.Up(t, 3)
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	if list.Size != 3 {
		t.Fatalf("list has %d servers, want 3", list.Size)
	}

	out := e2e.MustRun(t, "status", "--tmpdir", tmpdir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "RANK") {
		t.Fatalf("status printed %d lines, want a header and 3 servers:\n%s", len(lines), out)
	}
	for i, s := range list.Servers {
		f := strings.Fields(lines[i+1])
		if len(f) != 7 || f[0] != fmt.Sprint(i) || f[1] != s.Addr || f[2] != "both" || f[3] != fmt.Sprint(s.PID) {
			t.Fatalf("status line %q does not describe %+v", lines[i+1], s)
		}
	}

	c := e2e.Connect(t, tmpdir)
	for _, s := range c.Servers() {
		if _, err := c.Ping(e2e.Ctx(t, 10*time.Second), s.Rank); err != nil {
			t.Fatalf("ping %s: %v", s.Label(), err)
		}
	}
	sts, err := c.Status(e2e.Ctx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Size != 3 || st.Requests == 0 || st.Clients == 0 || st.Uptime <= 0 {
			t.Fatalf("status of %s: %+v", st.Label(), st)
		}
	}
	c.Close()

	out = e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	if !strings.Contains(out, "stopped 3 servers") {
		t.Fatalf("down said %q", out)
	}
	for _, s := range list.Servers {
		if e2e.Alive(s.PID) {
			t.Errorf("%s (pid %d) still running after pdc down", s.Label(), s.PID)
		}
	}
	if _, err := os.Stat(filepath.Join(tmpdir, cluster.ListFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("server list still there after pdc down: %v", err)
	}
}

func TestKilledServer(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	c := e2e.Connect(t, tmpdir)
	for rank := range 2 {
		if _, err := c.Ping(e2e.Ctx(t, 10*time.Second), rank); err != nil {
			t.Fatal(err)
		}
	}
	servers := c.Servers()
	if err := syscall.Kill(servers[1].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), servers[1].PID); err != nil {
		t.Fatal(err)
	}
	// A pooled connection to the dead server and a new dial both fail as
	// unavailable, well before the deadline (which would be ErrTimeout).
	for range 2 {
		_, err := c.Ping(e2e.Ctx(t, 20*time.Second), 1)
		if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "rank 1") {
			t.Fatalf("ping a killed server: got %v, want ErrUnavailable naming rank 1", err)
		}
	}
	if _, err := c.Ping(e2e.Ctx(t, 10*time.Second), 0); err != nil {
		t.Fatalf("rank 0 should still answer: %v", err)
	}
	sts, err := c.Status(e2e.Ctx(t, 10*time.Second))
	if err == nil || sts[1].Err == nil || sts[0].Err != nil {
		t.Fatalf("status after a kill: %v, %+v", err, sts)
	}

	// Kill the rest: the list is now stale, and a new cluster in the same
	// tmpdir must start cleanly and say what it replaced.
	if err := syscall.Kill(servers[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), servers[0].PID); err != nil {
		t.Fatal(err)
	}
	r := e2e.Run(t, nil, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", filepath.Join(t.TempDir(), "data"))
	if r.Err != nil {
		t.Fatalf("up over a stale list: %v\n%s", r.Err, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "stale server list") {
		t.Errorf("up did not report the stale list; stderr:\n%s", r.Stderr)
	}
	c2 := e2e.Connect(t, tmpdir)
	for rank := range 2 {
		if _, err := c2.Ping(e2e.Ctx(t, 10*time.Second), rank); err != nil {
			t.Fatalf("new cluster: %v", err)
		}
	}
}

func TestDownReportsDeadServer(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(list.Servers[1].PID, syscall.SIGKILL)
	_ = cluster.WaitExit(e2e.Ctx(t, 10*time.Second), list.Servers[1].PID)
	r := e2e.Run(t, nil, "down", "--tmpdir", tmpdir)
	if r.Err != nil || !strings.Contains(r.Stdout, "stopped 1 server") || !strings.Contains(r.Stderr, "rank 1") {
		t.Fatalf("down with a dead server: %v\nstdout: %s\nstderr: %s", r.Err, r.Stdout, r.Stderr)
	}
	if e2e.Alive(list.Servers[0].PID) {
		t.Fatal("rank 0 still running")
	}
}

func TestSecondClusterInSameTmpdirRefused(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	secret, err := os.ReadFile(filepath.Join(tmpdir, cluster.SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	r := e2e.Run(t, nil, "up", "-n", "1", "--tmpdir", tmpdir)
	if r.Err == nil || !strings.Contains(r.Stderr, "already running") {
		t.Fatalf("second up: %v\n%s", r.Err, r.Stderr)
	}
	again, _ := os.ReadFile(filepath.Join(tmpdir, cluster.SecretFile))
	if !bytes.Equal(secret, again) {
		t.Fatal("the refused up replaced the running cluster's secret")
	}
	if _, err := e2e.Connect(t, tmpdir).Ping(e2e.Ctx(t, 10*time.Second), 0); err != nil {
		t.Fatal(err)
	}
}

func TestSecret(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	info, err := os.Stat(filepath.Join(tmpdir, cluster.SecretFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v, mode %v; want 0600", err, info.Mode())
	}
	addr := e2e.Connect(t, tmpdir).Servers()[0].Addr

	_, err = rpc.Dial(e2e.Ctx(t, 10*time.Second), addr, rpc.DialOptions{})
	if !errors.Is(err, pdc.ErrPermission) {
		t.Fatalf("no secret: got %v, want ErrPermission", err)
	}
	c := e2e.Connect(t, tmpdir, client.WithSecret([]byte("not-the-cluster-secret")))
	_, err = c.Ping(e2e.Ctx(t, 10*time.Second), 0)
	if !errors.Is(err, pdc.ErrPermission) || !strings.Contains(err.Error(), "wrong cluster secret") {
		t.Fatalf("wrong secret: got %v, want ErrPermission", err)
	}
	// The refusals are in the server's log.
	logs, _ := os.ReadFile(filepath.Join(tmpdir, "logs", "server-0.log"))
	if n := strings.Count(string(logs), "refused connection"); n < 2 {
		t.Fatalf("server log has %d refusals, want 2:\n%s", n, logs)
	}
	if _, err := e2e.Connect(t, tmpdir).Ping(e2e.Ctx(t, 10*time.Second), 0); err != nil {
		t.Fatalf("right secret: %v", err)
	}
}

// rawAuthed opens a raw socket to a server without a secret and completes
// the handshake by hand.
func rawAuthed(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	readFrame(t, nc)
	auth := (&wire.Auth{Client: "raw test"}).Marshal(nil)
	f := wire.Frame{Method: wire.MethodAuth, HeaderLen: uint32(len(auth))}
	if _, err := nc.Write(append(f.Append(nil), auth...)); err != nil {
		t.Fatal(err)
	}
	if f, _ := readFrame(t, nc); f.Flags&wire.FlagError != 0 {
		t.Fatal("auth refused")
	}
	return nc
}

func readFrame(t *testing.T, nc net.Conn) (wire.Frame, []byte) {
	t.Helper()
	var p [wire.FrameSize]byte
	if _, err := io.ReadFull(nc, p[:]); err != nil {
		t.Fatal(err)
	}
	f, err := wire.DecodeFrame(p[:])
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, uint64(f.HeaderLen)+f.PayloadLen)
	if _, err := io.ReadFull(nc, body); err != nil {
		t.Fatal(err)
	}
	return f, body
}

func TestMalformedFramesDropOnlyThatConnection(t *testing.T) {
	tmpdir := e2e.Up(t, 1, "--secret=false")
	c := e2e.Connect(t, tmpdir)
	addr := c.Servers()[0].Addr
	if _, err := c.Ping(e2e.Ctx(t, 10*time.Second), 0); err != nil {
		t.Fatal(err)
	}
	good := wire.Frame{Method: wire.MethodPing, ID: 1}
	badMagic := good.Append(nil)
	badMagic[0] = 'Z'
	cases := map[string][]byte{
		"bad magic":       badMagic,
		"garbage":         []byte("\x00\xffnot a pdc frame at all, just noise....."),
		"oversized":       (&wire.Frame{Method: wire.MethodPing, ID: 2, PayloadLen: 1 << 40}).Append(nil),
		"truncated":       good.Append(nil)[:20],
		"truncated body":  (&wire.Frame{Method: wire.MethodPing, ID: 3, PayloadLen: 1000}).Append(nil),
		"huge header len": (&wire.Frame{Method: wire.MethodPing, ID: 4, HeaderLen: 1 << 30}).Append(nil),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			nc := rawAuthed(t, addr)
			if _, err := nc.Write(b); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(name, "truncated") {
				nc.(*net.TCPConn).CloseWrite()
			}
			var one [1]byte
			if n, err := nc.Read(one[:]); err == nil {
				t.Fatalf("server answered %d bytes to a malformed frame instead of closing", n)
			}
			if _, err := c.Ping(e2e.Ctx(t, 10*time.Second), 0); err != nil {
				t.Fatalf("the server stopped serving others: %v", err)
			}
		})
	}
	// A well-formed frame of an unknown version or method gets an error
	// reply and the connection stays usable.
	nc := rawAuthed(t, addr)
	v9 := wire.Frame{Version: 9, Method: wire.MethodPing, ID: 5}
	unknown := wire.Frame{Method: 4242, ID: 6}
	ping := wire.Frame{Method: wire.MethodPing, ID: 7, PayloadLen: 2}
	msg := append(append(append(v9.Append(nil), unknown.Append(nil)...), ping.Append(nil)...), "hi"...)
	if _, err := nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]wire.Code{5: wire.CodeVersion, 6: wire.CodeUnimplemented, 7: wire.CodeOK}
	for range 3 {
		f, body := readFrame(t, nc)
		code := wire.CodeOK
		if f.Flags&wire.FlagError != 0 {
			var eb wire.ErrorBody
			if err := eb.Unmarshal(body[:f.HeaderLen]); err != nil {
				t.Fatal(err)
			}
			code = eb.Code
		} else if string(body) != "hi" {
			t.Fatalf("ping echoed %q", body)
		}
		if want[f.ID] != code {
			t.Fatalf("reply to %d: code %d, want %d", f.ID, code, want[f.ID])
		}
		delete(want, f.ID)
	}
}

func TestConnectWithoutCluster(t *testing.T) {
	_, err := client.Connect(context.Background(), client.WithTmpDir(t.TempDir()))
	if !errors.Is(err, pdc.ErrNotFound) || !strings.Contains(err.Error(), "pdc up") {
		t.Fatalf("got %v, want ErrNotFound telling how to start servers", err)
	}
	r := e2e.Run(t, nil, "status", "--tmpdir", t.TempDir())
	if r.Err == nil || !strings.Contains(r.Stderr, "no server list") {
		t.Fatalf("status without a cluster: %v\n%s", r.Err, r.Stderr)
	}
}

// pdc ping --wait, started before the servers (as a launcher recipe
// does), waits for them; with none coming up it says where it looked.
func TestPingWait(t *testing.T) {
	dir := t.TempDir()
	tmpdir := filepath.Join(dir, "tmp")
	r := e2e.Run(t, nil, "ping", "--wait", "300ms", "--tmpdir", tmpdir)
	if r.Err == nil || !strings.Contains(r.Stderr, "no cluster came up in "+tmpdir+" within 300ms") {
		t.Fatalf("ping --wait without servers: %v\n%s", r.Err, r.Stderr)
	}
	done := make(chan e2e.Result, 1)
	go func() { done <- e2e.Run(t, nil, "ping", "--wait", "60s", "--tmpdir", tmpdir) }()
	e2e.MustRun(t, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", filepath.Join(dir, "data"))
	t.Cleanup(func() { e2e.Cleanup(t, tmpdir) })
	got := <-done
	if got.Err != nil || strings.Count(got.Stdout, "pong in") != 2 {
		t.Fatalf("ping --wait started before pdc up: %v\nstdout:\n%s\nstderr:\n%s", got.Err, got.Stdout, got.Stderr)
	}
}

func TestServerCannotBind(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := e2e.Run(t, nil, "server", "--listen", ln.Addr().String(), "--tmpdir", t.TempDir(), "--datadir", t.TempDir())
	if r.Err == nil {
		t.Fatal("server started on a port in use")
	}
	lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "cannot listen on "+ln.Addr().String()) || !strings.Contains(last, "address already in use") {
		t.Fatalf("last line %q does not say why", last)
	}
}

// A rank that exits while the cluster starts: the start fails at once,
// naming it, and the ranks left waiting for it are stopped (they would
// otherwise wait out the startup timeout, here far beyond the test's
// deadline).
func TestStartFailsWhenARankExits(t *testing.T) {
	ctx := e2e.Ctx(t, 2*time.Minute)
	_, err := cluster.StartLocal(ctx, cluster.LocalConfig{
		Binary: e2e.Bin(), N: 3, TmpDir: t.TempDir(), DataDir: t.TempDir(), Timeout: time.Hour,
		RankArgs: func(rank int) []string {
			if rank == 1 {
				return []string{"--roles", "janitor"}
			}
			return nil
		},
	})
	if err == nil {
		t.Fatal("a cluster with a rank that cannot start started")
	}
	msg := err.Error()
	for _, want := range []string{
		"server rank 1", "exited before the cluster was complete", "janitor",
		"server rank 0", "server rank 2", "stopped waiting for the cluster: server rank 1 exited",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "not ready within") {
		t.Errorf("the start waited out its timeout:\n%s", msg)
	}
	pids := regexp.MustCompile(`\(pid (\d+)\)`).FindAllStringSubmatch(msg, -1)
	if len(pids) != 3 {
		t.Fatalf("error names %d pids, want 3:\n%s", len(pids), msg)
	}
	for _, m := range pids {
		pid, _ := strconv.Atoi(m[1])
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("server pid %d still runs after the failed start", pid)
		}
	}
}

// Usage errors exit 2, as docs/CLI.md says, with a message.
func TestBadFlagsAreUsageErrors(t *testing.T) {
	env := []string{"PDC_TMPDIR=" + t.TempDir()}
	for _, args := range [][]string{
		{"nosuchcommand"},
		{"up", "-n", "0"},
		{"server", "--roles", "janitor"},
		{"server", "--durability", "bogus"},
		{"server", "--rank", "3", "--size", "2"},
		{"bench", "nosuch"},
		{"bench", "io", "--size", "bogus"},
		{"query", "a="},
	} {
		r := e2e.Run(t, env, args...)
		var ee *exec.ExitError
		if !errors.As(r.Err, &ee) || ee.ExitCode() != 2 || r.Stderr == "" {
			t.Errorf("pdc %s: %v, stderr %q; want exit status 2 and a message", strings.Join(args, " "), r.Err, r.Stderr)
		}
	}
}

func TestLauncherEnvironment(t *testing.T) {
	// Two servers started the way srun or mpirun would: rank and size from
	// the environment only.
	tmpdir, datadir := t.TempDir(), t.TempDir()
	var cmds []*exec.Cmd
	for rank := range 2 {
		cmd := exec.Command(e2e.Bin(), "server", "--tmpdir", tmpdir, "--datadir", datadir)
		cmd.Env = append(os.Environ(), fmt.Sprintf("SLURM_PROCID=%d", rank), "SLURM_NTASKS=2")
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	t.Cleanup(func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	ctx := e2e.Ctx(t, 60*time.Second)
	c, err := client.Connect(ctx, client.WithTmpDir(tmpdir), client.WithWait())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := len(c.Servers()); got != 2 {
		t.Fatalf("list has %d servers, want 2", got)
	}
	for rank := range 2 {
		if _, err := c.Ping(ctx, rank); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("server exited with %v after shutdown", err)
		}
	}
	cmds = nil
}

func TestUnixSockets(t *testing.T) {
	tmpdir := e2e.Up(t, 2, "--unix")
	c := e2e.Connect(t, tmpdir)
	for _, s := range c.Servers() {
		if !strings.HasPrefix(s.Addr, "unix:") {
			t.Fatalf("%s does not listen on a Unix socket", s.Label())
		}
		if _, err := c.Ping(e2e.Ctx(t, 10*time.Second), s.Rank); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDemo(t *testing.T) {
	out := e2e.MustRun(t, "demo")
	for _, want := range []string{"pong", "RANK", "read back and checked 16777216 values", "stopped 3 servers", "demo done"} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// A demo whose output is cut off (`pdc demo | head`) still stops the
// servers it started.
func TestDemoStopsItsServersWhenItsOutputCloses(t *testing.T) {
	cmd := exec.Command(e2e.CommandBin(t, "demo"), "demo")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The header, then a row per server: RANK ADDRESS PID LOG.
	r := bufio.NewReader(out)
	var pids []int
	for len(pids) < 3 {
		line, err := r.ReadString('\n')
		if err != nil {
			_ = cmd.Process.Kill()
			t.Fatalf("demo output ended before its server table: %v", err)
		}
		if f := strings.Fields(line); len(f) == 4 && f[0] != "RANK" {
			pid, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatalf("server row %q: %v", line, err)
			}
			pids = append(pids, pid)
		}
	}
	out.Close() // what head does
	if err := cmd.Wait(); err != nil {
		t.Errorf("demo with its output closed: %v", err)
	}
	// down waited for them; an exited server may still await its reaper.
	for _, pid := range pids {
		if err := cluster.WaitExit(e2e.Ctx(t, 20*time.Second), pid); err != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("server pid %d still runs after the demo ended: %v", pid, err)
		}
	}
}

// pdc bench dtl runs the sender and the raw source as processes of their
// own and reports every mode next to its ceiling.
func TestBenchDTL(t *testing.T) {
	out := e2e.MustRun(t, "bench", "dtl", "--sizes", "4KiB,1MiB", "--budget", "20ms", "--big", "0", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 8 {
		t.Fatalf("%d result lines, want 8 (2 sizes by 4 modes):\n%s", len(lines), out)
	}
	for _, l := range lines {
		var r struct {
			Case         string  `json:"case"`
			Value        float64 `json:"value"`
			CeilingValue float64 `json:"ceiling_value"`
			Ratio        float64 `json:"ratio"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if r.Value <= 0 || r.CeilingValue <= 0 || r.Ratio <= 0 {
			t.Errorf("empty figure: %s", l)
		}
	}
	for _, bad := range [][]string{{"--modes", "carrier-pigeon"}, {"--sizes", "lots"}} {
		r := e2e.Run(t, nil, append([]string{"bench", "dtl"}, bad...)...)
		if r.Err == nil || !strings.Contains(r.Stderr, bad[1]) {
			t.Errorf("bench dtl %v: err %v, stderr %q; want an error naming %q", bad, r.Err, r.Stderr, bad[1])
		}
	}
}
