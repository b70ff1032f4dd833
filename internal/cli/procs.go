package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// procGroup is a set of client processes started together. Each prints
// "ready" on its stdout once set up and then waits for a line "go" on its
// stdin, so that all are released at one instant.
type procGroup struct {
	ps []*proc
}

type proc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	errb   *strings.Builder
	waited bool
	err    error // from cmd.Wait, once waited
}

// wait waits for the process to exit (once) and returns how it ended.
func (p *proc) wait() error {
	if !p.waited {
		p.in.Close()
		p.err, p.waited = p.cmd.Wait(), true
	}
	return p.err
}

// stop kills the process unless it was waited for, and waits for it.
func (p *proc) stop() error {
	if !p.waited {
		_ = p.cmd.Process.Kill()
	}
	return p.wait()
}

// failure says that the process printed line (or nothing, readErr) where
// it should have said want, how it ended, and what it printed on stderr.
// It requires the process to have been waited for.
func (p *proc) failure(what, want, line string, readErr error) error {
	msg := fmt.Sprintf("%s: want %q, got %q", what, want, strings.TrimSpace(line))
	if readErr != nil && readErr != io.EOF {
		msg += fmt.Sprintf(" (%v)", readErr)
	}
	if p.err != nil {
		msg += ": " + p.err.Error()
	}
	if s := strings.TrimSpace(p.errb.String()); s != "" {
		msg += ": " + s
	}
	return errors.New(msg)
}

// startProcs starts cmds, which must not have their stdin, stdout or
// stderr set, and returns once each has said "ready". On an error it has
// stopped those it started.
func startProcs(cmds []*exec.Cmd) (*procGroup, error) {
	g := &procGroup{}
	for _, cmd := range cmds {
		in, err := cmd.StdinPipe()
		if err != nil {
			g.stop()
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			g.stop()
			return nil, err
		}
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			g.stop()
			return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
		}
		g.ps = append(g.ps, &proc{cmd: cmd, in: in, out: bufio.NewReader(out), errb: &errb})
	}
	for _, p := range g.ps {
		if line, err := p.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
			g.stop()
			return nil, p.failure("client process did not start", "ready", line, err)
		}
	}
	return g, nil
}

// release tells every process to go.
func (g *procGroup) release() {
	for _, p := range g.ps {
		fmt.Fprintln(p.in, "go")
	}
}

// stop kills the processes still running and reaps them all.
func (g *procGroup) stop() {
	for _, p := range g.ps {
		_ = p.stop()
	}
}

// runProcs runs one child process of this binary per element of args,
// each of which prints "ready" once set up, waits for "go" on its stdin,
// does its work and prints "done". The children are released together;
// runProcs returns the time from their release until the last is done,
// and then waits for each to exit: one that fails after its done (a
// BD-CATS reader whose check found a wrong value) fails the run.
func runProcs(ctx context.Context, args [][]string) (time.Duration, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmds := make([]*exec.Cmd, len(args))
	for i, a := range args {
		cmds[i] = exec.CommandContext(ctx, self, a...)
	}
	g, err := startProcs(cmds)
	if err != nil {
		return 0, err
	}
	defer g.stop()
	t0 := time.Now()
	g.release()
	var errs []error
	for _, p := range g.ps {
		if line, err := p.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "done" {
			_ = p.stop()
			errs = append(errs, p.failure("client process failed", "done", line, err))
		}
	}
	d := time.Since(t0)
	// What a process does after done (checking what it read, closing)
	// is not timed, but must succeed.
	for _, p := range g.ps {
		if !p.waited {
			if err := p.wait(); err != nil {
				errs = append(errs, p.failure("client process failed after it was done", "exit status 0", "", nil))
			}
		}
	}
	return d, errors.Join(errs...)
}

// awaitGo is the child's side of runProcs: it says it is ready and
// waits for the start signal.
func awaitGo(e *env) error {
	fmt.Fprintln(e.stdout, "ready")
	if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || strings.TrimSpace(line) != "go" {
		return fmt.Errorf("no start signal: %v", err)
	}
	return nil
}
