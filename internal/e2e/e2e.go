package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"go.uber.org/goleak"
)

// roleEnv names the role a test binary re-run as a client process plays.
const roleEnv = "PDC_E2E_ROLE"

var bin string

// Role is what a test binary re-run as a client process (ClientProc) does:
// it plays role with a client of the cluster of $PDC_TMPDIR, writing its
// lines to out.
type Role func(ctx context.Context, c *client.Client, role string, out *bufio.Writer) error

// Main is the body of a TestMain: run as a client process (ClientProc),
// it plays its role with role and returns; otherwise it builds the pdc
// binary, runs the tests, checks that they left no goroutine running
// (goleak) and removes the binary. It returns the exit code for os.Exit.
//
// The pdc binary of Main's tests is a plain build, even under -race; the
// test binary itself, and so every client process it re-runs as, is
// race-built. The crash loop, whose point is the servers' concurrency
// under many clients and faults, uses MainRace.
func Main(m *testing.M, role Role) int { return run(m, role, raceEnv == "all") }

// MainRace is Main with the servers race-built when the tests are: the
// crash loop's, where client processes do every kind of work on one
// cluster at once, through kills and restarts. A race-built server costs
// two to three times the CPU of a plain one, and the other end-to-end
// tests check what a user sees of a cluster (durability, region data,
// staging, commands, access, errors), not its concurrency, which the
// servers' own packages check under -race in process.
func MainRace(m *testing.M, role Role) int { return run(m, role, raceEnv != "none") }

// raceEnv is PDC_E2E_RACE: "all" builds every package's servers and
// commands with the race detector (under -race), "none" none of them.
var raceEnv = os.Getenv("PDC_E2E_RACE")

// serversRace says whether bin is race-built.
var serversRace bool

func run(m *testing.M, role Role, race bool) int {
	if r := os.Getenv(roleEnv); r != "" {
		if role == nil {
			fmt.Fprintf(os.Stderr, "client role %q: this test binary has no roles\n", r)
			return 1
		}
		if err := playRole(role, r); err != nil {
			fmt.Fprintln(os.Stderr, "client role:", err)
			return 1
		}
		return 0
	}
	dir, err := os.MkdirTemp("", "pdc-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "pdc")
	serversRace = Race && race
	if err := build(bin, serversRace); err != nil {
		fmt.Fprintln(os.Stderr, "build pdc:", err)
		return 1
	}
	if code := m.Run(); code != 0 {
		return code
	}
	// Every test ends with the goroutines it started stopped, as
	// goleak.VerifyTestMain checks (it calls os.Exit itself, which would
	// skip removing the binary).
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "goleak: errors on successful test run:", err)
		return 1
	}
	return 0
}

// build puts a pdc binary built from this module (with the race detector
// if race) at bin.
//
// Every end-to-end package of a module shares one binary, in a directory
// of the system's temp dir named after the module's directory: linking a
// race-built pdc costs 30-40 CPU-seconds, and `go build -o` of a binary
// already up to date does not link again (1-2 s). A file lock makes the
// packages that go test runs at once wait for the one linking, instead of
// all linking. bin is a copy of the shared binary, so that a later build
// of changed sources does not change the binary under tests already
// running (nor find it busy).
func build(bin string, race bool) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	flavour := "norace"
	if race {
		flavour = "race"
	}
	shared := filepath.Join(os.TempDir(), fmt.Sprintf("pdc-e2e-shared-%x-%s", crc32.ChecksumIEEE([]byte(root)), flavour))
	if err := os.MkdirAll(shared, 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(shared, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", shared, err)
	}
	args := []string{"build", "-o", filepath.Join(shared, "pdc")}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "github.com/pdcgo/pdc/cmd/pdc")...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return err
	}
	return copyFile(bin, filepath.Join(shared, "pdc"))
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o700)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// moduleRoot is the directory of the go.mod above the working directory
// (a test runs in its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

func playRole(role Role, r string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.Connect(ctx, client.WithTmpDir(os.Getenv("PDC_TMPDIR")))
	if err != nil {
		return err
	}
	defer c.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	return role(ctx, c, r, out)
}

// Bin is the path of the pdc binary the tests' servers run: race-built
// under -race in the packages of MainRace, plain in the others.
func Bin() string { return bin }

var plain struct {
	once sync.Once
	bin  string
	err  error
}

// PlainBin is the path of a pdc binary built without the race detector,
// built on first use (and shared, as Bin's is): Bin itself when Bin is
// plain. It runs the commands that do not start servers (see Run), and
// long runs such as a benchmark run of some fifteen clusters, whose
// servers' concurrency is not what their tests check: race-built, such a
// run costs several times the CPU, on the 2 cores CI has.
func PlainBin(t *testing.T) string {
	t.Helper()
	if !serversRace {
		return bin
	}
	plain.once.Do(func() {
		plain.bin = filepath.Join(filepath.Dir(bin), "pdc-norace")
		plain.err = build(plain.bin, false)
	})
	if plain.err != nil {
		t.Fatalf("build pdc without the race detector: %v", plain.err)
	}
	return plain.bin
}

// Result is what a pdc command printed and how it ended.
type Result struct {
	Stdout, Stderr string
	Err            error
}

// Run runs pdc with env added to ours and waits for it: Bin for the
// commands that start servers, PlainBin for every other command.
//
// In a MainRace package the servers are where the concurrency is: they
// live for the whole test and serve many clients at once. A command such
// as pdc ls or pdc put is a client that lives for a moment; its library
// is checked under -race in its own packages, in process. A race-built
// command costs four times the CPU of a plain one just to start (0.2 s
// against 0.05 s), and these tests run hundreds of them.
func Run(t *testing.T, env []string, args ...string) Result {
	t.Helper()
	return RunBin(t, CommandBin(t, args...), env, args...)
}

// CommandBin is the binary Run runs for the command line args.
func CommandBin(t *testing.T, args ...string) string {
	t.Helper()
	if len(args) > 0 && startsServers[args[0]] || raceEnv == "all" {
		return bin
	}
	return PlainBin(t)
}

// startsServers names the pdc commands that run servers of their own
// binary for a test to use. pdc demo and pdc bench start servers too, but
// for a long scripted run whose output is what their tests check.
var startsServers = map[string]bool{"up": true, "server": true}

// RunBin is Run with the pdc binary at path (Bin or PlainBin).
func RunBin(t *testing.T, path string, env []string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return Result{out.String(), errb.String(), err}
}

// MustRun runs pdc and fails the test if it fails.
func MustRun(t *testing.T, args ...string) string {
	t.Helper()
	r := Run(t, nil, args...)
	if r.Err != nil {
		t.Fatalf("pdc %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Err, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// Up starts an n-server cluster in a fresh tmpdir and stops it (or kills
// what is left of it) when the test ends. It returns the tmpdir.
func Up(t *testing.T, n int, extra ...string) string {
	t.Helper()
	tmpdir := filepath.Join(t.TempDir(), "tmp")
	args := append([]string{"up", "-n", fmt.Sprint(n), "--tmpdir", tmpdir, "--datadir", filepath.Join(t.TempDir(), "data")}, extra...)
	MustRun(t, args...)
	t.Cleanup(func() { Cleanup(t, tmpdir) })
	return tmpdir
}

// Cleanup stops the cluster of tmpdir, if it still runs, and kills what
// does not stop.
func Cleanup(t *testing.T, tmpdir string) {
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		return // stopped by the test
	}
	_ = Run(t, nil, "down", "--tmpdir", tmpdir, "--timeout", "10s")
	for _, s := range list.Servers {
		_ = syscall.Kill(s.PID, syscall.SIGKILL)
	}
}

// Connect connects a client to the cluster of tmpdir, closed when the test
// ends.
func Connect(t *testing.T, tmpdir string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Connect(context.Background(), append([]client.Option{client.WithTmpDir(tmpdir)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Ctx is a context that ends after d or with the test.
func Ctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Alive reports whether process pid runs.
func Alive(pid int) bool { return cluster.Running(pid) }

// ClientProc starts this test binary as a client process of the cluster
// of tmpdir playing role (see Main), with env added. It returns the
// process, its output by lines and the write end of its stdin; the
// process is killed when the test ends.
func ClientProc(t *testing.T, tmpdir, role string, env ...string) (*exec.Cmd, *bufio.Scanner, *os.File) {
	t.Helper()
	return ClientProcWith(t, exec.Command, tmpdir, role, env...)
}

// ClientProcWith is ClientProc with the process made by command (given
// the test binary's path): to run it elsewhere, such as on a node of a
// test bed (internal/bed).
func ClientProcWith(t *testing.T, command func(name string, args ...string) *exec.Cmd, tmpdir, role string, env ...string) (*exec.Cmd, *bufio.Scanner, *os.File) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := command(exe)
	cmd.Env = append(os.Environ(), append([]string{roleEnv + "=" + role, "PDC_TMPDIR=" + tmpdir}, env...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = stdin
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	t.Cleanup(func() {
		w.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, bufio.NewScanner(stdout), w
}

// ServerDataDir reads the data dir the cluster's servers use from rank 0's
// log.
func ServerDataDir(t *testing.T, tmpdir string) string {
	t.Helper()
	logs, err := os.ReadFile(filepath.Join(tmpdir, "logs", "server-0.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(logs)) {
		if d, ok := strings.CutPrefix(f, "datadir="); ok {
			return d
		}
	}
	t.Fatal("no datadir in the server log")
	return ""
}

// KillAll SIGKILLs every server of the cluster of tmpdir and waits for
// them to go.
func KillAll(t *testing.T, tmpdir string) {
	t.Helper()
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Servers {
		// A server the test killed before may be gone already.
		if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatal(err)
		}
	}
	for _, s := range list.Servers {
		if err := cluster.WaitExit(Ctx(t, 10*time.Second), s.PID); err != nil {
			t.Fatal(err)
		}
	}
}
