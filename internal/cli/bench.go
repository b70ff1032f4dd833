package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/dtl/dtlpeer"
)

func init() {
	register(command{name: "bench", summary: "measure pdc next to this machine's ceilings", usage: "WHAT [flags]",
		long: `Every benchmark runs --rounds rounds (default 5), each measuring its ceiling again, and prints each
case's median [range]; the load average before and after goes to stderr. --cpuprofile DIR profiles
the benchmark and its servers; --case REGEX keeps the matching cases.`,
		examples: []string{"pdc bench rpc", "pdc bench all --out report.json", "pdc bench compare old.json new.json"},
		verbs: []verb{
			{name: "rpc", summary: "64-byte round trips: sequential, 64 in flight, 16 clients", usage: "[flags]", examples: []string{"pdc bench rpc --rounds 3"}},
			{name: "meta", summary: "metadata: create, open, tags, batched and parallel creates, restart", usage: "[flags]", examples: []string{"pdc bench meta"}},
			{name: "dtl", summary: "data transport: stream, pull, push, shm at 4 KiB to 1 GiB", usage: "[flags]", examples: []string{"pdc bench dtl --case shm"}},
			{name: "io", summary: "region I/O: a 1 GiB object in 64 KiB to 16 MiB regions, every partition and storage; 64k small regions", usage: "[flags]", examples: []string{"pdc bench io"}},
			{name: "vpic", summary: "VPIC-IO writes 8 particle variables from 1, 2, 4 processes; BD-CATS reads them back (--c: libpdc's C programs)", usage: "[flags]", examples: []string{"pdc bench vpic", "pdc bench vpic --c"}},
			{name: "search", summary: "kvtag queries of every form with 1, 100 and 10k matches, by the DART index and by scan; tag put cost", usage: "[flags]", examples: []string{"pdc bench search"}},
			{name: "stage", summary: "producer -> consumer files of 1 KiB to 1 GiB on another host, by every transport; owner lookup", usage: "[flags]", examples: []string{"pdc bench stage"}},
			{name: "preload", summary: "producer -> consumer files through libpdc_preload.so (cp, cat under LD_PRELOAD) next to pdc stage, as ratios (make capi)", usage: "[flags]", examples: []string{"pdc bench preload"}},
			{name: "query", summary: "value queries (counts, selections, values) over a float32 object on the data servers, next to a plain read", usage: "[flags]", examples: []string{"pdc bench query"}},
			{name: "python", summary: "regions written and read, and tags put, through the Python package next to the Go client, as ratios (pip install ./python)", usage: "[flags]", examples: []string{"pdc bench python", "pdc bench python --size 256MiB --rounds 3"}},
			{name: "soak", summary: "the crash loop: kill -9 of servers and clients mid-operation, restarts, every acknowledged operation checked (500 cycles)", usage: "[flags]", examples: []string{"pdc bench soak", "pdc bench soak --cycles 40 --durability sync --stop", "pdc bench soak --seed 1795886860771359163 --dir /tmp/soak"}},
			{name: "hosts", summary: "io, vpic and stage between hosts: a bed of network namespaces, links unshaped and limited by tbf (root)", usage: "[flags]", examples: []string{"sudo pdc bench hosts"}},
			{name: "all", summary: "every benchmark above but soak and hosts, at reduced sizes, into one report (--out FILE)", usage: "[flags]", examples: []string{"pdc bench all --out report.json"}},
			{name: "compare", summary: "what moved between two reports, calling a change only outside the noise", usage: "[flags] OLD.json NEW.json",
				long: `Compares two reports of pdc bench all (or the --json lines of one benchmark;
lines of one case from several runs appended to one file are that case's
rounds, so an old binary without --rounds can be run five times) case by
case: each side's median [range], the change of the median, and a
verdict that calls a change only when the two ranges do not overlap
("faster", "slower"; else "same within noise"). A case with a ceiling is
judged on the ranges of its ratio too; where the figure and the ratio
disagree, the verdict is "machine moved (ceiling X -> Y)": the machine got
slower or faster as a whole. Cases in one report only are listed as such.
The last column is the ratio to the ceiling, old -> new.
`, examples: []string{"pdc bench compare old.json new.json"}, args: []argKind{argFile}},
		},
		run: runBench})
	register(command{name: "bench-echo", summary: "raw echo server for the benchmarks' ceilings", run: runBenchEcho, hidden: true})
	register(command{name: "bench-python-go", summary: "the Go pass of bench python, in a process of its own", run: runBenchPythonGo, hidden: true})
	register(command{name: "bench-meta-client", summary: "one client process of bench meta", run: runBenchMetaClient, hidden: true})
	register(command{name: "bench-raw-client", summary: "one raw ping-pong process: the ceiling of bench meta's parallel case", run: runBenchRawClient, hidden: true})
	register(command{name: "bench-dtl-peer", summary: "transport sender process of bench dtl", run: runBenchDTLPeer, hidden: true})
	register(command{name: "bench-raw-source", summary: "raw byte source for bench dtl's ceilings", run: runBenchRawSource, hidden: true})
}

func runBench(ctx context.Context, e *env, args []string) error {
	switch args[0] {
	case "rpc":
		return benchRPC(ctx, e, args[1:])
	case "meta":
		return benchMeta(ctx, e, args[1:])
	case "dtl":
		return benchDTL(ctx, e, args[1:])
	case "io":
		return benchIO(ctx, e, args[1:])
	case "vpic":
		return benchVPIC(ctx, e, args[1:])
	case "search":
		return benchSearch(ctx, e, args[1:])
	case "stage":
		return benchStage(ctx, e, args[1:])
	case "preload":
		return benchPreload(ctx, e, args[1:])
	case "query":
		return benchQuery(ctx, e, args[1:])
	case "python":
		return benchPython(ctx, e, args[1:])
	case "soak":
		return benchSoak(ctx, e, args[1:])
	case "hosts":
		return benchHosts(ctx, e, args[1:])
	case "all":
		return benchAll(ctx, e, args[1:])
	case "compare":
		return benchCompare(ctx, e, args[1:])
	}
	return fmt.Errorf("bench: unknown benchmark %q (known: rpc, meta, dtl, io, vpic, search, stage, preload, query, python, soak, hosts, all, compare): %w", args[0], errUsage)
}

func benchRPC(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench rpc", "[flags]")
	bo := addBenchOpts(fs, "rpc")
	dur := fs.Duration("duration", time.Second, "length of each case in each round")
	size := fs.Int("size", 64, "message size in bytes")
	cost := fs.Bool("metrics-cost", false, "measure what serving metrics costs: two servers, one serving Prometheus metrics (scraped every second) and one not, each case's calls alternated between them; the ceiling is the server without")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	run, err := bo.begin(e)
	if err != nil {
		return err
	}
	defer run.close()
	dir, err := os.MkdirTemp("", "pdc-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tmpdir := filepath.Join(dir, "tmp")
	if *cost {
		if err := benchMetricsCost(ctx, e, run, dir, *dur, *size); err != nil {
			return fmt.Errorf("bench rpc: %w", err)
		}
		return run.finish()
	}

	// The ceiling's server and ours each run in a process of their own,
	// as servers do for real.
	rawAddr, stopEcho, err := startEcho(ctx)
	if err != nil {
		return fmt.Errorf("bench rpc: %w", err)
	}
	defer stopEcho()
	procs, err := up(ctx, e.stderr, upOptions{n: 1, tmpdir: tmpdir, datadir: filepath.Join(dir, "data"), roles: "both", secret: true, timeout: 60 * time.Second,
		cpuprofile: run.serverProfile(), metricsAddr: run.metricsAddr()})
	if err != nil {
		return fmt.Errorf("bench rpc: %w", err)
	}
	defer down(context.Background(), io.Discard, tmpdir, 30*time.Second)
	run.started(tmpdir)
	secret, err := cluster.SecretIn(tmpdir)
	if err != nil {
		return err
	}
	err = run.rounds(ctx, func(ctx context.Context, _ int) ([]bench.Result, error) {
		return bench.RPC(ctx, bench.RPCConfig{RawAddr: rawAddr, RPCAddr: procs[0].Addr, Secret: secret, Duration: *dur, Size: *size, Want: run.want()})
	})
	if err != nil {
		return fmt.Errorf("bench rpc: %w", err)
	}
	return run.finish()
}

// startEcho runs `pdc bench-echo` and returns its address.
func startEcho(ctx context.Context) (addr string, stop func(), err error) {
	return startChild(ctx, "bench-echo")
}

// startChild runs a hidden subcommand of this binary that prints one line
// (its address) and serves until its stdin closes, so it cannot outlive us.
func startChild(ctx context.Context, args ...string) (line string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	return startCmd(exec.Command(self, args...))
}

func benchDTL(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench dtl", "[flags]")
	bo := addBenchOpts(fs, "dtl")
	budget := fs.Duration("budget", 300*time.Millisecond, "time spent per size and mode in each round (at least 3 transfers)")
	sizesFlag := fs.String("sizes", "4KiB,1MiB,64MiB,1GiB", "payload sizes, comma-separated")
	modesFlag := fs.String("modes", "stream,pull,push,shm", "transport modes, comma-separated")
	big := fs.String("big", "5GiB", "one checked transfer of this size per mode, in the first round only (0: none)")
	source := fs.String("source", "", "the sender's payloads: file (a memory file) or buffer (default: buffers for stream, pull and push, as the raw ceiling; the file for shm)")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	var sizes []int64
	for _, s := range strings.Split(*sizesFlag, ",") {
		n, err := parseSize(s)
		if err != nil {
			return fmt.Errorf("bench dtl: --sizes: %w: %w", err, errUsage)
		}
		sizes = append(sizes, n)
	}
	if *source != "" && *source != "file" && *source != "buffer" {
		return fmt.Errorf("bench dtl: --source %q: want file or buffer: %w", *source, errUsage)
	}
	bigN, err := parseSize(*big)
	if err != nil {
		return fmt.Errorf("bench dtl: --big: %w: %w", err, errUsage)
	}
	var modes []dtl.Mode
	for _, s := range strings.Split(*modesFlag, ",") {
		m, err := dtl.ParseMode(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("bench dtl: --modes: %w: %w", err, errUsage)
		}
		if m == dtl.ModeAuto {
			return fmt.Errorf("bench dtl: --modes: auto picks one of the others; name them: %w", dtl.ErrBadMode)
		}
		modes = append(modes, m)
	}
	run, err := bo.begin(e)
	if err != nil {
		return err
	}
	defer run.close()
	dir, err := os.MkdirTemp("", "pdc-bench-dtl-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	secret := fmt.Sprintf("%x", time.Now().UnixNano())
	// The sender, the raw source and this receiver are three processes.
	peer, stopPeer, err := startChild(ctx, "bench-dtl-peer", "--secret", secret, "--shm-dir", dir)
	if err != nil {
		return fmt.Errorf("bench dtl: %w", err)
	}
	defer stopPeer()
	rawSock := filepath.Join(dir, "raw.sock")
	rawTCP, stopRaw, err := startChild(ctx, "bench-raw-source", "--unix", rawSock)
	if err != nil {
		return fmt.Errorf("bench dtl: %w", err)
	}
	defer stopRaw()
	err = run.rounds(ctx, func(ctx context.Context, round int) ([]bench.Result, error) {
		cfg := bench.DTLConfig{Peer: peer, Secret: []byte(secret), RawTCP: rawTCP, RawUnix: rawSock,
			Sizes: sizes, Modes: modes, Budget: *budget, Source: *source, Want: run.want()}
		if round == 0 {
			cfg.Big = bigN // a check that it works, not a figure to spread
		}
		return bench.DTL(ctx, cfg)
	})
	if err != nil {
		return fmt.Errorf("bench dtl: %w", err)
	}
	return run.finish()
}

// parseSize reads "4KiB", "1MiB", "1GiB" or a number of bytes.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a number of bytes, KiB, MiB or GiB: %w", s, pdc.ErrInvalid)
	}
	return n * mult, nil
}

func runBenchDTLPeer(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench-dtl-peer", "[flags]")
	secret := fs.String("secret", "", "secret clients must prove")
	shmDir := fs.String("shm-dir", "", "directory for the shm socket")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	p, err := dtlpeer.Start(dtlpeer.Config{Secret: []byte(*secret), ShmDir: *shmDir})
	if err != nil {
		return err
	}
	defer p.Close()
	serveChild(ctx, e, p.Addr())
	return nil
}

func runBenchRawSource(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench-raw-source", "[flags]")
	sock := fs.String("unix", "", "also listen on this Unix socket")
	shm := fs.String("shm", "", "serve the raw shared-memory ceiling on this Unix socket")
	listen := fs.String("listen", "127.0.0.1:0", "TCP address to serve on")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	lns := []net.Listener{ln}
	if *sock != "" {
		ul, err := net.Listen("unix", *sock)
		if err != nil {
			ln.Close()
			return err
		}
		lns = append(lns, ul)
	}
	s := bench.NewSourceServer(lns...)
	defer s.Close()
	if *shm != "" {
		sl, err := net.Listen("unix", *shm)
		if err != nil {
			return err
		}
		ss := bench.NewShmSourceServer(sl)
		defer ss.Close()
	}
	serveChild(ctx, e, ln.Addr().String())
	return nil
}

// serveChild is the child's side of startChild: it prints addr and returns
// once its parent closes its stdin (or ctx ends). Started by hand (the
// raw ceiling of `--cluster`, on a server's host) its stdin is no pipe
// but a terminal or /dev/null, which would end it at once or stop it
// in the background: it then serves until interrupted.
func serveChild(ctx context.Context, e *env, addr string) {
	fmt.Fprintln(e.stdout, addr)
	if st, err := os.Stdin.Stat(); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		<-ctx.Done()
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func runBenchEcho(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench-echo", "[flags]")
	listen := fs.String("listen", "127.0.0.1:0", "TCP address to serve on")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	s := bench.NewEchoServer(ln)
	defer s.Close()
	serveChild(ctx, e, s.Addr())
	return nil
}

// external names a running cluster a benchmark measures instead of
// starting its own, and the raw byte source its ceiling is measured from
// (a `pdc bench-raw-source` on a server's host): how bench hosts measures
// across hosts, and how anyone measures a cluster of their own.
type external struct {
	cluster, raw, label string
}

func externalFlags(fs *flag.FlagSet) *external {
	var x external
	fs.StringVar(&x.cluster, "cluster", "", "measure the running cluster of this tmpdir instead of starting one (needs --raw)")
	fs.StringVar(&x.raw, "raw", "", "with --cluster: host:port of a `pdc bench-raw-source --listen HOST:0` on a server's host, for the raw TCP ceiling")
	fs.StringVar(&x.label, "label", "", "with --cluster: what to call the cluster in the results")
	return &x
}

func (x *external) check() error {
	switch {
	case x.cluster != "" && x.raw == "":
		return fmt.Errorf("--cluster %s needs --raw HOST:PORT, a raw byte source on a server's host for the ceiling: %w", x.cluster, errUsage)
	case x.cluster == "" && (x.raw != "" || x.label != ""):
		return fmt.Errorf("--raw and --label go with --cluster: %w", errUsage)
	}
	return nil
}
