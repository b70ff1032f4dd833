package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metrics"
)

func init() {
	register(command{name: "up", summary: "start a local cluster of N servers in the background", usage: "-n N [flags]",
		examples: []string{"pdc up -n 4", "pdc up -n 2 --tmpdir /tmp/pdc --datadir /scratch/pdc_data", "pdc up --restart-dead"}, run: runUp})
	register(command{name: "down", summary: "stop the cluster cleanly (replaces close_server)", usage: "[flags]",
		examples: []string{"pdc down", "pdc down --tmpdir /tmp/pdc"}, run: runDown})
	register(command{name: "status", summary: "show every server: rank, address, roles, pid, uptime, clients, requests", usage: "[flags]",
		examples: []string{"pdc status", "pdc status --json"}, run: runStatus})
	register(command{name: "ping", summary: "round-trip to every server", usage: "[flags]",
		examples: []string{"pdc ping", "pdc ping --wait 30s"}, run: runPing})
}

type upOptions struct {
	n               int
	tmpdir, datadir string // datadir: {host} replaced per server
	unix            bool
	listen          string // every server's --listen ("": 127.0.0.1:0)
	advertise       string // every server's --advertise
	insecure        bool
	roles           string
	secret          bool
	timeout         time.Duration
	durability      string
	dataBudget      string
	noIndex         bool
	noSuffixTree    bool
	hosts           []string // per rank, cycled; empty: each server's own
	stageDir        string   // {rank} and {host} replaced per server
	cpuprofile      string   // each server's --cpuprofile, {rank} replaced
	metricsAddr     string   // HOST:PORT; a non-zero PORT is rank 0's, rank r's is PORT+r
	dashboard       string   // rank 0's --dashboard
	logArgs         []string // the log flags given, for every server
	debugAddr       string   // as metricsAddr
	pass            []string // server flags given to up, for every server (addServerFlags)
}

// maxUpServers bounds pdc up -n. Every server of pdc up runs on this one
// host, and each costs about 64 MiB of disk (its metadata log is
// preallocated), 25 MiB of memory and a few dozen descriptors, threads
// and sockets before it stores anything: -n 4096 was accepted and filled
// the disk (256 GiB) long before the cluster was complete. 256 servers
// are 16 GiB of disk and some 6 GiB of memory, what a workstation holds,
// and far more than one host needs to rehearse a cluster (servers past
// the cores only take turns on them; --hosts makes them stand for
// nodes). A larger cluster spans hosts and is started by a launcher with
// pdc server, which this does not bound. A fixed number rather than one
// worked out from the free disk or descriptor limit: the same -n is
// refused or taken on every machine, and the message can say why.
const maxUpServers = 256

// upRestartFlags are the flags `pdc up --restart-dead` takes; the others
// come from the record of the cluster's `pdc up`.
var upRestartFlags = map[string]bool{"restart-dead": true, "tmpdir": true, "timeout": true}

func runUp(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "up", "-n N [flags]")
	var o upOptions
	fs.IntVar(&o.n, "n", 1, fmt.Sprintf("number of servers, 1 to %d", maxUpServers))
	fs.StringVar(&o.tmpdir, "tmpdir", e.tmpDirDefault(), "directory for the server list, secret and logs ($PDC_TMPDIR)")
	fs.StringVar(&o.datadir, "datadir", e.dataDirDefault(), "directory for stored data; {host} is replaced per server, which stands a node-local data dir per host of --hosts ($PDC_DATA_LOC)")
	fs.BoolVar(&o.unix, "unix", false, "listen on Unix sockets in the tmpdir instead of 127.0.0.1 ports")
	fs.StringVar(&o.listen, "listen", "", "every server's listen address, as pdc server --listen (default 127.0.0.1:0)")
	fs.StringVar(&o.advertise, "advertise", "", "every server's published address, as pdc server --advertise (HOST: each keeps its own port)")
	fs.BoolVar(&o.insecure, "insecure", false, "with --secret=false and a --listen beyond loopback: run the servers without a secret all the same")
	fs.StringVar(&o.roles, "roles", "both", "role of every server: metadata, data or both")
	fs.BoolVar(&o.secret, "secret", true, "make a cluster secret that every connection must prove")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "how long to wait for the servers to start")
	fs.StringVar(&o.dataBudget, "data-budget", "", "memory for region payloads in flight on each data server (default 1GiB)")
	fs.StringVar(&o.durability, "durability", "process", "metadata durability: process (survives a server crash) or sync (fsynced, survives power loss)")
	index := fs.Bool("index", true, "keep the DART tag index on the servers (false: tag queries scan)")
	suffixTree := fs.Bool("dart-suffix-tree", true, "DART's suffix-tree mode: index every suffix of tag keys and values, so infix queries use the index")
	hosts := fs.String("hosts", "", "comma-separated host names the servers report, one per rank, cycled (stands several nodes on one machine; default each server's $"+cluster.HostEnv+" or host name)")
	fs.StringVar(&o.stageDir, "stage-producer-dir", e.getenv("PDC_STAGE_PRODUCER_DIR"), "producer dir each server serves staged files from; {rank} and {host} are replaced per server ($PDC_STAGE_PRODUCER_DIR)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "each server writes its CPU profile to this file when it stops cleanly (pdc down); {rank} is replaced per server")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve each server's Prometheus metrics over HTTP: HOST:PORT, or :PORT for loopback; rank r listens on PORT+r (port 0: each picks one). The addresses are recorded in the tmpdir (pdc_metrics.RANK), where pdc top and pdc status find them")
	fs.StringVar(&o.dashboard, "dashboard", "", "rank 0 serves the cluster's web page (pdc dashboard) on HOST:PORT, or :PORT for loopback; turns on --metrics-addr 127.0.0.1:0 if not given")
	lo := logFlags(fs)
	restartDead := fs.Bool("restart-dead", false, "restart the servers of the running cluster in --tmpdir that do not answer, with the flags it was started with")
	fs.StringVar(&o.debugAddr, "debug-addr", "", "serve each server's pprof (/debug/pprof/) over HTTP: HOST:PORT; rank r listens on PORT+r (port 0: each picks one)")
	addServerFlags(e, fs)
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	o.pass = passedArgs(fs)
	if *restartDead {
		return upRestartDead(ctx, e, fs, o)
	}
	o.noIndex, o.noSuffixTree = !*index, !*suffixTree
	if *hosts != "" {
		o.hosts = strings.Split(*hosts, ",")
		for _, h := range o.hosts {
			if h == "" {
				return fmt.Errorf("up: --hosts %q has an empty name: %w", *hosts, errUsage)
			}
		}
	}
	if err := o.check(fs); err != nil {
		return err
	}
	if err := lo.check(); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	o.logArgs = lo.args(fs)
	// Servers that find the data of a cluster of another size move
	// metadata before they are ready: on a terminal, say what is awaited.
	st := newStatus(e.stderr, isTerminal(e.stderr), fmt.Sprintf("up: starting %s", count(o.n, "server", "servers")))
	procs, err := up(ctx, st, o)
	st.stop()
	if err != nil {
		return err
	}
	printProcs(e.stdout, procs)
	if o.dashboard != "" {
		printDashboard(e.stdout, o.dashboard, o.tmpdir, procs)
	}
	fmt.Fprintf(e.stdout, "%s up; tmpdir %s. Stop %s with: pdc down --tmpdir %s\n", count(len(procs), "server", "servers"), o.tmpdir, plural(len(procs), "it", "them"), o.tmpdir)
	return nil
}

// upRestartDead runs pdc up --restart-dead, which takes no flags but
// --tmpdir and --timeout (upRestartFlags): the servers restart with the
// flags the cluster was started with.
func upRestartDead(ctx context.Context, e *env, fs *flag.FlagSet, o upOptions) error {
	var other []string
	fs.Visit(func(f *flag.Flag) {
		if !upRestartFlags[f.Name] {
			dash := "--"
			if len(f.Name) == 1 {
				dash = "-"
			}
			other = append(other, dash+f.Name)
		}
	})
	if len(other) > 0 || fs.NArg() > 0 {
		return fmt.Errorf("up: --restart-dead starts servers with the flags the cluster was started with; drop %s: %w", strings.Join(append(other, fs.Args()...), " "), errUsage)
	}
	timeout := time.Duration(0)
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "timeout" {
			timeout = o.timeout
		}
	})
	return restartDeadServers(ctx, e, o.tmpdir, timeout)
}

// check checks the options of pdc up against each other, and that no
// arguments follow the flags.
func (o *upOptions) check(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("up: unexpected argument %q: %w", fs.Arg(0), errUsage)
	}
	if o.metricsAddr != "" {
		if _, err := metrics.ListenAddr(o.metricsAddr); err != nil {
			return fmt.Errorf("up: --metrics-addr: %w: %w", err, errUsage)
		}
	}
	if o.dashboard != "" {
		if _, err := metrics.ListenAddr(o.dashboard); err != nil {
			return fmt.Errorf("up: --dashboard: %w: %w", err, errUsage)
		}
		if o.metricsAddr == "" {
			o.metricsAddr = "127.0.0.1:0" // the page is fed by the metrics
		}
	}
	if o.unix && o.listen != "" {
		return fmt.Errorf("up: --unix and --listen %q: choose one: %w", o.listen, errUsage)
	}
	// Checked here, not by the servers: each exited with it in its log,
	// and up failed (exit 1) after starting them.
	if _, err := cluster.ParseRoles(o.roles); err != nil {
		return fmt.Errorf("up: --roles: %v: %w", err, errUsage)
	}
	if o.listen != "" && o.n > 1 {
		// Every server gets the one address: only port 0 lets each bind.
		if _, port, err := net.SplitHostPort(o.listen); err != nil || port != "0" {
			return fmt.Errorf("up: --listen %q is one address for %d servers, which cannot all bind it; give HOST:0 (each picks a port): %w", o.listen, o.n, errUsage)
		}
	}
	if o.advertise != "" {
		if _, port, err := cluster.ParseAdvertise(o.advertise); err != nil {
			return fmt.Errorf("up: %w: %w", err, errUsage)
		} else if port != "" && o.n > 1 {
			return fmt.Errorf("up: --advertise %q names one port for %d servers; give the host alone: %w", o.advertise, o.n, errUsage)
		}
	}
	if o.n < 1 || o.n > maxUpServers {
		return fmt.Errorf("up: -n %d: want 1 to %d servers on this host (a larger cluster spans hosts: start it under a launcher with pdc server): %w", o.n, maxUpServers, errUsage)
	}
	return nil
}

// up starts a local cluster and checks that every server answers a ping.
func up(ctx context.Context, warn io.Writer, o upOptions) ([]cluster.Proc, error) {
	// A command that starts servers stops them on its way out (demo,
	// bench): a closed stdout (`pdc demo | head`) must fail its writes,
	// not kill it before it does, leaving the servers behind.
	signal.Ignore(syscall.SIGPIPE)
	tmpdir, err := filepath.Abs(o.tmpdir)
	if err != nil {
		return nil, err
	}
	o.tmpdir = tmpdir // for rankArgs' log file
	datadir, err := filepath.Abs(o.datadir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(tmpdir, 0o700); err != nil {
		return nil, fmt.Errorf("up: %w", err)
	}
	// Refuse before touching anything a running cluster depends on.
	stale, err := cluster.CheckStale(ctx, tmpdir)
	if err != nil {
		return nil, fmt.Errorf("up: %w", err)
	}
	if stale != nil {
		fmt.Fprintf(warn, "pdc up: replacing the stale server list in %s: %s (a dead cluster)\n", tmpdir, noneAnswers(stale.Size))
		if err := cluster.RemoveFiles(tmpdir); err != nil {
			return nil, fmt.Errorf("up: remove the stale server list: %w", err)
		}
	}
	// The servers are told their secret's file: otherwise a
	// $PDC_SECRET_FILE they inherit would win over the one made here, and
	// clients reading the tmpdir's would be refused. A $PDC_SECRET_FILE
	// set here is the user's secret for the cluster: no other is made.
	secretFile := filepath.Join(tmpdir, cluster.SecretFile)
	serverSecret := ""
	switch env := os.Getenv(client.EnvSecretFile); {
	case o.secret && env != "":
		if serverSecret, err = filepath.Abs(env); err != nil {
			return nil, fmt.Errorf("up: $%s: %w", client.EnvSecretFile, err)
		}
		if _, err := cluster.ReadSecret(serverSecret); err != nil {
			return nil, fmt.Errorf("up: $%s: %w", client.EnvSecretFile, err)
		}
		if err := os.Remove(secretFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("up: %w", err)
		}
	case o.secret:
		if _, err := cluster.NewSecret(tmpdir); err != nil {
			return nil, fmt.Errorf("up: %w", err)
		}
		serverSecret = secretFile
	default:
		if err := os.Remove(secretFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("up: %w", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("up: find the pdc binary: %w", err)
	}
	cfg := cluster.LocalConfig{
		Binary: self, N: o.n, TmpDir: tmpdir, DataDir: datadir, Unix: o.unix, Listen: o.listen, Roles: o.roles, Timeout: o.timeout,
		SecretFile: serverSecret,
		Args:       serverArgs(o),
		RankArgs:   func(rank int) []string { return rankArgs(o, rank) },
	}
	// What --restart-dead needs to start a rank again the same way.
	if err := cluster.WriteUpRecord(tmpdir, cfg.Record()); err != nil {
		return nil, fmt.Errorf("up: %w", err)
	}
	return startAndPing(ctx, cfg)
}

// startAndPing starts the servers of cfg and checks that each answers a
// ping.
func startAndPing(ctx context.Context, cfg cluster.LocalConfig) ([]cluster.Proc, error) {
	procs, err := cluster.StartLocal(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("up: %w", err)
	}
	if err := pingStarted(ctx, cfg, procs); err != nil {
		// Nobody else will stop them: the caller sees a failed up (pdc
		// bench removes its tmpdir), and an interrupt (ctx) lands here.
		stopProcs(procs)
		return nil, err
	}
	return procs, nil
}

// pingStarted checks that each of procs, just started, answers a ping.
func pingStarted(ctx context.Context, cfg cluster.LocalConfig, procs []cluster.Proc) error {
	opts := []client.Option{client.WithTmpDir(cfg.TmpDir)}
	if cfg.SecretFile != "" {
		opts = append(opts, client.WithSecretFile(cfg.SecretFile))
	}
	c, err := client.Connect(ctx, opts...)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, p := range procs {
		if _, err := c.Ping(pctx, p.Rank); err != nil {
			return fmt.Errorf("up: servers started but %w", err)
		}
	}
	return nil
}

// stopProcs kills servers just started, which nothing has acknowledged
// anything to yet, and reaps them (they are this process's children).
func stopProcs(procs []cluster.Proc) {
	for _, p := range procs {
		if syscall.Kill(p.PID, syscall.SIGKILL) != nil {
			continue
		}
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(p.PID, &ws, 0, nil)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
	}
}

// restartDeadServers starts again, as `pdc up` started them, the servers
// of the cluster in tmpdir that do not answer; they rejoin it. timeout,
// if not 0, replaces the recorded startup timeout.
func restartDeadServers(ctx context.Context, e *env, tmpdir string, timeout time.Duration) error {
	tmpdir, err := filepath.Abs(tmpdir)
	if err != nil {
		return err
	}
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		return fmt.Errorf("up --restart-dead: %w", err)
	}
	rec, err := cluster.ReadUpRecord(tmpdir)
	if err != nil {
		return fmt.Errorf("up --restart-dead: restart its servers with `pdc server --rank R` and the flags they were started with: %w", err)
	}
	if rec.Size != list.Size {
		return fmt.Errorf("up --restart-dead: the server list in %s has %s, the record of pdc up %d (from an earlier cluster): %w", tmpdir, count(list.Size, "server", "servers"), rec.Size, pdc.ErrInvalid)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	live := cluster.LiveServers(pctx, list)
	cancel()
	answers := map[int]bool{}
	for _, s := range live {
		answers[s.Rank] = true
	}
	var dead []int
	var names []string
	for _, s := range list.Servers {
		if !answers[s.Rank] {
			dead = append(dead, s.Rank)
			names = append(names, strconv.Itoa(s.Rank))
		}
	}
	if len(dead) == 0 {
		fmt.Fprintf(e.stdout, "%s; none restarted\n", allAnswer(list.Size))
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("up: find the pdc binary: %w", err)
	}
	cfg := rec.Local(self, tmpdir)
	cfg.Ranks = dead
	if timeout != 0 {
		cfg.Timeout = timeout
	}
	st := newStatus(e.stderr, isTerminal(e.stderr), fmt.Sprintf("up: restarting %s", count(len(dead), "server", "servers")))
	procs, err := startAndPing(ctx, cfg)
	st.stop()
	if err != nil {
		return err
	}
	printProcs(e.stdout, procs)
	fmt.Fprintf(e.stdout, "restarted %d of %s: %s %s\n", len(procs), count(list.Size, "server", "servers"), plural(len(names), "rank", "ranks"), strings.Join(names, ", "))
	return nil
}

// serverArgs are the flags up passes on to every server.
func serverArgs(o upOptions) []string {
	var args []string
	if o.durability != "" {
		args = append(args, "--durability", o.durability)
	}
	if o.dataBudget != "" {
		args = append(args, "--data-budget", o.dataBudget)
	}
	if o.noIndex {
		args = append(args, "--index=false")
	}
	if o.noSuffixTree {
		args = append(args, "--dart-suffix-tree=false")
	}
	if o.advertise != "" {
		args = append(args, "--advertise", o.advertise)
	}
	if o.insecure {
		args = append(args, "--insecure")
	}
	args = append(args, o.logArgs...)
	return append(args, o.pass...)
}

// rankArgs are the flags up passes to one server.
func rankArgs(o upOptions, rank int) []string {
	// The server writes its log itself, to rotate it.
	args := []string{"--log-file", cluster.LogFile(o.tmpdir, rank)}
	host := cluster.HostName()
	if len(o.hosts) > 0 {
		host = o.hosts[rank%len(o.hosts)]
		args = append(args, "--host", host)
	}
	if strings.Contains(o.datadir, "{host}") {
		dir := strings.ReplaceAll(o.datadir, "{host}", host)
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		args = append(args, "--datadir", dir)
	}
	if o.stageDir != "" {
		dir := strings.ReplaceAll(o.stageDir, "{rank}", strconv.Itoa(rank))
		dir = strings.ReplaceAll(dir, "{host}", host)
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		args = append(args, "--stage-producer-dir", dir)
	}
	if o.metricsAddr != "" {
		args = append(args, "--metrics-addr", rankMetricsAddr(o.metricsAddr, rank))
	}
	if o.dashboard != "" && rank == 0 {
		args = append(args, "--dashboard", o.dashboard)
	}
	if o.debugAddr != "" {
		args = append(args, "--debug-addr", rankMetricsAddr(o.debugAddr, rank))
	}
	if o.cpuprofile != "" {
		f := strings.ReplaceAll(o.cpuprofile, "{rank}", strconv.Itoa(rank))
		if abs, err := filepath.Abs(f); err == nil {
			f = abs
		}
		args = append(args, "--cpuprofile", f)
	}
	return args
}

// rankMetricsAddr is rank's metrics address of up's --metrics-addr:
// a port given is rank 0's, and each rank takes the next.
func rankMetricsAddr(addr string, rank int) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr // the server says what is wrong with it
	}
	p, err := strconv.Atoi(port)
	if err != nil || p == 0 {
		return addr
	}
	return net.JoinHostPort(host, strconv.Itoa(p+rank))
}

func printProcs(w io.Writer, procs []cluster.Proc) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tADDRESS\tPID\tLOG")
	for _, p := range procs {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", p.Rank, p.Addr, p.PID, p.Log)
	}
	tw.Flush()
}

func runDown(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "down", "[flags]")
	tmpdir := fs.String("tmpdir", e.tmpDirDefault(), "the cluster's tmpdir ($PDC_TMPDIR)")
	secretFile := secretFileFlag(e, fs)
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the servers to stop")
	wait := fs.Duration("wait", 0, "how long to wait for a cluster that has not started yet (no server list) to start, before stopping it; one whose rank 0 is up is waited for --timeout anyway")
	rank0Only := fs.Bool("rank0-only", false, "under a launcher (its rank variables, as pdc server reads them), only rank 0 stops the cluster; the other ranks return at once and print nothing. PDC's scripts run close_server with one rank per server (mpiexec -n N close_server)")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("down: unexpected argument %q: %w", fs.Arg(0), errUsage)
	}
	if *rank0Only {
		// N processes stopping one cluster at once: all but one found it
		// stopping or gone and failed, and each waited --wait for a list
		// the first had removed.
		launch, fromEnv, err := cluster.FromEnv(e.getenv)
		if err != nil {
			return fmt.Errorf("down: %w", err)
		}
		if fromEnv && launch.Rank != 0 {
			return nil
		}
	}
	if err := awaitStart(ctx, *tmpdir, *wait, *timeout); err != nil {
		return err
	}
	n, err := down(ctx, e.stderr, *tmpdir, *timeout, withSecretFile(nil, secretFile)...)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "stopped %s\n", count(n, "server", "servers"))
	return nil
}

// awaitStart waits for the server list of a cluster still starting: for
// up to timeout once its rank 0 has published its address (the rendezvous
// file), else for up to wait. A stop started right after the servers, as
// PDC's scripts run close_server after `pdc_server.exe &`, then stops them
// instead of failing and leaving them running. With neither, or with a
// list already there, it returns at once and down reports what it finds.
func awaitStart(ctx context.Context, tmpdir string, wait, timeout time.Duration) error {
	if _, err := cluster.ReadList(tmpdir); err == nil {
		return nil
	}
	if _, err := cluster.ReadRendezvous(tmpdir); err == nil {
		wait = max(wait, timeout)
	}
	if wait <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := os.MkdirAll(tmpdir, 0o700); err != nil {
		return fmt.Errorf("down: %w", err)
	}
	if _, err := cluster.WaitForList(ctx, tmpdir); err != nil {
		return fmt.Errorf("down: no cluster in %s started within %v: %w", tmpdir, wait, err)
	}
	return nil
}

// down stops every server of the cluster in tmpdir, waits until their
// processes are gone and removes the server list. Servers that were already
// gone are reported on warn and are not an error.
func down(ctx context.Context, warn io.Writer, tmpdir string, timeout time.Duration, opts ...client.Option) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := client.Connect(ctx, append([]client.Option{client.WithTmpDir(tmpdir)}, opts...)...)
	if err != nil {
		return 0, fmt.Errorf("down: %w", err)
	}
	defer c.Close()
	st, err := c.StopCluster(ctx)
	// Transient containers end with the cluster. Best effort: a cluster
	// with a dead server is still stopped.
	if st.TransientErr != nil {
		warnTransientLeft(warn, tmpdir, st)
	} else if st.Transient > 0 {
		fmt.Fprintf(warn, "pdc down: deleted %s\n", count(st.Transient, "transient container", "transient containers"))
	}
	for _, g := range st.Gone {
		fmt.Fprintf(warn, "pdc down: %s was already gone\n", g)
	}
	if err != nil {
		return 0, fmt.Errorf("down: %w", err)
	}
	return st.Servers, nil
}

// warnTransientLeft says which transient containers pdc down left, and
// how to remove them once the cluster is up again.
func warnTransientLeft(w io.Writer, tmpdir string, st client.Stopped) {
	// The first failure says why; the rest, one a container, are named
	// below.
	first, _, more := strings.Cut(st.TransientErr.Error(), "\n")
	if more {
		first += " (and more)"
	}
	fmt.Fprintf(w, "pdc down: transient containers not all deleted (deleted %d): %s\n", st.Transient, first)
	if len(st.TransientLeft) > 0 {
		fmt.Fprintf(w, "pdc down: left: %s; once the cluster is up again, remove them with: pdc cont rm --recursive --tmpdir %s %s (or the next clean pdc down does)\n",
			strings.Join(st.TransientLeft, ", "), tmpdir, strings.Join(st.TransientLeft, " "))
	}
	if len(st.TransientUnlisted) > 0 {
		fmt.Fprintf(w, "pdc down: the transient containers of %s could not be listed; once the cluster is up again, "+
			"list them with `pdc cont ls --tmpdir %s` and remove those marked transient with pdc cont rm --recursive\n",
			strings.Join(st.TransientUnlisted, ", "), tmpdir)
	}
}

// processExists reports whether pid is a running process. A zombie, dead
// but not yet reaped by whoever inherited it, does not count.
func processExists(pid int) bool {
	return cluster.Running(pid)
}

func runStatus(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "status", "[flags]")
	tmpdir := fs.String("tmpdir", e.tmpDirDefault(), "the cluster's tmpdir ($PDC_TMPDIR)")
	secretFile := secretFileFlag(e, fs)
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for answers")
	asJSON := jsonFlag(fs)
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if err := noArgs(fs, "status"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := client.Connect(ctx, withSecretFile([]client.Option{client.WithTmpDir(*tmpdir)}, secretFile)...)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	defer c.Close()
	sts, err := c.Status(ctx)
	if *asJSON {
		out := newJSONLines(e.stdout)
		for _, s := range sts {
			if jerr := out.put(newStatusJSON(s)); jerr != nil {
				return jerr
			}
		}
	} else {
		printStatus(e.stdout, sts)
		printMetricsAddrs(e.stdout, cluster.Dir{Path: *tmpdir})
	}
	if err != nil {
		var down []string
		for _, s := range sts {
			if errors.Is(s.Err, pdc.ErrUnavailable) {
				down = append(down, s.Label())
			}
		}
		if len(down) == 0 {
			// A server that refused this client (a wrong or missing
			// secret) or was slow to answer is running: restarting
			// it is not the cure.
			return fmt.Errorf("status: %w", err)
		}
		return fmt.Errorf("status: %d of %s down (%s); restart %s with `pdc up --restart-dead --tmpdir %s` or `pdc server --rank R`: %w",
			len(down), count(len(sts), "server", "servers"), strings.Join(down, ", "), plural(len(down), "it", "them"), *tmpdir, err)
	}
	return nil
}

func printStatus(w io.Writer, sts []client.ServerStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tADDRESS\tROLES\tPID\tUPTIME\tCLIENTS\tREQUESTS")
	for _, s := range sts {
		if s.Err != nil {
			// Since when this status first failed to reach it: a
			// server that is slow to answer is not down.
			down := "DOWN"
			switch {
			case !s.DownSince.IsZero():
				down = "DOWN since " + s.DownSince.Format(time.TimeOnly)
			case errors.Is(s.Err, pdc.ErrTimeout):
				down = "NO ANSWER"
			case errors.Is(s.Err, pdc.ErrPermission):
				// It answered, and refused this client's secret.
				down = "DENIED"
			case !errors.Is(s.Err, pdc.ErrUnavailable):
				down = "ERROR"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t-\t-\n", s.Rank, s.Addr, s.Roles, s.PID, down)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%d\t%d\n", s.Rank, s.Addr, s.Roles, s.PID,
			s.Uptime.Round(time.Second), s.Clients, s.Requests)
	}
	tw.Flush()
	for _, s := range sts {
		if len(s.IndexWaiting) > 0 {
			fmt.Fprintf(w, "rank %d cannot deliver tag index updates to %s %s; indexed queries that need them wait until they are delivered, or fail\n",
				s.Rank, plural(len(s.IndexWaiting), "rank", "ranks"), joinInts(s.IndexWaiting, ", "))
		}
		if s.CutsWaiting > 0 {
			fmt.Fprintf(w, "rank %d holds %s (shrinks or relayouts) some data server has not applied yet; the next set dims of those objects is refused until it has (its log names the data server)\n",
				s.Rank, count(s.CutsWaiting, "dims cut", "dims cuts"))
		}
		for _, m := range s.SlotsMissing {
			fmt.Fprintf(w, "rank %d is missing data %s\n", s.Rank, m)
		}
	}
}

// joinInts joins ns with sep.
func joinInts(ns []int, sep string) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, sep)
}

// printMetricsAddrs lists where the servers that serve metrics
// (--metrics-addr) serve them, if any do.
func printMetricsAddrs(w io.Writer, dir cluster.Dir) {
	list, err := dir.ReadList()
	if err != nil {
		return
	}
	addrs, err := dir.MetricsAddrs(list)
	if err != nil || len(addrs) == 0 {
		return
	}
	for _, s := range list.Servers {
		if a, ok := addrs[s.Rank]; ok {
			fmt.Fprintf(w, "rank %d metrics: http://%s%s\n", s.Rank, a, metrics.Path)
		}
	}
}

func runPing(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "ping", "[flags]")
	tmpdir := fs.String("tmpdir", e.tmpDirDefault(), "the cluster's tmpdir ($PDC_TMPDIR)")
	secretFile := secretFileFlag(e, fs)
	timeout := fs.Duration("timeout", 5*time.Second, "deadline for each server")
	wait := fs.Duration("wait", 0, "first wait up to this long for the servers to come up (started by a launcher in the background)")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if err := noArgs(fs, "ping"); err != nil {
		return err
	}
	if *wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, *wait)
		// Not any list: one a killed cluster left stays until the
		// servers starting now replace it.
		_, err := cluster.WaitForLiveList(wctx, *tmpdir)
		cancel()
		if err != nil {
			return fmt.Errorf("ping: no cluster came up in %s within %v: %w", *tmpdir, *wait, err)
		}
	}
	c, err := client.Connect(ctx, withSecretFile([]client.Option{client.WithTmpDir(*tmpdir)}, secretFile)...)
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	defer c.Close()
	return pingAll(ctx, e.stdout, c, *timeout)
}

func pingAll(ctx context.Context, w io.Writer, c *client.Client, timeout time.Duration) error {
	var first error
	var failed []string
	servers := c.Servers()
	for _, s := range servers {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		rtt, err := c.Ping(pctx, s.Rank)
		cancel()
		if err != nil {
			fmt.Fprintf(w, "%s: %v\n", s.Label(), err)
			failed = append(failed, s.Label())
			if first == nil {
				first = err
			}
			continue
		}
		fmt.Fprintf(w, "%s: pong in %v\n", s.Label(), rtt.Round(time.Microsecond))
	}
	if first == nil {
		return nil
	}
	// One line: each server's error is above, on its own; the lines
	// joined repeated them all.
	return fmt.Errorf("ping: %d of %s did not answer (%s); the first: %w", len(failed), count(len(servers), "server", "servers"), strings.Join(failed, ", "), first)
}
