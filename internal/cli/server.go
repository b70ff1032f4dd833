package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/server"
	"github.com/pdcgo/pdc/internal/wire"
)

func init() {
	register(command{name: "server", summary: "run one server process (replaces pdc_server.exe)", usage: "[flags]",
		examples: []string{"pdc server --rank 0 --size 2 --tmpdir /shared/pdc_tmp &", "srun -n 4 pdc server --tmpdir /shared/pdc_tmp --listen 0.0.0.0:0"}, run: runServer})
}

// readyFDEnv names the descriptor on which a server started by `pdc up`
// reports that the cluster is complete.
const readyFDEnv = "PDC_READY_FD"

func runServer(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "server", "[flags]")
	rank := fs.Int("rank", -1, "this server's rank (default: from the launcher's environment, else 0)")
	size := fs.Int("size", 0, "number of servers in the cluster (default: from the launcher's environment, else 1)")
	listen := fs.String("listen", "127.0.0.1:0", `address to listen on: "host:port" (port 0 picks one) or "unix:/path"`)
	advertise := fs.String("advertise", "", "address others dial to reach this server: HOST:PORT, or HOST with the bound port (default: the bound address; for 0.0.0.0 or [::] this host's address on the route to rank 0)")
	insecure := fs.Bool("insecure", false, "run without a cluster secret although listening beyond loopback (anyone who reaches the server can read and write its data)")
	tmpdir := fs.String("tmpdir", e.tmpDirDefault(), "directory for the server list and secret ($PDC_TMPDIR)")
	datadir := fs.String("datadir", e.dataDirDefault(), "directory for stored data ($PDC_DATA_LOC)")
	roles := fs.String("roles", "both", "what this server does: metadata, data or both")
	var abandon rankList
	fs.Var(&abandon, "abandon-store", "let a full start go on without the cluster's metadata store meta-RANK, for each RANK of `RANKS` (comma-separated), if no server finds it "+
		"(its node not started, its data dir gone), which is refused otherwise, naming the store; the cluster forgets it, and its objects, containers and tags are lost to it. "+
		"Does nothing to a store that is found")
	var abandonSlots slotList
	fs.Var(&abandonSlots, "abandon-slot", "let a full start begin data slot SLOT empty, for each SLOT of `SLOTS` (comma-separated), if it is missing "+
		"(no server of the cluster finds its data dir data-SLOT, or only an out-of-date copy, or the dims cuts owed to it): what it held reads as never written, "+
		"its copies found are set aside, and the cuts kept for it are dropped. Does nothing to a slot that is held")
	secretFile := fs.String("secret-file", e.getenv(client.EnvSecretFile), "cluster secret file ($"+client.EnvSecretFile+"; default: tmpdir/"+cluster.SecretFile+" if it exists)")
	maxHeader := fs.Uint("max-header", wire.DefaultMaxHeader, "largest frame header accepted, bytes")
	maxPayload := fs.Uint64("max-payload", wire.DefaultMaxPayload, "largest frame payload accepted, bytes")
	payloadBudget := fs.String("payload-budget", "1GiB", "memory for request payloads held at once (being received or waiting to be stored); a payload that does not fit waits. At least --max-payload")
	maxConns := fs.Int("max-conns", 0, "connections open at once, and on each DTL side channel (default 4096, or half the descriptor limit if lower)")
	maxPerPeer := fs.Int("max-conns-per-peer", rpc.DefaultMaxConnsPerPeer, "connections open at once from one address (all Unix socket peers count as one)")
	maxHandshakes := fs.Int("max-handshakes", rpc.DefaultMaxHandshakes, "connections not yet authenticated; past it the oldest is closed to make room")
	handshakeTimeout := fs.Duration("handshake-timeout", 10*time.Second, "how long a new connection has to authenticate")
	stallTimeout := fs.Duration("stall-timeout", 60*time.Second, "close a connection that sends nothing of a frame it began, or takes nothing of one sent to it, for this long")
	minRecvRate := fs.String("min-recv-rate", "64KiB", "bytes per second below which a frame may not arrive for longer than --stall-timeout (0: no floor)")
	startup := fs.Duration("startup-timeout", 60*time.Second, "how long to wait for the other servers to start")
	lo := logFlags(fs)
	fs.StringVar(&lo.file, "log-file", "", "write the log (and the process's standard error) to this file, rotated by size (--log-max-size, --log-keep); default standard error")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics (/metrics) on this address: HOST:PORT, or :PORT for loopback; off by default. The address bound is recorded in the tmpdir for pdc top")
	dashboardAddr := fs.String("dashboard", "", "serve the cluster's dashboard (pdc dashboard) from this server on this address: HOST:PORT, or :PORT for loopback; off by default")
	debugAddr := fs.String("debug-addr", "", "serve pprof (/debug/pprof/) on this address, e.g. 127.0.0.1:6060; off by default")
	budget := fs.String("data-budget", "1GiB", "memory for region reads on a data server that their clients have not collected yet (writes in memory count against --payload-budget)")
	durability := fs.String("durability", "process", "when a metadata change is acknowledged: process (in the kernel: survives a crash of the server) or sync (fsynced: survives power loss)")
	index := fs.Bool("index", true, "keep the DART tag index (false: every tag query scans every metadata server)")
	suffixTree := fs.Bool("dart-suffix-tree", true, "index every suffix of tag keys and values, so infix queries use the index (DART's suffix-tree mode)")
	host := fs.String("host", "", "the host name this server reports; clients on the same host find it by this name (default $"+cluster.HostEnv+", else the kernel's host name)")
	stageDir := fs.String("stage-producer-dir", e.getenv("PDC_STAGE_PRODUCER_DIR"), "producer dir whose produced files this server serves to consumers ($PDC_STAGE_PRODUCER_DIR; empty: none)")
	cpuprofile := fs.String("cpuprofile", "", "write this server's CPU profile to this file, completed when the server shuts down cleanly (pdc down, SIGTERM)")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("server: unexpected argument %q: %w", fs.Arg(0), errUsage)
	}
	// Left out, they come from the launcher; given, they must be a rank
	// and a size: --rank -2 ran as rank 0 and waited a minute for a
	// rank 1 that was never meant.
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["rank"] && *rank < 0 || given["size"] && *size < 1 || given["rank"] && given["size"] && *rank >= *size {
		return fmt.Errorf("server: --rank %d, --size %d: want a rank of 0 to size-1 and a size of 1 or more (leave them out to take them from the launcher's environment): %w", *rank, *size, errUsage)
	}
	logger, closeLog, err := lo.open(e)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	defer closeLog()
	dur, err := metastore.ParseDurability(*durability)
	if err != nil {
		return fmt.Errorf("server: --durability: %w: %w", err, errUsage)
	}
	budgetN, payloadBudgetN, rate, err := parseServerSizes(*budget, *payloadBudget, *minRecvRate)
	if err != nil {
		return err
	}
	if *maxConns < 0 || *maxPerPeer < 1 || *maxHandshakes < 1 {
		return fmt.Errorf("server: --max-conns %d, --max-conns-per-peer %d, --max-handshakes %d: want positive numbers: %w", *maxConns, *maxPerPeer, *maxHandshakes, errUsage)
	}
	r, err := cluster.ParseRoles(*roles)
	if err != nil {
		return fmt.Errorf("server: --roles: %w: %w", err, errUsage)
	}
	cfg := server.Config{
		Rank: *rank, Size: *size, Listen: *listen, Advertise: *advertise, Insecure: *insecure, TmpDir: *tmpdir, DataDir: *datadir, Roles: r,
		AbandonStores: abandon, AbandonSlots: abandonSlots,
		SecretFile: *secretFile, StartupTimeout: *startup, Version: Version(), Durability: dur, DataBudget: budgetN,
		MetricsAddr: *metricsAddr,
		NoIndex:     !*index, NoSuffixTree: !*suffixTree, Host: *host, StageProducerDir: *stageDir,
		Limits:        wire.Limits{MaxHeader: uint32(min(*maxHeader, 1<<31)), MaxPayload: *maxPayload},
		PayloadBudget: payloadBudgetN, MaxConns: *maxConns, MaxConnsPerPeer: *maxPerPeer, MaxHandshakes: *maxHandshakes,
		HandshakeTimeout: *handshakeTimeout, StallTimeout: *stallTimeout, MinRecvRate: rate,
		Logger: logger, SlowRequest: lo.slow,
	}
	if *dashboardAddr != "" {
		stop, err := serveDashboard(*dashboardAddr, cfg)
		if err != nil {
			return fmt.Errorf("server: --dashboard: %w", err)
		}
		defer stop()
	}
	return serve(ctx, e, cfg, *cpuprofile, *debugAddr)
}

// parseServerSizes parses --data-budget, --payload-budget and
// --min-recv-rate (0: no floor, which the server takes as -1).
func parseServerSizes(budget, payloadBudget, minRecvRate string) (budgetN, payloadBudgetN, rate int64, err error) {
	budgetN, err = parseSize(budget)
	if err != nil || budgetN < 1 {
		return 0, 0, 0, fmt.Errorf("server: --data-budget %q: want a size such as 512MiB: %w", budget, errUsage)
	}
	payloadBudgetN, err = parseSize(payloadBudget)
	if err != nil || payloadBudgetN < 1 {
		return 0, 0, 0, fmt.Errorf("server: --payload-budget %q: want a size such as 1GiB: %w", payloadBudget, errUsage)
	}
	rate, err = parseSize(minRecvRate)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("server: --min-recv-rate %q: want bytes per second, such as 64KiB: %w", minRecvRate, errUsage)
	}
	if rate == 0 {
		rate = -1 // none
	}
	return budgetN, payloadBudgetN, rate, nil
}

// serve completes cfg from the launcher's environment (rank and size
// not given) and the ready pipe of pdc up, starts the CPU profile and
// the debug server if asked, and runs the server.
func serve(ctx context.Context, e *env, cfg server.Config, cpuprofile, debugAddr string) error {
	launch, fromEnv, err := cluster.FromEnv(e.getenv)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if cfg.Rank < 0 {
		cfg.Rank = 0
		if fromEnv {
			cfg.Rank = launch.Rank
		}
	}
	if cfg.Size == 0 && fromEnv {
		cfg.Size = launch.Size
	}
	if fdStr := e.getenv(readyFDEnv); fdStr != "" {
		fd, err := strconv.Atoi(fdStr)
		if err != nil || fd < 3 {
			return fmt.Errorf("server: %s=%q is not a file descriptor: %w", readyFDEnv, fdStr, errUsage)
		}
		ready := os.NewFile(uintptr(fd), "ready")
		defer ready.Close()
		cfg.Ready = func(self cluster.Server, _ *cluster.List) {
			fmt.Fprintf(ready, "ready %d %s\n", self.Rank, self.Addr)
			ready.Close()
		}
	}
	if cpuprofile != "" {
		stop, err := startCPUProfile(cpuprofile)
		if err != nil {
			return fmt.Errorf("server: --cpuprofile: %w", err)
		}
		defer stop()
	}
	if debugAddr != "" {
		stop, err := serveDebug(debugAddr, cfg.Logger)
		if err != nil {
			return fmt.Errorf("server: --debug-addr: %w", err)
		}
		defer stop()
	}
	return server.Run(ctx, cfg)
}

// rankList is a flag of ranks, comma-separated; given again, it adds.
type rankList []int

func (l *rankList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, r := range *l {
		s[i] = strconv.Itoa(r)
	}
	return strings.Join(s, ",")
}

func (l *rankList) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r < 0 {
			return fmt.Errorf("%q is not a rank", f)
		}
		*l = append(*l, r)
	}
	return nil
}

// slotList is a flag of data slots, comma-separated; given again, it adds.
type slotList []int

func (l *slotList) String() string { return (*rankList)(l).String() }

func (l *slotList) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		s, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || s < 0 {
			return fmt.Errorf("%q is not a data slot", f)
		}
		*l = append(*l, s)
	}
	return nil
}
