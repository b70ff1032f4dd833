package crashloop

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/region"
)

// Config is a crash loop.
type Config struct {
	// Bin is the pdc binary: its servers, and its hidden
	// `bench-soak-worker` command as the client processes. Required.
	Bin string
	// Dir holds the cluster's tmpdir and datadir and the op logs.
	// Required; it should be empty.
	Dir string
	// Cycles is how many rounds of work, faults and restart to run.
	// Default 20.
	Cycles int
	// Servers is the server count. Default 3.
	Servers int
	// ServerCounts, if set, are the server counts a restart picks from at
	// random (which needs region data to move to new owners).
	ServerCounts []int
	// Workers is how many client processes work in each cycle. Default 3.
	Workers int
	// Work is how long the clients work in a cycle before everything is
	// stopped. Default 2s.
	Work time.Duration
	// Creates is how many objects each client may create per cycle.
	// Default 2.
	Creates int
	// MaxObjects stops the creates once this many objects exist, so that
	// a long soak's read-back stays as long as a short one's. Default 64.
	MaxObjects int
	// Seed seeds every random choice. Default 1.
	Seed uint64
	// DynamicOverwrites lets the clients overwrite region-dynamic and
	// region-local objects (see DynamicOverwritesSafe, the default).
	DynamicOverwrites *bool
	// Durability is the metadata servers' durability (pdc up
	// --durability): "" or "process", or "sync", whose commits are
	// visible before their fsync returns and whose reads wait for the
	// creates and cuts still in one.
	Durability string
	// StopAtFirst ends the run after the first cycle that found a
	// violation, a server death or a race, leaving the cluster's files as
	// that cycle left them: later cycles would delete and rewrite the
	// objects a diagnosis needs.
	StopAtFirst bool
	// Out, if set, gets a line per cycle.
	Out io.Writer
}

func (c *Config) ensureDefaults() {
	if c.Cycles == 0 {
		c.Cycles = 20
	}
	if c.Servers == 0 {
		c.Servers = 3
	}
	if c.Workers == 0 {
		c.Workers = 3
	}
	if c.Work == 0 {
		c.Work = 2 * time.Second
	}
	if c.Creates == 0 {
		c.Creates = 2
	}
	if c.MaxObjects == 0 {
		c.MaxObjects = 64
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.DynamicOverwrites == nil {
		v := DynamicOverwritesSafe
		c.DynamicOverwrites = &v
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.Bin == "" {
		errs = append(errs, errors.New("no pdc binary (Bin)"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("no directory (Dir)"))
	}
	if c.Workers < 1 || c.Workers > 15 {
		errs = append(errs, fmt.Errorf("%d workers: want 1 to 15", c.Workers))
	}
	if c.Cycles < 1 || c.Cycles > 0xffff {
		errs = append(errs, fmt.Errorf("%d cycles: want 1 to 65535", c.Cycles))
	}
	for _, n := range append([]int{c.Servers}, c.ServerCounts...) {
		if n < 1 {
			errs = append(errs, fmt.Errorf("server count %d", n))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("crash loop: %w: %w", err, pdc.ErrInvalid)
	}
	return nil
}

// Result is what a crash loop did and found.
type Result struct {
	Stats
	ServerKills int // servers killed with SIGKILL mid-work
	// ServerRestarts are servers killed mid-work and restarted while the
	// clients still work (pdc up --restart-dead).
	ServerRestarts int
	ClientKills    int // client processes killed with SIGKILL mid-work (besides those at each cycle's end)
	CrashStops     int // cycles ended by SIGKILL of every server
	CleanStops     int // cycles ended by pdc down
	Restarts       int
	Resizes        int // restarts with another server count
	ServerDeaths   int // servers that died without being killed
	WorkerErrors   int // client processes that exited with an error of their own
	RaceReports    int // data races the race detector reported in a server or client (race builds)
	Problems       []string
	Duration       time.Duration
}

// Failed reports whether anything was lost, zeroed or corrupt, or a
// server died on its own.
func (r *Result) Failed() bool { return r.Violations() > 0 || r.ServerDeaths > 0 || r.RaceReports > 0 }

// Summary is the result in one line.
func (r *Result) Summary() string {
	return fmt.Sprintf("%d cycles in %v: %d acknowledged operations checked (%d writes, %d creates, %d tag puts, %d deletes, %d set dims, %d tag deletes), %d unacknowledged allowed, %d reads, %d searches, %d listings; "+
		"faults: %d server kills (%d restarted mid-cycle), %d client kills, %d crash stops, %d clean stops, %d resizes; "+
		"violations: %d lost, %d zeroed, %d corrupt (%d registers undecided); %d server deaths, %d data races",
		r.Cycles, r.Duration.Round(time.Millisecond), r.Acked(), r.AckedWrites, r.AckedCreates, r.AckedTags,
		r.AckedDeletes, r.AckedDims, r.AckedTagDels, r.Unacked, r.Reads, r.Searches, r.Lists,
		r.ServerKills, r.ServerRestarts, r.ClientKills, r.CrashStops, r.CleanStops, r.Resizes,
		r.Lost, r.Zeroed, r.Corrupt, r.Undecided, r.ServerDeaths, r.RaceReports) + r.where()
}

func (r *Result) where() string {
	if len(r.Where) == 0 {
		return ""
	}
	var parts []string
	for _, k := range sortedKeys(r.Where) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, r.Where[k]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

const container = "crashloop"

type loop struct {
	cfg     Config
	r       *rand.Rand
	tmpdir  string
	datadir string
	n       int // servers now
	chk     *Checker
	res     Result
	props   map[string]*ObjProps
	scanned map[string]int64 // how far each process log was searched for race reports
}

// Run runs the crash loop. It returns an error for what stopped it
// (a cluster that did not start, ctx); what it found is in the Result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	l := &loop{cfg: cfg, r: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), tmpdir: filepath.Join(cfg.Dir, "tmp"),
		datadir: filepath.Join(cfg.Dir, "data"), n: cfg.Servers, chk: newChecker(), props: map[string]*ObjProps{},
		scanned: map[string]int64{}}
	defer func() {
		l.res.Duration = time.Since(start)
		l.res.Stats = l.chk.Stats
		l.res.Problems = append(l.res.Problems, l.chk.Problems...)
	}()
	if err := l.up(ctx); err != nil {
		return &l.res, err
	}
	defer l.down()
	if err := l.createContainer(ctx); err != nil {
		return &l.res, err
	}
	for cycle := 1; cycle <= cfg.Cycles; cycle++ {
		if err := l.cycle(ctx, cycle); err != nil {
			return &l.res, fmt.Errorf("cycle %d: %w", cycle, err)
		}
		if cfg.StopAtFirst && (l.chk.Stats.Violations() > 0 || l.res.ServerDeaths > 0 || l.res.RaceReports > 0) {
			break
		}
	}
	return &l.res, nil
}

func (l *loop) pdc(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.cfg.Bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pdc %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return nil
}

func (l *loop) up(ctx context.Context) error {
	args := []string{"up", "-n", fmt.Sprint(l.n), "--tmpdir", l.tmpdir, "--datadir", l.datadir, "--timeout", "2m"}
	if l.cfg.Durability != "" {
		args = append(args, "--durability", l.cfg.Durability)
	}
	return l.pdc(ctx, args...)
}

// down stops what is left of the cluster at the end.
func (l *loop) down() {
	list, err := cluster.ReadList(l.tmpdir)
	if err != nil {
		return
	}
	if err := l.pdc(context.Background(), "down", "--tmpdir", l.tmpdir, "--timeout", "30s"); err != nil {
		for _, s := range list.Servers {
			_ = syscall.Kill(s.PID, syscall.SIGKILL)
		}
	}
}

func (l *loop) connect(ctx context.Context) (*client.Client, error) {
	return client.Connect(ctx, client.WithTmpDir(l.tmpdir))
}

func (l *loop) createContainer(ctx context.Context) error {
	c, err := l.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, _, err = c.CreateContainer(ctx, container, client.Persistent)
	return err
}

// proc is a client process of a cycle.
type proc struct {
	i      int
	cmd    *exec.Cmd
	stdin  io.Closer
	log    string
	out    string
	killed bool
	ready  chan struct{} // closed when it says it works
	done   chan struct{} // closed once waited
	err    error
}

func (l *loop) startWorker(dir string, cycle, i int, objects string, creates int) (*proc, error) {
	p := &proc{i: i, log: filepath.Join(dir, fmt.Sprintf("w%d.log", i)), out: filepath.Join(dir, fmt.Sprintf("w%d.err", i)),
		ready: make(chan struct{}), done: make(chan struct{})}
	errf, err := os.Create(p.out)
	if err != nil {
		return nil, err
	}
	defer errf.Close()
	p.cmd = exec.Command(l.cfg.Bin, "bench-soak-worker", "--tmpdir", l.tmpdir, "--log", p.log, "--proc", fmt.Sprint(i),
		"--cycle", fmt.Sprint(cycle), "--seed", fmt.Sprint(l.r.Uint64()), "--container", container,
		"--objects", objects, "--create", fmt.Sprint(creates), fmt.Sprintf("--dynamic-overwrites=%v", *l.cfg.DynamicOverwrites))
	p.cmd.Stderr = errf
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	// Owned by p: it ends when the process does (its stdout closes), and
	// kill waits for it.
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				select {
				case <-p.ready:
				default:
					close(p.ready)
				}
			}
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) kill() {
	if p.killed {
		return
	}
	p.killed = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.stdin.Close()
}

// exited reports whether the process ended on its own, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return !p.killed, p.err
	default:
		return false, nil
	}
}

// waitReady waits until every process says it works, one has ended, or
// a minute has passed (a slow start only shortens the work).
func waitReady(ctx context.Context, ps []*proc) error {
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	for _, p := range ps {
		select {
		case <-p.ready:
		case <-p.done:
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// wait waits for d or ctx.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cycle runs one cycle: workers against the cluster with a client and a
// server maybe killed at random moments, every client killed at the end
// and the servers stopped (cleanly or not), the workers' logs checked,
// then a restart (maybe with another server count) and a read-back of
// everything. The random choices are drawn in this order, so that a seed
// repeats a run.
func (l *loop) cycle(ctx context.Context, cycle int) error {
	began := time.Now()
	dir := filepath.Join(l.cfg.Dir, fmt.Sprintf("c%04d", cycle))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	list, err := cluster.ReadList(l.tmpdir)
	if err != nil {
		return err
	}
	ps, err := l.startWorkers(ctx, dir, cycle)
	defer func() {
		for _, p := range ps {
			p.kill()
		}
	}()
	if err != nil {
		return err
	}
	killedServer, note, err := l.injectFaults(ctx, ps, list)
	if err != nil {
		return err
	}
	// A server restarted meanwhile has another pid.
	if list, err = cluster.ReadList(l.tmpdir); err != nil {
		return err
	}
	stop, err := l.stopAll(ctx, cycle, ps, list, killedServer)
	if err != nil {
		return err
	}
	note = append(note, stop)
	before := l.chk.Stats
	if err := l.checkLogs(cycle, ps); err != nil {
		return err
	}
	return l.restartAndReadBack(ctx, cycle, dir, began, before, note)
}

// startWorkers starts the cycle's workers, with the objects the checker
// knows of to work on, and waits for them to be ready. It returns the
// workers started even with an error, for the caller to kill.
func (l *loop) startWorkers(ctx context.Context, dir string, cycle int) ([]*proc, error) {
	objects := filepath.Join(dir, "objects")
	catalog := l.chk.Catalog()
	if err := os.WriteFile(objects, []byte(strings.Join(catalog, "\n")), 0o644); err != nil {
		return nil, err
	}
	creates := min(l.cfg.Creates, max(0, l.cfg.MaxObjects-len(catalog))/l.cfg.Workers)
	var ps []*proc
	for i := range l.cfg.Workers {
		p, err := l.startWorker(dir, cycle, i, objects, creates)
		if err != nil {
			return ps, err
		}
		ps = append(ps, p)
	}
	return ps, waitReady(ctx, ps)
}

// injectFaults lets the workers work for cfg.Work, killing a client and a
// server (each with a chance of 6 in 10) at random moments of it, and
// one time in two restarting the server killed at a later moment. It
// returns the servers killed and what it did.
func (l *loop) injectFaults(ctx context.Context, ps []*proc, list *cluster.List) (map[int]bool, []string, error) {
	type fault struct {
		at   time.Duration
		what string
		do   func()
	}
	var faults []fault
	var note []string
	killedServer := map[int]bool{}
	if l.r.IntN(10) < 6 {
		p := ps[l.r.IntN(len(ps))]
		at := time.Duration(l.r.Int64N(int64(l.cfg.Work)))
		faults = append(faults, fault{at, fmt.Sprintf("killed client %d", p.i), func() { p.kill(); l.res.ClientKills++ }})
	}
	var restartErr error
	if l.r.IntN(10) < 6 {
		s := list.Servers[l.r.IntN(len(list.Servers))]
		at := time.Duration(l.r.Int64N(int64(l.cfg.Work)))
		faults = append(faults, fault{at, fmt.Sprintf("killed server %d", s.Rank), func() {
			_ = syscall.Kill(s.PID, syscall.SIGKILL)
			killedServer[s.PID] = true
			l.res.ServerKills++
		}})
		if l.r.IntN(2) == 0 {
			// Restarted while the clients work: it rejoins the cluster,
			// delivers what it owes the others and is owed, and the
			// clients find it again.
			back := at + time.Duration(l.r.Int64N(int64(l.cfg.Work-at)+1))
			faults = append(faults, fault{back, fmt.Sprintf("restarted server %d", s.Rank), func() {
				// Once it is gone: until then its data dir is in use.
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				err := cluster.WaitExit(wctx, s.PID)
				cancel()
				if err == nil {
					err = l.pdc(ctx, "up", "--restart-dead", "--tmpdir", l.tmpdir, "--timeout", "1m")
				}
				if err != nil {
					restartErr = err
					return
				}
				l.res.ServerRestarts++
			}})
		}
	}
	slices.SortStableFunc(faults, func(a, b fault) int { return cmp.Compare(a.at, b.at) })
	t0 := time.Now()
	for _, f := range faults {
		if err := wait(ctx, f.at-time.Since(t0)); err != nil {
			return nil, nil, err
		}
		f.do()
		note = append(note, fmt.Sprintf("%s at %v", f.what, f.at.Round(time.Millisecond)))
		if restartErr != nil {
			return nil, nil, restartErr
		}
	}
	if err := wait(ctx, l.cfg.Work-time.Since(t0)); err != nil {
		return nil, nil, err
	}
	return killedServer, note, nil
}

// stopAll ends the cycle's work: every client is killed mid-operation,
// then the servers are checked and stopped, with pdc down (1 in 4, if no
// server was killed) or kill -9. It says which.
func (l *loop) stopAll(ctx context.Context, cycle int, ps []*proc, list *cluster.List, killedServer map[int]bool) (string, error) {
	for _, p := range ps {
		if ended, err := p.exited(); ended {
			l.res.WorkerErrors++
			l.res.Problems = append(l.res.Problems, fmt.Sprintf("cycle %d: client %d exited by itself: %v: %s", cycle, p.i, err, tail(p.out)))
		}
		p.kill()
	}
	l.checkServers(cycle, list, killedServer)
	var note string
	if l.r.IntN(4) == 0 && len(killedServer) == 0 {
		l.res.CleanStops++
		note = "pdc down"
		if err := l.pdc(ctx, "down", "--tmpdir", l.tmpdir, "--timeout", "1m"); err != nil {
			return "", err
		}
	} else {
		l.res.CrashStops++
		note = "kill -9 all"
		for _, s := range list.Servers {
			_ = syscall.Kill(s.PID, syscall.SIGKILL)
		}
	}
	for _, s := range list.Servers {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := cluster.WaitExit(wctx, s.PID)
		cancel()
		if err != nil {
			return "", err
		}
	}
	return note, nil
}

// checkLogs gives the workers' operation logs to the checker.
func (l *loop) checkLogs(cycle int, ps []*proc) error {
	var logs [][]Record
	for _, p := range ps {
		recs, err := readLog(p.log)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.Kind == kindCreate && r.Props != nil {
				l.props[r.Obj] = r.Props
			}
		}
		logs = append(logs, recs)
	}
	l.chk.Add(cycle, logs, l.props)
	return nil
}

// restartAndReadBack restarts the cluster, maybe with another server
// count, reads everything back for the checker, checks the servers and
// prints the cycle's line.
// before is the checker's stats before the cycle's logs.
func (l *loop) restartAndReadBack(ctx context.Context, cycle int, dir string, began time.Time, before Stats, note []string) error {
	if len(l.cfg.ServerCounts) > 0 {
		n := l.cfg.ServerCounts[l.r.IntN(len(l.cfg.ServerCounts))]
		if n != l.n {
			l.res.Resizes++
			note = append(note, fmt.Sprintf("restart with %d servers", n))
		}
		l.n = n
	}
	if err := l.up(ctx); err != nil {
		return err
	}
	l.res.Restarts++
	if err := l.readBack(ctx, cycle, dir); err != nil {
		return err
	}
	after := l.chk.Stats
	list, err := cluster.ReadList(l.tmpdir)
	if err != nil {
		return err
	}
	l.checkServers(cycle, list, nil)
	l.scanRaces(cycle, dir)
	fmt.Fprintf(l.cfg.Out, "cycle %d/%d (from %s): %d servers, %s; checked %d acknowledged, %d unacknowledged, %d reads, %d searches; violations %d; %v\n",
		cycle, l.cfg.Cycles, began.UTC().Format("15:04:05.000"), len(list.Servers), strings.Join(note, ", "), after.Acked()-before.Acked(), after.Unacked-before.Unacked,
		after.Reads-before.Reads, after.Searches-before.Searches, after.Violations()-before.Violations(), time.Since(began).Round(time.Millisecond))
	return nil
}

// checkServers counts the servers of list that died without being killed.
func (l *loop) checkServers(cycle int, list *cluster.List, killed map[int]bool) {
	for _, s := range list.Servers {
		if !killed[s.PID] && !cluster.Running(s.PID) {
			l.res.ServerDeaths++
			log := filepath.Join(l.tmpdir, "logs", fmt.Sprintf("server-%d.log", s.Rank))
			l.res.Problems = append(l.res.Problems, fmt.Sprintf("cycle %d: %s died without being killed; its log ends:\n%s", cycle, s.Label(), tail(log)))
		}
	}
}

// scanRaces counts the data races reported, since the last scan, in the
// servers' logs and the clients' stderr: a race-built process reports
// and goes on.
func (l *loop) scanRaces(cycle int, dir string) {
	logs, _ := filepath.Glob(filepath.Join(l.tmpdir, "logs", "*.log"))
	errs, _ := filepath.Glob(filepath.Join(dir, "w*.err"))
	for _, path := range append(logs, errs...) {
		b, err := os.ReadFile(path)
		if err != nil || int64(len(b)) <= l.scanned[path] {
			continue
		}
		fresh := b[l.scanned[path]:]
		l.scanned[path] = int64(len(b))
		if n := bytes.Count(fresh, []byte("WARNING: DATA RACE")); n > 0 {
			l.res.RaceReports += n
			i := bytes.Index(fresh, []byte("WARNING: DATA RACE"))
			l.res.Problems = append(l.res.Problems, fmt.Sprintf("cycle %d: %d data races reported in %s, the first:\n%s",
				cycle, n, path, fresh[i:min(len(fresh), i+3000)]))
		}
	}
}

// readBack reads, as process 15 of the cycle, every object operated on in
// the cycle and a few others: whether it exists, its tags, all its cells.
func (l *loop) readBack(ctx context.Context, cycle int, dir string) error {
	path := filepath.Join(dir, "readback.log")
	log, err := createLog(path, 15)
	if err != nil {
		return err
	}
	defer log.close()
	c, err := l.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, name := range l.chk.Touched(cycle, 4, l.r) {
		if err := l.readObject(ctx, c, log, name); err != nil {
			return err
		}
	}
	recs, err := readLog(path)
	if err != nil {
		return err
	}
	if err := l.searchBack(ctx, c, log, recs); err != nil {
		return err
	}
	if recs, err = readLog(path); err != nil {
		return err
	}
	l.chk.Verify(cycle, recs)
	return nil
}

// readBackSearches is how many of the tag values read back are looked
// for again by a search each.
const readBackSearches = 16

// searchBack searches, after the objects are read back (recs), for what
// every tag holds (each key alone, every text, every number: what the
// index holds after the restart must agree with the tags read back) and
// for a few of the values read, by the forms of searchFor; then it lists
// the container.
func (l *loop) searchBack(ctx context.Context, c *client.Client, log *opLog, recs []Record) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var specs []SearchSpec
	for _, tag := range tagNames {
		specs = append(specs, SearchSpec{KeyKind: patExact, Key: tag})
		if numericTag(tag) {
			specs = append(specs, SearchSpec{KeyKind: patExact, Key: tag, Range: true, Lo: 1, Hi: math.MaxUint64})
		} else {
			specs = append(specs, SearchSpec{KeyKind: patExact, Key: tag, ValKind: patPrefix, Val: "v"})
		}
	}
	inv := map[uint64]Record{}
	var read []tagPut
	for _, r := range recs {
		switch {
		case r.Ev == evInvoke:
			inv[r.Op] = r
		case r.Ev == evOK && inv[r.Op].Kind == kindGetTag && r.WID != 0:
			read = append(read, tagPut{inv[r.Op].Tag, r.WID})
		}
	}
	l.r.Shuffle(len(read), func(i, j int) { read[i], read[j] = read[j], read[i] })
	for _, p := range read[:min(len(read), readBackSearches)] {
		specs = append(specs, searchFor(l.r, p.tag, p.wid))
	}
	for _, spec := range specs {
		if err := search(ctx, c, log, spec); err != nil {
			return err
		}
	}
	// And the container's listing must agree with the objects read back.
	ct, err := c.OpenContainer(ctx, container)
	if err != nil {
		return err
	}
	return list(ctx, ct, log)
}

func (l *loop) readObject(ctx context.Context, c *client.Client, log *opLog, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := log.invoke(Record{Kind: kindOpen, Obj: name})
	if err != nil {
		return err
	}
	o, err := c.OpenObject(ctx, name)
	switch {
	case errors.Is(err, pdc.ErrNotFound):
		return log.done(n, Record{Found: false})
	case err != nil:
		return log.fail(n, err)
	}
	dims := o.Info().Props.Dims
	if err := log.done(n, Record{Found: true, ID: o.ID(), Dims: dims}); err != nil {
		return err
	}
	for _, tag := range tagNames {
		if err := getTag(ctx, log, o, name, tag); err != nil {
			return err
		}
	}
	whole := region.Shape(dims...)
	buf := make([]byte, 8*whole.Volume())
	n, err = log.invoke(Record{Kind: kindRead, Obj: name, ID: o.ID(), Box: &whole})
	if err != nil {
		return err
	}
	if err := o.Read(ctx, whole, buf); err != nil {
		return log.fail(n, err)
	}
	return log.done(n, Record{Vals: cellsOf(buf)})
}

func leUint64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// tail is the end of a file, for a report.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return "  " + strings.Join(lines[max(0, len(lines)-15):], "\n  ")
}
