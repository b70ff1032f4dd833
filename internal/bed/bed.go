package bed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Config is what New builds.
type Config struct {
	// Nodes is how many nodes the bed has; at least 1, at most 200.
	Nodes int
	// Dir holds the nodes' directories and the shared one (a test's
	// TempDir). Required.
	Dir string
}

// Bed is a set of nodes on one bridge. Its fields are set by New and not
// changed after.
type Bed struct {
	Nodes []*Node
	// Shared is a directory every node sees: the shared file system (the
	// cluster's tmpdir goes here).
	Shared string
	// Host is the host namespace's address on the bridge: the nodes reach
	// the test process (and a Proxy) there.
	Host netip.Addr

	bridge string
	prefix netip.Prefix

	mu     sync.Mutex
	closed bool
}

// Node is one host of the bed.
type Node struct {
	// Name is the node's name, node-1, node-2, ...: also the host name
	// its processes see.
	Name string
	// Addr is the node's address on the bridge.
	Addr netip.Addr
	// Dir is the node's own directory; DataDir, ProducerDir and
	// ConsumerDir are node-local directories under it.
	Dir, DataDir, ProducerDir, ConsumerDir string

	// NS is the network namespace's name (for ip netns exec).
	NS string
	// hostLink is the host side of the node's veth pair, on the bridge;
	// the node side is eth0 in NS.
	hostLink string
}

// Names: namespaces are "pdcbed-PID-SEQ-I"; links "pbPID_SEQ_b" for the
// bridge and "pbPID_SEQ_I" for node I's host-side veth, PID and SEQ in
// base 36 to fit the kernel's 15 characters (PID <= 4194304 is 5 digits).
const nsPrefix = "pdcbed-"

var seq atomic.Int64

// lockPath serializes the choice of a subnet among bed processes, so two
// running at once do not pick the same one.
const lockPath = "/run/pdc-bed.lock"

// Available reports nil when a bed can be built here: root, ip, tc,
// unshare and network namespaces work. Otherwise it says why not.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("bed: needs root (network namespaces)")
	}
	for _, p := range []string{"ip", "tc", "unshare"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("bed: %s not found (install iproute2 and util-linux): %w", p, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// An unshared network namespace that brings up a veth pair: what New
	// does, without leaving anything named behind.
	cmd := exec.CommandContext(ctx, "unshare", "--net", "--uts", "sh", "-c",
		"ip link set lo up && ip link add pbprobe0 type veth peer name pbprobe1 && hostname pdc-bed-probe")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bed: network namespaces do not work here: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// New builds a bed of cfg.Nodes nodes, after removing what beds of dead
// processes left behind. Close removes it.
func New(ctx context.Context, cfg Config) (_ *Bed, err error) {
	if cfg.Nodes < 1 || cfg.Nodes > 200 {
		return nil, fmt.Errorf("bed: %d nodes: want 1 to 200", cfg.Nodes)
	}
	if cfg.Dir == "" {
		return nil, errors.New("bed: no Dir")
	}
	if err := Sweep(ctx); err != nil {
		return nil, err
	}
	pid, s := os.Getpid(), seq.Add(1)
	tag := "pb" + strconv.FormatInt(int64(pid), 36) + "_" + strconv.FormatInt(s, 36) + "_"
	b := &Bed{bridge: tag + "b", Shared: filepath.Join(cfg.Dir, "shared")}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	for i := range cfg.Nodes {
		n := &Node{
			Name:     fmt.Sprintf("node-%d", i+1),
			Dir:      filepath.Join(cfg.Dir, fmt.Sprintf("node-%d", i+1)),
			NS:       fmt.Sprintf("%s%d-%d-%d", nsPrefix, pid, s, i+1),
			hostLink: fmt.Sprintf("%s%d", tag, i+1),
		}
		n.DataDir, n.ProducerDir, n.ConsumerDir = filepath.Join(n.Dir, "data"), filepath.Join(n.Dir, "producer"), filepath.Join(n.Dir, "consumer")
		b.Nodes = append(b.Nodes, n)
	}
	for _, d := range append([]string{b.Shared}, b.dirs()...) {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("bed: %w", err)
		}
	}
	if err := b.makeBridge(ctx, uint64(pid)<<16|uint64(s)); err != nil {
		return nil, err
	}
	for i, n := range b.Nodes {
		a := b.prefix.Addr().As4()
		a[3] = byte(10 + i)
		n.Addr = netip.AddrFrom4(a)
		if err := b.makeNode(ctx, n); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (b *Bed) dirs() []string {
	var d []string
	for _, n := range b.Nodes {
		d = append(d, n.DataDir, n.ProducerDir, n.ConsumerDir)
	}
	return d
}

// makeBridge creates the bridge with the host's address on a /24 in
// 10.0.0.0/8 that no route of the host namespace overlaps, starting from
// one derived from key so that concurrent beds rarely try the same one;
// a file lock makes the check and the claim one step.
func (b *Bed) makeBridge(ctx context.Context, key uint64) error {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("bed: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("bed: lock %s: %w", lockPath, err)
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)

	used, err := usedPrefixes(ctx)
	if err != nil {
		return err
	}
	h := fnv.New64a()
	fmt.Fprint(h, key)
	start := h.Sum64()
	// 10.64.0.0-10.127.255.0: 16384 /24s, away from the low 10.x nets
	// that sites and container runtimes tend to use.
	const span = 1 << 14
	for i := range uint64(span) {
		k := (start + i) % span
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(64 + k>>8), byte(k), 0}), 24)
		if overlapsAny(p, used) {
			continue
		}
		host := p.Addr().As4()
		host[3] = 1
		b.prefix, b.Host = p, netip.AddrFrom4(host)
		if err := ip(ctx, "link", "add", b.bridge, "type", "bridge"); err != nil {
			return err
		}
		if err := ip(ctx, "addr", "add", b.Host.String()+"/24", "dev", b.bridge); err != nil {
			return err
		}
		return ip(ctx, "link", "set", b.bridge, "up")
	}
	return errors.New("bed: no free /24 in 10.64.0.0/10")
}

func usedPrefixes(ctx context.Context) ([]netip.Prefix, error) {
	out, err := run(ctx, "ip", "-4", "-o", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	var used []netip.Prefix
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		if dst == "local" || dst == "broadcast" || dst == "unicast" {
			if len(f) < 2 {
				continue
			}
			dst = f[1]
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if p, err := netip.ParsePrefix(dst); err == nil && p.Bits() > 0 {
			used = append(used, p.Masked())
		}
	}
	return used, nil
}

func overlapsAny(p netip.Prefix, used []netip.Prefix) bool {
	for _, u := range used {
		if u.Overlaps(p) {
			return true
		}
	}
	return false
}

func (b *Bed) makeNode(ctx context.Context, n *Node) error {
	steps := [][]string{
		{"netns", "add", n.NS},
		{"link", "add", n.hostLink, "type", "veth", "peer", "name", "eth0", "netns", n.NS},
		{"link", "set", n.hostLink, "master", b.bridge, "up"},
		{"-n", n.NS, "addr", "add", n.Addr.String() + "/24", "dev", "eth0"},
		{"-n", n.NS, "link", "set", "eth0", "up"},
		{"-n", n.NS, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	return nil
}

// Command is a command that runs on the node: in its network namespace
// and in a UTS namespace of its own whose host name is n.Name, so a pdc
// server there reports the node's name. The process is name itself (ip
// netns exec, unshare and sh each exec the next), so killing
// cmd.Process kills it.
func (n *Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	a := append([]string{"netns", "exec", n.NS, "unshare", "--uts", "sh", "-c", `hostname "$0" && exec "$@"`, n.Name, name}, args...)
	return exec.CommandContext(ctx, "ip", a...)
}

// Partition takes the node's link down: from then on, nothing it sends
// reaches anyone and nothing reaches it, and connections already open
// see silence, not resets, as with a pulled cable or a dead switch port.
func (n *Node) Partition() error {
	return ip(context.Background(), "link", "set", n.hostLink, "down")
}

// Heal brings the node's link back up after Partition.
func (n *Node) Heal() error {
	return ip(context.Background(), "link", "set", n.hostLink, "up")
}

// Cut partitions n and peer from each other only, while both still
// reach everyone else: each namespace gets a blackhole route to the
// other's address, so what either sends the other vanishes.
func (n *Node) Cut(peer *Node) error {
	ctx := context.Background()
	return errors.Join(
		ip(ctx, "-n", n.NS, "route", "add", "blackhole", peer.Addr.String()+"/32"),
		ip(ctx, "-n", peer.NS, "route", "add", "blackhole", n.Addr.String()+"/32"))
}

// Uncut undoes Cut.
func (n *Node) Uncut(peer *Node) error {
	ctx := context.Background()
	return errors.Join(
		ip(ctx, "-n", n.NS, "route", "del", "blackhole", peer.Addr.String()+"/32"),
		ip(ctx, "-n", peer.NS, "route", "del", "blackhole", n.Addr.String()+"/32"))
}

// Limit limits the node's link to rate (tc's syntax: "1gbit", "100mbit")
// both ways, with a token bucket filter on each end of its veth pair.
func (n *Node) Limit(rate string) error {
	bps, err := parseRate(rate)
	if err != nil {
		return err
	}
	// The bucket holds 10 ms at rate, at least 64 KiB (a GSO packet),
	// and a packet waits at most 100 ms for tokens.
	burst := max(bps/8/100, 64<<10)
	args := []string{"qdisc", "replace", "dev", "", "root", "tbf", "rate", strconv.FormatUint(bps, 10) + "bit",
		"burst", strconv.FormatUint(burst, 10), "latency", "100ms"}
	ctx := context.Background()
	args[3] = n.hostLink
	if err := tc(ctx, args...); err != nil {
		return err
	}
	args[3] = "eth0"
	return tc(ctx, append([]string{"-n", n.NS}, args...)...)
}

// Unlimit removes Limit's filters.
func (n *Node) Unlimit() error {
	ctx := context.Background()
	err1 := tc(ctx, "qdisc", "del", "dev", n.hostLink, "root")
	err2 := tc(ctx, "-n", n.NS, "qdisc", "del", "dev", "eth0", "root")
	return errors.Join(err1, err2)
}

// Qdiscs is what tc shows of the queueing disciplines on both ends of the
// node's link, for tests that check a Limit is in place.
func (n *Node) Qdiscs() (host, node string, err error) {
	ctx := context.Background()
	if host, err = run(ctx, "tc", "qdisc", "show", "dev", n.hostLink); err != nil {
		return "", "", err
	}
	node, err = run(ctx, "tc", "-n", n.NS, "qdisc", "show", "dev", "eth0")
	return host, node, err
}

func parseRate(s string) (uint64, error) {
	units := []struct {
		suffix string
		mult   uint64
	}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}}
	ls := strings.ToLower(strings.TrimSpace(s))
	for _, u := range units {
		if num, ok := strings.CutSuffix(ls, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || v <= 0 {
				break
			}
			bps := uint64(v * float64(u.mult))
			if bps < 8000 {
				break
			}
			return bps, nil
		}
	}
	return 0, fmt.Errorf("bed: rate %q: want a number and bit, kbit, mbit, gbit or tbit, at least 8kbit", s)
}

// Close kills every process still in the bed's namespaces and deletes
// the namespaces, links and bridge. It may be called more than once.
func (b *Bed) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, n := range b.Nodes {
		errs = append(errs, killAll(ctx, n.NS))
	}
	// Links before namespaces: a namespace goes asynchronously, and its
	// veth pair with it, after ip netns delete returns.
	for _, n := range b.Nodes {
		errs = append(errs, removeLink(ctx, n.hostLink))
	}
	for _, n := range b.Nodes {
		errs = append(errs, removeNS(ctx, n.NS))
	}
	errs = append(errs, removeLink(ctx, b.bridge))
	return errors.Join(errs...)
}

// removeNS kills the processes in namespace ns and deletes it; a missing
// namespace is no error.
func removeNS(ctx context.Context, ns string) error {
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := killAll(ctx, ns); err != nil {
		return err
	}
	return ip(ctx, "netns", "delete", ns)
}

// killAll SIGKILLs every process in namespace ns and waits until each is
// gone, so that nothing of a test writes to its directories after.
func killAll(ctx context.Context, ns string) error {
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	out, err := run(ctx, "ip", "netns", "pids", ns)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range strings.Fields(out) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		errs = append(errs, killWait(ctx, pid))
	}
	return errors.Join(errs...)
}

// killWait kills pid and waits for it to exit, through a pidfd: the
// process need not be our child.
func killWait(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("bed: pidfd of %d: %w", pid, err)
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("bed: kill %d: %w", pid, err)
	}
	// The fd turns readable when the process exits; a zombie counts
	// as exited. Poll in slices so that ctx is honoured.
	for ctx.Err() == nil {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 100)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("bed: wait for %d: %w", pid, err)
		}
		if n > 0 {
			return nil
		}
	}
	return fmt.Errorf("bed: wait for %d: %w", pid, ctx.Err())
}

func removeLink(ctx context.Context, name string) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	err := ip(ctx, "link", "delete", name)
	if _, serr := os.Stat(filepath.Join("/sys/class/net", name)); errors.Is(serr, os.ErrNotExist) {
		return nil // gone by itself meanwhile, with its namespace or its peer
	}
	return err
}

// Sweep removes the namespaces, links and bridges of beds whose process
// is gone (killed before its Close ran). New calls it.
func Sweep(ctx context.Context) error {
	var errs []error
	ents, err := os.ReadDir("/run/netns")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("bed: %w", err)
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), nsPrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || alive(pid) {
			continue
		}
		errs = append(errs, removeNS(ctx, e.Name()))
	}
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("bed: %w", err))...)
	}
	// Host-side veths before bridges: removing a veth removes its peer.
	for _, bridges := range []bool{false, true} {
		for _, l := range links {
			pid, isBridge, ok := parseLink(l.Name())
			if !ok || isBridge != bridges || alive(pid) {
				continue
			}
			errs = append(errs, removeLink(ctx, l.Name()))
		}
	}
	return errors.Join(errs...)
}

// parseLink parses a link name of a bed: "pb" PID "_" SEQ "_" then "b"
// or a node's number.
func parseLink(name string) (pid int, bridge, ok bool) {
	f := strings.Split(name, "_")
	if len(f) != 3 || !strings.HasPrefix(f[0], "pb") {
		return 0, false, false
	}
	p, err := strconv.ParseInt(f[0][2:], 36, 64)
	if err != nil || p <= 0 {
		return 0, false, false
	}
	if _, err := strconv.ParseInt(f[1], 36, 64); err != nil {
		return 0, false, false
	}
	if f[2] == "b" {
		return int(p), true, true
	}
	if _, err := strconv.Atoi(f[2]); err != nil {
		return 0, false, false
	}
	return int(p), false, true
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func ip(ctx context.Context, args ...string) error {
	_, err := run(ctx, "ip", args...)
	return err
}

func tc(ctx context.Context, args ...string) error {
	_, err := run(ctx, "tc", args...)
	return err
}

func run(ctx context.Context, name string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("bed: %s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(errb.Bytes()))
	}
	return out.String(), nil
}
