package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Stop stops process pid with SIGSTOP, as a hung node or a firewall that
// drops everything would look to its peers, and returns once every thread
// of it has stopped; the process is continued when the test ends (or
// earlier by Continue). kill(2) returns before that: under load a server
// went on answering for milliseconds after it, so a test that went on at
// once saw a stopped server answer (an fsck's hello, a dims cut pushed
// to it).
func Stop(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop process %d: %v", pid, err)
	}
	t.Cleanup(func() { Continue(pid) })
	// Nothing tells of a state change of a process that is not this one's
	// child: /proc is read again on a tick, for up to a minute.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !allStopped(t, pid) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("process %d did not stop within a minute of SIGSTOP", pid)
		}
	}
}

// Continue continues process pid after Stop.
func Continue(pid int) { _ = syscall.Kill(pid, syscall.SIGCONT) }

// allStopped reports whether every thread of process pid is stopped
// (state T in /proc).
func allStopped(t *testing.T, pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("process %d: no threads found: %v", pid, err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			return false
		}
		// The state follows the command's closing parenthesis.
		if i := strings.LastIndexByte(string(b), ')'); i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}
