package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/bed"
	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/internal/cluster"
)

// benchHosts measures region I/O, VPIC-IO/BD-CATS and staging between
// hosts: a test bed of network namespaces (internal/bed) with the client
// on node-1 and one server per other node, each figure next to raw TCP
// across the same link in the same run, with the client's link unshaped
// and limited by tbf.
func benchHosts(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench hosts", "[flags]")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	servers := fs.Int("servers", 2, "server nodes (one server each, both roles); the client is on one more")
	limitsFlag := fs.String("limits", "none,10gbit,1gbit", "the client node's link, comma-separated: none, or a tbf rate (tc's syntax)")
	runFlag := fs.String("run", "io,vpic,stage", "what to measure, comma-separated: io, vpic, stage")
	h := &hostsBench{}
	fs.StringVar(&h.size, "size", "1GiB", "io: object size")
	fs.StringVar(&h.regions, "regions", "1MiB", "io: region sizes, comma-separated")
	fs.StringVar(&h.parts, "partitions", "object-static,region-dynamic", "io: partition strategies, comma-separated")
	fs.IntVar(&h.rounds, "rounds", 5, "rounds of each benchmark (the median and range are reported)")
	fs.StringVar(&h.procs, "procs", "1,4", "vpic: client processes per case, comma-separated")
	fs.StringVar(&h.particles, "n", "1048576", "vpic: particles per client process")
	fs.StringVar(&h.stageSizes, "stage-sizes", "1KiB,1MiB,1GiB", "stage: file sizes, comma-separated")
	fs.StringVar(&h.stageModes, "stage-modes", "stream,pull,push", "stage: transport modes, comma-separated (shm cannot cross hosts)")
	fs.DurationVar(&h.budget, "budget", time.Second, "stage: time per size and mode")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if *servers < 1 || *servers > 16 {
		return fmt.Errorf("bench hosts: --servers %d: want 1 to 16: %w", *servers, errUsage)
	}
	h.servers = *servers
	runs := strings.Split(*runFlag, ",")
	for _, r := range runs {
		if r != "io" && r != "vpic" && r != "stage" {
			return fmt.Errorf("bench hosts: --run: unknown %q (known: io, vpic, stage): %w", r, errUsage)
		}
	}
	limits := strings.Split(*limitsFlag, ",")
	if err := bed.Available(); err != nil {
		return fmt.Errorf("bench hosts: a bed of network namespaces cannot be built here: %w", err)
	}
	var err error
	if h.self, err = os.Executable(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pdc-bench-hosts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b, err := bed.New(ctx, bed.Config{Nodes: 1 + *servers, Dir: dir})
	if err != nil {
		return fmt.Errorf("bench hosts: %w", err)
	}
	defer b.Close()
	h.client = b.Nodes[0]
	stopServers, err := h.startServers(ctx, b, dir)
	defer stopServers()
	if err != nil {
		return err
	}
	stopCeilings, err := h.startCeilings(ctx, b.Nodes[1])
	if err != nil {
		return fmt.Errorf("bench hosts: %w", err)
	}
	defer stopCeilings()
	fmt.Fprintf(e.stderr, "bench hosts: client on %s (%s), servers on %s, raw TCP from %s\n", h.client.Name, h.client.Addr, count(*servers, "node", "nodes"), h.far.Name)

	var all []bench.Summary
	for _, lim := range limits {
		rs, err := h.underLimit(ctx, e, strings.TrimSpace(lim), runs)
		if err != nil {
			return err
		}
		all = append(all, rs...)
	}
	if *asJSON {
		return bench.WriteSummaryJSON(e.stdout, all)
	}
	return bench.WriteSummaryTable(e.stdout, all)
}

// hostsBench is one run of pdc bench hosts: its flags, and the bed's
// cluster and ceilings once started.
type hostsBench struct {
	servers                                int
	size, regions, parts, procs, particles string
	stageSizes, stageModes                 string
	rounds                                 int
	budget                                 time.Duration

	self   string // this pdc
	client *bed.Node
	tmpdir string
	// far is the ceilings' node; raw and echo their addresses.
	far       *bed.Node
	raw, echo string
}

// startServers starts a server on each node of b but the first (the
// client's), in a tmpdir on b's shared directory, and waits for the
// cluster's list. The function it returns (even with an error) stops
// them: pdc down from the client's node; a server it does not stop
// within a minute is killed.
func (h *hostsBench) startServers(ctx context.Context, b *bed.Bed, dir string) (func(), error) {
	h.tmpdir = filepath.Join(b.Shared, "pdc_tmp")
	if err := os.MkdirAll(h.tmpdir, 0o700); err != nil {
		return func() {}, err
	}
	if _, err := cluster.NewSecret(h.tmpdir); err != nil {
		return func() {}, fmt.Errorf("bench hosts: %w", err)
	}
	var procsRunning []*exec.Cmd
	var logs []*os.File
	stop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		down := h.client.Command(dctx, h.self, "down", "--tmpdir", h.tmpdir)
		_ = down.Run()
		for _, p := range procsRunning {
			done := make(chan struct{})
			go func() { _ = p.Wait(); close(done) }()
			select {
			case <-done:
			case <-dctx.Done():
				_ = p.Process.Kill()
				<-done
			}
		}
		for _, l := range logs {
			l.Close()
		}
	}
	for i, n := range b.Nodes[1:] {
		cmd := n.Command(context.Background(), h.self, "server", "--rank", strconv.Itoa(i), "--size", strconv.Itoa(h.servers),
			"--tmpdir", h.tmpdir, "--datadir", n.DataDir, "--listen", net.JoinHostPort(n.Addr.String(), "0"),
			"--stage-producer-dir", n.ProducerDir, "--log-level", "warn")
		log, err := os.Create(filepath.Join(n.Dir, "server.log"))
		if err != nil {
			return stop, err
		}
		logs = append(logs, log)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			return stop, fmt.Errorf("bench hosts: start the server on %s: %w", n.Name, err)
		}
		procsRunning = append(procsRunning, cmd)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err := cluster.WaitForList(wctx, h.tmpdir)
	cancel()
	if err != nil {
		return stop, fmt.Errorf("bench hosts: the servers did not come up (logs in %s/node-*/server.log): %w", dir, err)
	}
	return stop, nil
}

// startCeilings starts the ceilings' far end on node far (the first
// server's), so raw TCP crosses the same link the client's requests do.
func (h *hostsBench) startCeilings(ctx context.Context, far *bed.Node) (func(), error) {
	h.far = far
	listen := net.JoinHostPort(far.Addr.String(), "0")
	raw, stopRaw, err := startCmd(far.Command(ctx, h.self, "bench-raw-source", "--listen", listen))
	if err != nil {
		return nil, err
	}
	echo, stopEcho, err := startCmd(far.Command(ctx, h.self, "bench-echo", "--listen", listen))
	if err != nil {
		stopRaw()
		return nil, err
	}
	h.raw, h.echo = raw, echo
	return func() { stopEcho(); stopRaw() }, nil
}

// underLimit runs the benchmarks runs with the client node's link
// limited to lim (none: unshaped), each as pdc bench on the client's node
// against the cluster.
func (h *hostsBench) underLimit(ctx context.Context, e *env, lim string, runs []string) ([]bench.Summary, error) {
	label := "hosts, unshaped"
	if lim != "none" {
		if err := h.client.Limit(lim); err != nil {
			return nil, fmt.Errorf("bench hosts: --limits: %w", err)
		}
		label = "hosts, " + lim
	}
	ext := []string{"--cluster", h.tmpdir, "--raw", h.raw, "--label", label, "--json", "--rounds", strconv.Itoa(h.rounds)}
	var all []bench.Summary
	for _, r := range runs {
		var args []string
		switch r {
		case "io":
			args = append([]string{"bench", "io", "--size", h.size, "--regions", h.regions, "--partitions", h.parts,
				"--storage", "offset", "--small", "0"}, ext...)
		case "vpic":
			args = append([]string{"bench", "vpic", "--procs", h.procs, "--n", h.particles, "--servers", strconv.Itoa(h.servers)}, ext...)
		case "stage":
			args = append([]string{"bench", "stage", "--sizes", h.stageSizes, "--modes", h.stageModes, "--budget", h.budget.String(),
				"--raw-echo", h.echo, "--producer-dir", h.far.ProducerDir, "--producer-host", h.far.Name}, ext...)
		}
		rs, err := runOn(ctx, e, h.client, h.self, args...)
		if err != nil {
			return nil, fmt.Errorf("bench hosts (%s): %s: %w", label, r, err)
		}
		all = append(all, rs...)
	}
	if lim != "none" {
		if err := h.client.Unlimit(); err != nil {
			return nil, fmt.Errorf("bench hosts: %w", err)
		}
	}
	return all, nil
}

// runOn runs a pdc benchmark with --json on node and returns its results;
// its progress lines go to our stderr.
func runOn(ctx context.Context, e *env, node *bed.Node, self string, args ...string) ([]bench.Summary, error) {
	cmd := node.Command(ctx, self, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, e.stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pdc %s on %s: %w", strings.Join(args, " "), node.Name, err)
	}
	var rs []bench.Summary
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r bench.Summary
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("pdc %s on %s printed %q: %w", args[1], node.Name, sc.Text(), pdc.ErrProtocol)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// startCmd starts a hidden subcommand (see startChild) from cmd.
func startCmd(cmd *exec.Cmd) (line string, stop func(), err error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	// The raw ceilings' servers run where pdc's do.
	if err := cluster.StartPinned(cmd); err != nil {
		return "", nil, err
	}
	stop = func() {
		stdin.Close()
		_ = cmd.Wait()
	}
	line, err = bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("%s did not start: %w", strings.Join(cmd.Args, " "), err)
	}
	return strings.TrimSpace(line), stop, nil
}
