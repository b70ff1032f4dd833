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

// runProcs runs one child process of this binary per element of args,
// each of which prints "ready" once set up, waits for "go" on its stdin,
// does its work and prints "done". The children are released together;
// runProcs returns the time from their release until the last is done.
func runProcs(ctx context.Context, args [][]string) (time.Duration, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	type proc struct {
		cmd  *exec.Cmd
		in   io.WriteCloser
		out  *bufio.Reader
		errb *strings.Builder
	}
	var ps []proc
	defer func() {
		for _, p := range ps {
			p.in.Close()
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	}()
	for _, a := range args {
		cmd := exec.CommandContext(ctx, self, a...)
		in, err := cmd.StdinPipe()
		if err != nil {
			return 0, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, err
		}
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		ps = append(ps, proc{cmd, in, bufio.NewReader(out), &errb})
	}
	for _, p := range ps {
		if line, err := p.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
			_ = p.cmd.Wait()
			return 0, fmt.Errorf("client process did not start: %v %s", err, p.errb)
		}
	}
	t0 := time.Now()
	for _, p := range ps {
		fmt.Fprintln(p.in, "go")
	}
	var errs []error
	for _, p := range ps {
		if line, err := p.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "done" {
			_ = p.cmd.Wait()
			errs = append(errs, fmt.Errorf("client process failed: %v %s", err, p.errb))
		}
	}
	return time.Since(t0), errors.Join(errs...)
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
