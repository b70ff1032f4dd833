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
	size := fs.String("size", "1GiB", "io: object size")
	regions := fs.String("regions", "1MiB", "io: region sizes, comma-separated")
	parts := fs.String("partitions", "object-static,region-dynamic", "io: partition strategies, comma-separated")
	rounds := fs.Int("rounds", 5, "rounds of each benchmark (the median and range are reported)")
	procs := fs.String("procs", "1,4", "vpic: client processes per case, comma-separated")
	particles := fs.String("n", "1048576", "vpic: particles per client process")
	stageSizes := fs.String("stage-sizes", "1KiB,1MiB,1GiB", "stage: file sizes, comma-separated")
	stageModes := fs.String("stage-modes", "stream,pull,push", "stage: transport modes, comma-separated (shm cannot cross hosts)")
	budget := fs.Duration("budget", time.Second, "stage: time per size and mode")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if *servers < 1 || *servers > 16 {
		return fmt.Errorf("bench hosts: --servers %d: want 1 to 16: %w", *servers, errUsage)
	}
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
	self, err := os.Executable()
	if err != nil {
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
	client, serverNodes := b.Nodes[0], b.Nodes[1:]

	tmpdir := filepath.Join(b.Shared, "pdc_tmp")
	if err := os.MkdirAll(tmpdir, 0o700); err != nil {
		return err
	}
	if _, err := cluster.NewSecret(tmpdir); err != nil {
		return fmt.Errorf("bench hosts: %w", err)
	}
	var procsRunning []*exec.Cmd
	defer func() {
		// pdc down from the client's node; a server it does not stop
		// within a minute is killed.
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		down := client.Command(dctx, self, "down", "--tmpdir", tmpdir)
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
	}()
	for i, n := range serverNodes {
		cmd := n.Command(context.Background(), self, "server", "--rank", strconv.Itoa(i), "--size", strconv.Itoa(*servers),
			"--tmpdir", tmpdir, "--datadir", n.DataDir, "--listen", net.JoinHostPort(n.Addr.String(), "0"),
			"--stage-producer-dir", n.ProducerDir, "--log-level", "warn")
		log, err := os.Create(filepath.Join(n.Dir, "server.log"))
		if err != nil {
			return err
		}
		defer log.Close()
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("bench hosts: start the server on %s: %w", n.Name, err)
		}
		procsRunning = append(procsRunning, cmd)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err = cluster.WaitForList(wctx, tmpdir)
	cancel()
	if err != nil {
		return fmt.Errorf("bench hosts: the servers did not come up (logs in %s/node-*/server.log): %w", dir, err)
	}
	// The ceilings' far end: on the first server's node, so raw TCP
	// crosses the same link the client's requests do.
	far := serverNodes[0]
	listen := net.JoinHostPort(far.Addr.String(), "0")
	raw, stopRaw, err := startCmd(far.Command(ctx, self, "bench-raw-source", "--listen", listen))
	if err != nil {
		return fmt.Errorf("bench hosts: %w", err)
	}
	defer stopRaw()
	echo, stopEcho, err := startCmd(far.Command(ctx, self, "bench-echo", "--listen", listen))
	if err != nil {
		return fmt.Errorf("bench hosts: %w", err)
	}
	defer stopEcho()
	fmt.Fprintf(e.stderr, "bench hosts: client on %s (%s), servers on %d nodes, raw TCP from %s\n", client.Name, client.Addr, *servers, far.Name)

	var all []bench.Summary
	for _, lim := range limits {
		lim = strings.TrimSpace(lim)
		label := "hosts, unshaped"
		if lim != "none" {
			if err := client.Limit(lim); err != nil {
				return fmt.Errorf("bench hosts: --limits: %w", err)
			}
			label = "hosts, " + lim
		}
		ext := []string{"--cluster", tmpdir, "--raw", raw, "--label", label, "--json", "--rounds", strconv.Itoa(*rounds)}
		for _, r := range runs {
			var args []string
			switch r {
			case "io":
				args = append([]string{"bench", "io", "--size", *size, "--regions", *regions, "--partitions", *parts,
					"--storage", "offset", "--small", "0"}, ext...)
			case "vpic":
				args = append([]string{"bench", "vpic", "--procs", *procs, "--n", *particles, "--servers", strconv.Itoa(*servers)}, ext...)
			case "stage":
				args = append([]string{"bench", "stage", "--sizes", *stageSizes, "--modes", *stageModes, "--budget", budget.String(),
					"--raw-echo", echo, "--producer-dir", far.ProducerDir, "--producer-host", far.Name}, ext...)
			}
			rs, err := runOn(ctx, e, client, self, args...)
			if err != nil {
				return fmt.Errorf("bench hosts (%s): %s: %w", label, r, err)
			}
			all = append(all, rs...)
		}
		if lim != "none" {
			if err := client.Unlimit(); err != nil {
				return fmt.Errorf("bench hosts: %w", err)
			}
		}
	}
	if *asJSON {
		return bench.WriteSummaryJSON(e.stdout, all)
	}
	return bench.WriteSummaryTable(e.stdout, all)
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
