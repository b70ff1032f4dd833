package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/internal/cluster"
)

func init() {
	register(command{name: "bench", summary: "measure pdc next to this machine's ceilings (rpc)", run: runBench})
	register(command{name: "bench-echo", summary: "raw echo server for the benchmarks' ceilings", run: runBenchEcho, hidden: true})
	register(command{name: "bench-meta-client", summary: "one client process of bench meta", run: runBenchMetaClient, hidden: true})
}

func runBench(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(e.stderr, "Usage: pdc bench <what> [flags]\n\nwhat:\n  rpc    64-byte round trips: sequential, 64 in flight, 16 clients\n  meta   metadata: create, open, tags, batched and parallel creates, restart")
		return fmt.Errorf("bench: say what to measure: %w", errUsage)
	}
	switch args[0] {
	case "rpc":
		return benchRPC(ctx, e, args[1:])
	case "meta":
		return benchMeta(ctx, e, args[1:])
	}
	return fmt.Errorf("bench: unknown benchmark %q (known: rpc, meta): %w", args[0], errUsage)
}

func benchRPC(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench rpc", "[flags]")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	dur := fs.Duration("duration", 2*time.Second, "length of each case")
	size := fs.Int("size", 64, "message size in bytes")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pdc-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tmpdir := filepath.Join(dir, "tmp")

	// The ceiling's server and ours each run in a process of their own,
	// as servers do for real.
	rawAddr, stopEcho, err := startEcho(ctx)
	if err != nil {
		return fmt.Errorf("bench rpc: %w", err)
	}
	defer stopEcho()
	procs, err := up(ctx, e.stderr, upOptions{n: 1, tmpdir: tmpdir, datadir: filepath.Join(dir, "data"), roles: "both", secret: true, timeout: 60 * time.Second})
	if err != nil {
		return fmt.Errorf("bench rpc: %w", err)
	}
	defer down(context.Background(), io.Discard, tmpdir, 30*time.Second)
	secret, err := cluster.SecretIn(tmpdir)
	if err != nil {
		return err
	}
	rs, err := bench.RPC(ctx, bench.RPCConfig{RawAddr: rawAddr, RPCAddr: procs[0].Addr, Secret: secret, Duration: *dur, Size: *size})
	if err != nil {
		return fmt.Errorf("bench rpc: %w", err)
	}
	if *asJSON {
		return bench.WriteJSON(e.stdout, rs)
	}
	return bench.WriteTable(e.stdout, rs)
}

// startEcho runs `pdc bench-echo` and returns its address. The child exits
// when its stdin closes, so it cannot outlive us.
func startEcho(ctx context.Context) (addr string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self, "bench-echo")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() {
		stdin.Close()
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("echo server did not start: %w", err)
	}
	return strings.TrimSpace(line), stop, nil
}

func runBenchEcho(ctx context.Context, e *env, args []string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s := bench.NewEchoServer(ln)
	defer s.Close()
	fmt.Fprintln(e.stdout, s.Addr())
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}
