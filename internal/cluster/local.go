package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
)

// LocalConfig describes a cluster of server processes on this host.
type LocalConfig struct {
	// Binary is the pdc executable. Required.
	Binary string
	// N is the number of servers. Required.
	N int
	// TmpDir and DataDir are passed to every server. Required.
	TmpDir, DataDir string
	// Unix makes servers listen on Unix sockets in TmpDir instead of
	// 127.0.0.1 ports.
	Unix bool
	// Listen, if set, is every server's listen address (--listen) instead
	// of 127.0.0.1:0.
	Listen string
	// Roles for every server ("both" by default).
	Roles string
	// SecretFile is passed to the servers when set.
	SecretFile string
	// Args are added to every server's command line.
	Args []string
	// RankArgs, if set, returns more arguments for one rank's server.
	RankArgs func(rank int) []string
	// Timeout bounds the wait for the cluster to be complete. Default 60s.
	Timeout time.Duration
	// Ranks, if set, are the ranks to start, of N: the dead ones of a
	// running cluster, which rejoin it. Default all.
	Ranks []int
}

// Proc is a started server process.
type Proc struct {
	Rank int
	PID  int
	Addr string
	Log  string // path of its log file
}

// StartLocal starts cfg.N `pdc server` processes (or those of cfg.Ranks) in the background, in a
// session of their own so they outlive the caller, and waits until every
// one reports that the cluster is complete. On failure it kills the ones
// it started and says which one failed and what its log says.
func StartLocal(ctx context.Context, cfg LocalConfig) ([]Proc, error) {
	if cfg.N < 1 {
		return nil, fmt.Errorf("cluster of %d servers: %w", cfg.N, pdc.ErrInvalid)
	}
	if cfg.Roles == "" {
		cfg.Roles = "both"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	logDir := filepath.Join(cfg.TmpDir, "logs")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	var all []*localServer
	killAll := func() {
		for _, s := range all {
			_ = s.cmd.Process.Kill()
			_, _ = s.cmd.Process.Wait()
		}
	}
	ranks, err := cfg.ranks()
	if err != nil {
		return nil, err
	}
	for _, rank := range ranks {
		s, err := startServer(cfg, rank, logDir)
		if err != nil {
			killAll()
			return nil, err
		}
		all = append(all, s)
	}
	// A server that exits before the cluster is complete leaves the others
	// waiting for it until the timeout: stop waiting for them at once.
	waitCtx, stopWaiting := context.WithCancelCause(ctx)
	defer stopWaiting(nil)
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, s := range all {
		wg.Go(func() {
			var exited bool
			exited, errs[i] = s.awaitReady(ctx, waitCtx, cfg.Timeout)
			if exited {
				stopWaiting(fmt.Errorf("server rank %d exited", s.proc.Rank))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		killAll()
		return nil, err
	}
	procs := make([]Proc, len(all))
	for i, s := range all {
		procs[i] = s.proc
		// The servers outlive us; nobody waits for them here.
		_ = s.cmd.Process.Release()
	}
	return procs, nil
}

// localServer is a server process StartLocal started.
type localServer struct {
	proc  Proc
	cmd   *exec.Cmd
	ready *os.File // the read end of its ready pipe
	// logFrom is where this start's lines begin in its log, which earlier
	// starts in the same tmpdir wrote before: the end of the log shown
	// when it fails is of this start only.
	logFrom int64
}

// ranks are the ranks cfg starts: cfg.Ranks, or all of cfg.N.
func (cfg LocalConfig) ranks() ([]int, error) {
	ranks := cfg.Ranks
	if ranks == nil {
		for r := range cfg.N {
			ranks = append(ranks, r)
		}
	}
	for _, r := range ranks {
		if r < 0 || r >= cfg.N {
			return nil, fmt.Errorf("rank %d of a cluster of %d servers: %w", r, cfg.N, pdc.ErrInvalid)
		}
	}
	return ranks, nil
}

// LogFile is where the server of rank of the cluster in tmpdir logs
// when StartLocal starts it.
func LogFile(tmpdir string, rank int) string {
	return filepath.Join(tmpdir, "logs", fmt.Sprintf("server-%d.log", rank))
}

// startServer starts the server of rank, logging to a file in logDir,
// with a ready pipe as its descriptor 3.
func startServer(cfg LocalConfig, rank int, logDir string) (*localServer, error) {
	args, err := cfg.serverArgs(rank)
	if err != nil {
		return nil, err
	}
	logPath := LogFile(filepath.Dir(logDir), rank)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	var logFrom int64
	if st, err := logf.Stat(); err == nil {
		logFrom = st.Size()
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	cmd := exec.Command(cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Env = append(os.Environ(), "PDC_READY_FD=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = StartPinned(cmd)
	logf.Close()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("start server rank %d: %w", rank, err)
	}
	return &localServer{proc: Proc{Rank: rank, PID: cmd.Process.Pid, Log: logPath}, cmd: cmd, ready: pr, logFrom: logFrom}, nil
}

// serverArgs is the command line of rank's server.
func (cfg LocalConfig) serverArgs(rank int) ([]string, error) {
	listen := "127.0.0.1:0"
	if cfg.Listen != "" {
		listen = cfg.Listen
	}
	if cfg.Unix {
		sock := filepath.Join(cfg.TmpDir, "sock")
		if err := os.MkdirAll(sock, 0o700); err != nil {
			return nil, err
		}
		path := filepath.Join(sock, "rank-"+strconv.Itoa(rank)+".sock")
		_ = os.Remove(path)
		listen = "unix:" + path
	}
	args := []string{"server",
		"--rank", strconv.Itoa(rank), "--size", strconv.Itoa(cfg.N),
		"--listen", listen, "--tmpdir", cfg.TmpDir, "--datadir", cfg.DataDir, "--roles", cfg.Roles,
		"--startup-timeout", cfg.Timeout.String()}
	if cfg.SecretFile != "" {
		args = append(args, "--secret-file", cfg.SecretFile)
	}
	args = append(args, cfg.Args...)
	if cfg.RankArgs != nil {
		args = append(args, cfg.RankArgs(rank)...)
	}
	return args, nil
}

// awaitReady reads s's ready pipe: each server writes one line on it
// once the cluster is complete, then closes it; a server that dies
// closes it without one. It records the server's address, or says why
// the server is not ready, with the end of its log, and whether it
// exited. It gives up when waitCtx ends, as it does when another server
// exits (its cause says so); ctx bounds only the wait for an exiting
// server's last words.
func (s *localServer) awaitReady(ctx, waitCtx context.Context, timeout time.Duration) (exited bool, err error) {
	defer s.ready.Close()
	stop := context.AfterFunc(waitCtx, func() { _ = s.ready.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	line, err := bufio.NewReader(s.ready).ReadString('\n')
	f := strings.Fields(line)
	if err == nil && len(f) == 3 && f[0] == "ready" {
		s.proc.Addr = f[2]
		return false, nil
	}
	cut := errors.Is(err, os.ErrDeadlineExceeded) // else the server closed the pipe: it died
	if cut && ctx.Err() == nil {
		return false, fmt.Errorf("server rank %d (pid %d) stopped waiting for the cluster: %w", s.proc.Rank, s.proc.PID, context.Cause(waitCtx))
	}
	what := "exited before the cluster was complete"
	if cut {
		what = fmt.Sprintf("was not ready within %v", timeout)
	} else {
		exited = true
		// The pipe closes as the server dies, before its last words (the
		// error) reach its log: wait for the exit before reading it, or
		// killAll would cut them off.
		done := make(chan struct{})
		go func() {
			_ = s.cmd.Wait()
			close(done)
		}()
		t := time.NewTimer(exitWait)
		select {
		case <-done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	log, _ := os.ReadFile(s.proc.Log)
	tail := ""
	if int64(len(log)) >= s.logFrom {
		tail = strings.TrimSpace(string(log[s.logFrom:]))
	}
	if tail == "" {
		return exited, fmt.Errorf("server rank %d (pid %d) %s, and logged nothing (its log: %s)", s.proc.Rank, s.proc.PID, what, s.proc.Log)
	}
	return exited, fmt.Errorf("server rank %d (pid %d) %s; its log %s ends:\n%s",
		s.proc.Rank, s.proc.PID, what, s.proc.Log, indent(lastLines(tail, 5)))
}

// exitWait bounds the wait for a server whose ready pipe closed without
// the ready line to exit, so that its log holds its error.
const exitWait = 10 * time.Second

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// WaitExit waits until process pid has exited or ctx ends. It blocks on a
// pidfd, so it needs no polling and works for processes that are not our
// children. If the process is already gone it returns at once.
func WaitExit(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wait for pid %d: %w", pid, err)
	}
	defer unix.Close(fd)
	// An eventfd wakes the poll when ctx is canceled without a deadline.
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("wait for pid %d: %w", pid, err)
	}
	defer unix.Close(wake)
	stop := context.AfterFunc(ctx, func() {
		var one = [8]byte{1}
		_, _ = unix.Write(wake, one[:])
	})
	defer stop()
	for {
		timeout := -1
		if d, ok := ctx.Deadline(); ok {
			timeout = max(int(time.Until(d)/time.Millisecond), 0)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, timeout)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for pid %d: %w", pid, err)
		}
		if n > 0 && fds[0].Revents != 0 {
			return nil
		}
		if n == 0 || ctx.Err() != nil {
			return fmt.Errorf("pid %d still running: %w", pid, pdc.ErrTimeout)
		}
	}
}

// Running reports whether process pid exists and has not exited. A zombie
// (exited, not yet reaped by whoever inherited it) is not running.
func Running(pid int) bool {
	if pid <= 0 || unix.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: trust kill
	}
	// The state follows the parenthesised command name.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
