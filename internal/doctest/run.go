package doctest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
)

// Config says which blocks Run runs, and with what.
type Config struct {
	Root string // the module root: the files' paths are relative to it
	Pdc  string // the pdc binary the blocks run
	// Capi, when set, is where libpdc is installed: Run runs the blocks
	// marked capi, with ./build/capi a link to it. When empty, Run runs
	// the others.
	Capi string
	// Timeout bounds each block (default 2 minutes).
	Timeout time.Duration
	// Require makes a program a block needs (needs=) and this machine
	// lacks fail the block instead of skipping its session.
	Require bool
}

// Run runs the blocks Config selects, each as a subtest named after its
// file and line, the blocks of each file in order in their sessions.
func Run(t *testing.T, cfg Config, blocks []Block) {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Minute
	}
	for _, sb := range Sessions(blocks) {
		if sb.Capi != (cfg.Capi != "") {
			continue
		}
		if missing := missingTools(sb.Blocks); missing != "" {
			for _, b := range sb.Blocks {
				t.Run(strings.ReplaceAll(b.Where(), "/", "_"), func(t *testing.T) {
					if cfg.Require {
						t.Fatalf("the session needs %s", missing)
					}
					t.Skipf("the session needs %s", missing)
				})
			}
			continue
		}
		s := newSession(t, cfg, sb.Blocks[0].Mark.Cluster)
		for _, b := range sb.Blocks {
			t.Run(strings.ReplaceAll(b.Where(), "/", "_"), func(t *testing.T) {
				if s.broken != "" {
					t.Skipf("the session's cluster did not start: %s", s.broken)
				}
				s.run(t, b)
			})
		}
		s.close(t)
	}
}

// missingTools names the programs the blocks need (needs=) that are not
// on PATH, or is empty.
func missingTools(blocks []Block) string {
	var missing []string
	for _, b := range blocks {
		for _, tool := range b.Mark.Needs {
			if _, err := exec.LookPath(tool); err != nil && !slices.Contains(missing, tool) {
				missing = append(missing, tool)
			}
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return strings.Join(missing, ", ") + ", not installed"
}

// SessionBlocks are the blocks one session runs.
type SessionBlocks struct {
	Blocks []Block
	// Capi: a block of the session needs libpdc, so capi's tests run it
	// all.
	Capi bool
}

// Sessions groups the blocks that run (pdc:run and pdc:file) into
// sessions: a file's blocks up to the next that begins a new one.
func Sessions(blocks []Block) []SessionBlocks {
	var all []SessionBlocks
	for _, b := range blocks {
		if b.Mark.Kind != "run" && b.Mark.Kind != "file" {
			continue
		}
		if n := len(all); n == 0 || all[n-1].Blocks[0].File != b.File || b.Mark.New || b.Mark.Cluster {
			all = append(all, SessionBlocks{})
		}
		sb := &all[len(all)-1]
		sb.Blocks = append(sb.Blocks, b)
		sb.Capi = sb.Capi || b.Mark.Capi
	}
	return all
}

// session is the directory, environment and cluster a file's blocks share.
type session struct {
	cfg    Config
	dir    string
	env    []string
	broken string // why the session's cluster did not start
	closed bool
}

func newSession(t *testing.T, cfg Config, withCluster bool) *session {
	t.Helper()
	dir := t.TempDir()
	s := &session{cfg: cfg, dir: dir}
	bin := filepath.Join(dir, "bin")
	for _, err := range []error{
		os.Mkdir(bin, 0o755),
		os.Mkdir(filepath.Join(dir, "tmp"), 0o700),
		os.Symlink(cfg.Pdc, filepath.Join(bin, "pdc")),
		os.Symlink(cfg.Pdc, filepath.Join(dir, "pdc")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if cfg.Capi != "" {
		if err := os.MkdirAll(filepath.Join(dir, "build"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(cfg.Capi, filepath.Join(dir, "build", "capi")); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range os.Environ() {
		// The blocks see pdc's defaults, not the settings of whoever
		// runs the tests.
		if strings.HasPrefix(kv, "PDC_") || strings.HasPrefix(kv, "DYAD_") || strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "TMPDIR=") {
			continue
		}
		s.env = append(s.env, kv)
	}
	path := bin + ":" + os.Getenv("PATH")
	if cfg.Capi != "" {
		// As for a reader who exported it as the README says.
		path = bin + ":" + filepath.Join(cfg.Capi, "bin") + ":" + os.Getenv("PATH")
	}
	s.env = append(s.env,
		"PATH="+path,
		"TMPDIR="+filepath.Join(dir, "tmp"),
		"PDC_TMPDIR="+filepath.Join(dir, "pdc_tmp"),
		"PDC_DATA_LOC="+filepath.Join(dir, "pdc_data"))
	t.Cleanup(func() { s.close(t) })
	if withCluster {
		out, err := s.command(t, "up", cfg.Pdc, "up", "-n", "2")
		if err != nil {
			s.broken = fmt.Sprintf("pdc up -n 2: %v\n%s", err, out)
			t.Errorf("%s", s.broken)
		}
	}
	return s
}

// close stops the session's cluster, if one runs, and kills what is left
// of it.
func (s *session) close(t *testing.T) {
	if s.closed {
		return
	}
	s.closed = true
	tmpdir := filepath.Join(s.dir, "pdc_tmp")
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		return // no cluster, or stopped by the blocks
	}
	if out, err := s.command(t, "down", s.cfg.Pdc, "down", "--tmpdir", tmpdir, "--timeout", "10s"); err != nil {
		t.Logf("pdc down after the blocks: %v\n%s", err, out)
	}
	for _, srv := range list.Servers {
		if srv.PID > 0 && cluster.Running(srv.PID) {
			_ = syscall.Kill(srv.PID, syscall.SIGKILL)
		}
	}
}

func (s *session) run(t *testing.T, b Block) {
	switch {
	case b.Mark.Kind == "file":
		if err := os.WriteFile(filepath.Join(s.dir, b.Mark.Name), []byte(b.Body), 0o644); err != nil {
			t.Fatal(err)
		}
	case b.IsShell():
		out, err := s.command(t, "block", "bash", "-euo", "pipefail", "-c", b.Body)
		if err != nil {
			t.Fatalf("%s: the block failed: %v\n--- block:\n%s--- output:\n%s", b.Where(), err, b.Body, out)
		}
		t.Logf("output:\n%s", out)
	case b.Lang == "go":
		prog, err := s.buildGo(t, b)
		if err != nil {
			t.Fatalf("%s: the Go block does not build against this module: %v\n--- block:\n%s", b.Where(), err, numbered(b.Body))
		}
		out, err := s.command(t, "go-run", prog)
		if err != nil {
			t.Fatalf("%s: the Go program failed: %v\n--- output:\n%s", b.Where(), err, out)
		}
		t.Logf("output:\n%s", out)
	default:
		t.Fatalf("%s: doctest cannot run a %q block", b.Where(), b.Lang)
	}
}

// buildGo builds a Go block as package main of this module (through an
// overlay: the source tree is not written) and returns the program.
func (s *session) buildGo(t *testing.T, b Block) (string, error) {
	src := filepath.Join(s.dir, "tmp", fmt.Sprintf("block%d.go", b.Line))
	if err := os.WriteFile(src, []byte(b.Body), 0o644); err != nil {
		return "", err
	}
	pkg := filepath.Join(s.cfg.Root, "internal", "doctest", fmt.Sprintf("block%d", b.Line))
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(pkg, "main.go"): src}})
	if err != nil {
		return "", err
	}
	ov := filepath.Join(s.dir, "tmp", fmt.Sprintf("overlay%d.json", b.Line))
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		return "", err
	}
	prog := filepath.Join(s.dir, "tmp", fmt.Sprintf("block%d", b.Line))
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	rel, err := filepath.Rel(s.cfg.Root, pkg)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-overlay", ov, "-o", prog, "./"+filepath.ToSlash(rel))
	cmd.Dir = s.cfg.Root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	return prog, nil
}

// command runs a program in the session's directory and environment,
// under the block timeout, in a process group of its own that is killed
// when it ends (background jobs a block left die with it). It returns what
// the program printed.
func (s *session) command(t *testing.T, what, name string, args ...string) (string, error) {
	out, err := os.CreateTemp("", "doctest-"+what+"-")
	if err != nil {
		return "", err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = s.dir
	cmd.Env = s.env
	// A file, not a pipe: a background job still holding the output
	// does not keep Wait waiting.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	runErr := cmd.Run()
	if cmd.Process != nil {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Logf("kill the process group of %s: %v", what, err)
		}
	}
	if ctx.Err() != nil {
		runErr = fmt.Errorf("%w (timed out after %v)", runErr, s.cfg.Timeout)
	}
	printed, err := os.ReadFile(out.Name())
	if err != nil {
		return "", err
	}
	return string(printed), runErr
}

// numbered is text with line numbers, for compiler messages.
func numbered(text string) string {
	var b strings.Builder
	for i, l := range strings.SplitAfter(text, "\n") {
		if l != "" {
			fmt.Fprintf(&b, "%3d  %s", i+1, l)
		}
	}
	return b.String()
}
