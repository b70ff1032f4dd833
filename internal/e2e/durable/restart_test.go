package durable_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
)

// survivor drives a client process in the survivor role (clitest.Role).
type survivor struct {
	t     *testing.T
	out   *bufio.Scanner
	in    *os.File
	acked []string // objects whose write was acknowledged
}

func startSurvivor(t *testing.T, tmpdir string) *survivor {
	t.Helper()
	_, out, in := e2e.ClientProc(t, tmpdir, "survivor")
	// Its container made, it is ready to take servers' deaths.
	if !out.Scan() || out.Text() != "ready" {
		t.Fatalf("the survivor client did not start: %q %v", out.Text(), out.Err())
	}
	return &survivor{t: t, out: out, in: in}
}

// do sends one command and returns the answer's fields.
func (s *survivor) do(op, name string) []string {
	s.t.Helper()
	if _, err := fmt.Fprintf(s.in, "%s %s\n", op, name); err != nil {
		s.t.Fatal(err)
	}
	if !s.out.Scan() {
		s.t.Fatalf("the survivor client ended before answering %s %s: %v", op, name, s.out.Err())
	}
	f := strings.SplitN(s.out.Text(), " ", 4)
	if len(f) < 2 || f[1] != name {
		s.t.Fatalf("survivor answered %q to %s %s", s.out.Text(), op, name)
	}
	return f
}

// mustWrite writes name and fails the test unless it is acknowledged.
func (s *survivor) mustWrite(name string) {
	s.t.Helper()
	if f := s.do("write", name); f[0] != "ok" {
		s.t.Fatalf("write %s: %q", name, strings.Join(f, " "))
	}
	s.acked = append(s.acked, name)
}

// readAll reads back every acknowledged write and fails the test on any
// that does not read back whole.
func (s *survivor) readAll() {
	s.t.Helper()
	for _, n := range s.acked {
		if f := s.do("read", n); f[0] != "ok" {
			s.t.Fatalf("acknowledged object %s: %q", n, strings.Join(f, " "))
		}
	}
}

// queryAll checks that a tag query, through the index and by scanning,
// finds every acknowledged write.
func (s *survivor) queryAll(c *client.Client) {
	s.t.Helper()
	for _, opts := range [][]client.QueryOption{{client.WithNames()}, {client.WithNames(), client.ScanOnly()}} {
		ms, err := c.Query(e2e.Ctx(s.t, time.Minute), "survivor=yes", opts...)
		if err != nil {
			s.t.Fatal(err)
		}
		found := map[string]bool{}
		for _, m := range ms {
			found[m.Name] = true
		}
		for _, n := range s.acked {
			if !found[n] {
				s.t.Fatalf("query survivor=yes (%d options) finds %d objects, not acknowledged %s", len(opts), len(ms), n)
			}
		}
	}
}

// killRank kills the server of rank with SIGKILL and waits for it to go.
func killRank(t *testing.T, tmpdir string, rank int) cluster.Server {
	t.Helper()
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	victim := list.Servers[rank]
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim.PID); err != nil {
		t.Fatal(err)
	}
	return victim
}

// deadWrites tries writes while victim is dead; each one touches every
// data server, so each must fail with ErrUnavailable naming the victim.
func (s *survivor) deadWrites(victim cluster.Server, prefix string, n int) {
	s.t.Helper()
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		f := s.do("write", name)
		if f[0] == "ok" {
			s.t.Fatalf("write %s acknowledged with %s dead; it has a part there", name, victim.Label())
		}
		if len(f) < 4 || f[2] != "unavailable=true" || !strings.Contains(f[3], fmt.Sprintf("rank %d ", victim.Rank)) || !strings.Contains(f[3], victim.Addr) {
			s.t.Fatalf("write %s with %s dead: %q; want ErrUnavailable naming the rank and its address", name, victim.Label(), strings.Join(f, " "))
		}
	}
}

// Each rank in turn, rank 0 included, is killed with SIGKILL and restarted
// alone with `pdc server --rank R`; a client that runs all along gets
// ErrUnavailable naming the dead rank while it is down, goes on without a
// restart once it is back, and reads back every write acknowledged before,
// during and after.
func TestRestartEachRankAlone(t *testing.T) {
	const size = 3
	tmpdir := e2e.Up(t, size)
	datadir := e2e.ServerDataDir(t, tmpdir)
	s := startSurvivor(t, tmpdir)
	for i := range 4 {
		s.mustWrite(fmt.Sprintf("before-%d", i))
	}
	watcher := e2e.Connect(t, tmpdir)
	for cycle, rank := range []int{0, 2, 1, 0} {
		victim := killRank(t, tmpdir, rank)
		s.deadWrites(victim, fmt.Sprintf("dead-c%d-r%d", cycle, rank), 2)
		checkDownStatus(t, tmpdir, watcher, victim)
		clitest.RestartServer(t, e2e.Ctx(t, time.Minute), tmpdir, datadir, rank, size)
		// The watching client reaches the restarted server without being
		// restarted.
		if sts, err := watcher.Status(e2e.Ctx(t, 20*time.Second)); err != nil {
			t.Fatalf("status after %s restarted: %v", victim.Label(), err)
		} else if sts[rank].Instance == victim.Instance {
			t.Fatalf("status after the restart still reports the dead instance of %s", victim.Label())
		}
		if _, down := watcher.DownSince(rank); down {
			t.Fatalf("the client still counts %s as down after it answered", victim.Label())
		}
		for i := range 4 {
			s.mustWrite(fmt.Sprintf("after-c%d-r%d-%d", cycle, rank, i))
		}
		s.readAll()
	}
	// Another process sees it all too, and the tag index has it all.
	other := startSurvivor(t, tmpdir)
	other.acked = s.acked
	other.readAll()
	s.queryAll(watcher)
}

// pdc up --restart-dead restarts exactly the servers that do not answer,
// with the flags of the cluster's pdc up (here Unix sockets, whose dead
// files are in the way), two at once (rank 0 among them) and then one; with
// none dead it says so and starts nothing. A client that runs all along
// goes on, and every acknowledged write reads back.
func TestUpRestartDead(t *testing.T) {
	const size = 3
	tmpdir := e2e.Up(t, size, "--unix")
	s := startSurvivor(t, tmpdir)
	for i := range 4 {
		s.mustWrite(fmt.Sprintf("before-%d", i))
	}
	before, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	out := e2e.MustRun(t, "up", "--restart-dead", "--tmpdir", tmpdir)
	if !strings.Contains(out, "all 3 servers answer; none restarted") {
		t.Fatalf("up --restart-dead with none dead said %q", out)
	}
	if after, err := cluster.ReadList(tmpdir); err != nil || !slices.Equal(after.Servers, before.Servers) {
		t.Fatalf("up --restart-dead with none dead changed the list: %v\n%+v\n%+v", err, before.Servers, after.Servers)
	}
	if r := e2e.Run(t, nil, "up", "--restart-dead", "--tmpdir", tmpdir, "-n", "2"); r.Err == nil || !strings.Contains(r.Stderr, "drop -n") {
		t.Fatalf("up --restart-dead -n 2: %v %s; want a usage error", r.Err, r.Stderr)
	}

	for cycle, victims := range [][]int{{0, 1}, {2}} {
		var dead []cluster.Server
		for _, r := range victims {
			dead = append(dead, killRank(t, tmpdir, r))
		}
		for _, v := range dead {
			s.deadWrites(v, fmt.Sprintf("dead-c%d-r%d", cycle, v.Rank), 1)
		}
		out := e2e.MustRun(t, "up", "--restart-dead", "--tmpdir", tmpdir)
		ranks := "rank"
		if len(victims) > 1 {
			ranks = "ranks"
		}
		want := fmt.Sprintf("restarted %d of 3 servers: %s %s", len(victims), ranks, strings.Trim(strings.ReplaceAll(fmt.Sprint(victims), " ", ", "), "[]"))
		if !strings.Contains(out, want) {
			t.Fatalf("up --restart-dead said %q, want %q", out, want)
		}
		list, err := cluster.ReadList(tmpdir)
		if err != nil {
			t.Fatal(err)
		}
		for r, srv := range list.Servers {
			restarted := slices.Contains(victims, r)
			if restarted == (srv.Instance == before.Servers[r].Instance) || !strings.HasPrefix(srv.Addr, "unix:") {
				t.Fatalf("after restarting %v: rank %d is %+v, was %+v", victims, r, srv, before.Servers[r])
			}
		}
		before = list
		for i := range 4 {
			s.mustWrite(fmt.Sprintf("after-c%d-%d", cycle, i))
		}
		s.readAll()
	}
	s.queryAll(e2e.Connect(t, tmpdir))
}

// checkDownStatus checks what pdc status and a client's Status say while
// victim is dead: it is down, since the first failure to reach it, the
// others answer, and pdc status prints the whole table and fails.
func checkDownStatus(t *testing.T, tmpdir string, c *client.Client, victim cluster.Server) {
	t.Helper()
	r := e2e.Run(t, nil, "status", "--tmpdir", tmpdir)
	if r.Err == nil || !strings.Contains(r.Stderr, "1 of 3 servers down ("+victim.Label()+")") {
		t.Fatalf("pdc status with %s dead: %v, stderr %q; want a failure naming it", victim.Label(), r.Err, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("pdc status printed %d lines, want a header and 3 servers:\n%s", len(lines), r.Stdout)
	}
	for i, l := range lines[1:] {
		if down := strings.Contains(l, "DOWN since "); down != (i == victim.Rank) {
			t.Fatalf("pdc status line of rank %d with %s dead: %q", i, victim.Label(), l)
		}
	}

	sts, err := c.Status(e2e.Ctx(t, 20*time.Second))
	if err == nil || !errors.Is(sts[victim.Rank].Err, pdc.ErrUnavailable) {
		t.Fatalf("status with %s dead: %v", victim.Label(), err)
	}
	since := sts[victim.Rank].DownSince
	if since.IsZero() || since.After(time.Now()) {
		t.Fatalf("status of dead %s: down since %v", victim.Label(), since)
	}
	for i, st := range sts {
		if i != victim.Rank && st.Err != nil {
			t.Fatalf("status of %s with %s dead: %v", st.Label(), victim.Label(), st.Err)
		}
	}
	// Asked again, the client keeps the time it first failed.
	sts, _ = c.Status(e2e.Ctx(t, 20*time.Second))
	if got := sts[victim.Rank].DownSince; !got.Equal(since) {
		t.Fatalf("down since %v, then %v; want the first failure's time kept", since, got)
	}
}

// Writers keep creating and writing objects while a rank is killed (rank
// 0, then a rank that is not) and restarted: every call that fails, in
// flight at the kill or started while the rank is dead, fails with
// ErrUnavailable naming the dead rank and its address; once it is back
// the writers go on, and every acknowledged write reads back.
func TestCallsInFlightToADeadRank(t *testing.T) {
	const size, writers = 3, 4
	tmpdir := e2e.Up(t, size)
	datadir := e2e.ServerDataDir(t, tmpdir)
	c := e2e.Connect(t, tmpdir)
	ctx := e2e.Ctx(t, 3*time.Minute)
	ct, _, err := c.CreateContainer(ctx, "inflight", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	iw := startInflightWriters(ctx, t, ct, writers)
	defer iw.halt()
	iw.collect(8, nil, "")
	var failures int
	for _, rank := range []int{0, 2} {
		victim := killRank(t, tmpdir, rank)
		// Writes started while it is dead fail: every object has a part
		// on every data server. Take a few of those failures.
		failures += iw.takeDeadFailures(2*writers, victim)
		// The writers wait to hand over their results meanwhile.
		clitest.RestartServer(t, ctx, tmpdir, datadir, rank, size)
		list, err := cluster.ReadList(tmpdir)
		if err != nil {
			t.Fatal(err)
		}
		// Calls under way as it came back may still have failed on the
		// old address; after a few more, none fails.
		failures += iw.collect(2*writers, &victim, list.Servers[rank].Addr)
		iw.collect(8, nil, "")
	}
	iw.halt()
	for _, name := range iw.acked {
		if bad, err := clitest.SurvivorRead(ctx, c, name); err != nil || bad != "" {
			t.Fatalf("acknowledged %s: %v %s", name, err, bad)
		}
	}
	t.Logf("%d writes acknowledged and read back, %d failed while a server was dead", len(iw.acked), failures)
}

// inflightResult is the outcome of one create-and-write of a writer.
type inflightResult struct {
	name string
	err  error
}

// inflightWriters create and write objects until halted; acked are the
// writes acknowledged so far, in the order collected.
type inflightWriters struct {
	t       *testing.T
	ctx     context.Context
	results chan inflightResult
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	acked   []string
}

// startInflightWriters starts writers goroutines, each creating and
// writing objects in ct and handing over each result until halted.
func startInflightWriters(ctx context.Context, t *testing.T, ct *client.Container, writers int) *inflightWriters {
	iw := &inflightWriters{t: t, ctx: ctx, results: make(chan inflightResult), stop: make(chan struct{})}
	for w := range writers {
		iw.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-iw.stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", w, i)
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := clitest.SurvivorWrite(cctx, ct, name)
				cancel()
				select {
				case iw.results <- inflightResult{name, err}:
				case <-iw.stop:
					return
				}
			}
		})
	}
	return iw
}

// halt stops the writers and waits for them; it may be called again.
func (iw *inflightWriters) halt() {
	iw.once.Do(func() { close(iw.stop) })
	iw.wg.Wait()
}

// collect takes results until n more writes are acknowledged; each
// failure must name victim (when there is one) as unavailable, at its
// old address or at newAddr (a call that failed as another found it
// restarted names it where it is now).
func (iw *inflightWriters) collect(n int, victim *cluster.Server, newAddr string) (failed int) {
	t := iw.t
	t.Helper()
	for want := len(iw.acked) + n; len(iw.acked) < want; {
		var r inflightResult
		select {
		case r = <-iw.results:
		case <-iw.ctx.Done():
			t.Fatalf("%d of %d writes acknowledged before the deadline", len(iw.acked), want)
		}
		switch {
		case r.err == nil:
			iw.acked = append(iw.acked, r.name)
		case victim == nil:
			t.Fatalf("write %s with every server up: %v", r.name, r.err)
		case !errors.Is(r.err, pdc.ErrUnavailable) ||
			!strings.Contains(r.err.Error(), fmt.Sprintf("rank %d (%s)", victim.Rank, victim.Addr)) && !strings.Contains(r.err.Error(), fmt.Sprintf("rank %d (%s)", victim.Rank, newAddr)):
			t.Fatalf("write %s as %s restarted at %s: %v; want ErrUnavailable naming it", r.name, victim.Label(), newAddr, r.err)
		default:
			failed++
		}
	}
	return failed
}

// takeDeadFailures takes results until n writes have failed with victim
// dead, each naming it as unavailable at its address; writes that
// finished before the kill took effect count as acknowledged.
func (iw *inflightWriters) takeDeadFailures(n int, victim cluster.Server) int {
	t := iw.t
	t.Helper()
	for f := 0; f < n; {
		var r inflightResult
		select {
		case r = <-iw.results:
		case <-iw.ctx.Done():
			t.Fatal("no failures while a server was dead")
		}
		if r.err == nil {
			// Finished before the kill took effect.
			iw.acked = append(iw.acked, r.name)
			continue
		}
		if !errors.Is(r.err, pdc.ErrUnavailable) || !strings.Contains(r.err.Error(), fmt.Sprintf("rank %d (%s)", victim.Rank, victim.Addr)) {
			t.Fatalf("write %s with %s dead: %v; want ErrUnavailable naming it", r.name, victim.Label(), r.err)
		}
		f++
	}
	return n
}

// A cluster of metadata-only and data-only servers (rank 0 metadata only):
// each is killed and restarted alone with its roles; while a metadata
// server is dead the writes whose metadata it holds fail naming it, while
// a data server is dead every write does (each has a part on it); a
// restart with other roles is refused, naming the roles to use.
func TestRestartRanksOfEachRole(t *testing.T) {
	roles := []string{"metadata", "data", "metadata", "data"}
	tmpdir := filepath.Join(t.TempDir(), "tmp")
	datadir := filepath.Join(t.TempDir(), "data")
	ctx := e2e.Ctx(t, 3*time.Minute)
	if _, err := cluster.StartLocal(ctx, cluster.LocalConfig{
		Binary: e2e.Bin(), N: len(roles), TmpDir: tmpdir, DataDir: datadir,
		RankArgs: func(rank int) []string { return []string{"--roles", roles[rank]} },
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2e.Cleanup(t, tmpdir) })
	s := startSurvivor(t, tmpdir)
	for i := range 4 {
		s.mustWrite(fmt.Sprintf("before-%d", i))
	}
	for cycle, rank := range []int{0, 1, 2, 3} {
		victim := killRank(t, tmpdir, rank)
		// Another role is refused: placement depends on who holds what.
		other := map[string]string{"metadata": "data", "data": "metadata"}[roles[rank]]
		r := e2e.Run(t, nil, "server", "--rank", fmt.Sprint(rank), "--size", fmt.Sprint(len(roles)), "--tmpdir", tmpdir, "--datadir", datadir, "--roles", other)
		if r.Err == nil || !strings.Contains(r.Stderr, "restart it with --roles "+roles[rank]) {
			t.Fatalf("restart of %s with roles %s: %v, %s; want a refusal naming its roles", victim.Label(), other, r.Err, r.Stderr)
		}
		failed := 0
		for i := range 16 {
			name := fmt.Sprintf("dead-c%d-r%d-%d", cycle, rank, i)
			f := s.do("write", name)
			if f[0] == "ok" {
				if roles[rank] == "data" {
					t.Fatalf("write %s acknowledged with data server %s dead", name, victim.Label())
				}
				s.acked = append(s.acked, name)
				continue
			}
			if len(f) < 4 || f[2] != "unavailable=true" || !strings.Contains(f[3], fmt.Sprintf("rank %d (%s)", rank, victim.Addr)) {
				t.Fatalf("write %s with %s dead: %q; want ErrUnavailable naming it", name, victim.Label(), strings.Join(f, " "))
			}
			failed++
		}
		if failed == 0 {
			t.Fatalf("16 writes, none of them with metadata on %s, all acknowledged while it was dead", victim.Label())
		}
		clitest.RestartServer(t, ctx, tmpdir, datadir, rank, len(roles), "--roles", roles[rank])
		for i := range 4 {
			s.mustWrite(fmt.Sprintf("after-c%d-%d", cycle, i))
		}
		s.readAll()
	}
	s.queryAll(e2e.Connect(t, tmpdir))
}

// Cycles of kill -9 of random servers (one, two, or all of them, rank 0
// often among them) and pdc up --restart-dead, with one client running all
// along: after each restart the client goes on by itself, and every write
// it had acknowledged reads back, and is found by its tag.
func TestRestartDeadCycles(t *testing.T) {
	const size = 3
	// Race-built servers start slowly: CI's race run takes a few cycles,
	// a normal run more.
	cycles := 12
	if e2e.Race {
		cycles = 4
	}
	tmpdir := e2e.Up(t, size)
	s := startSurvivor(t, tmpdir)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 26))
	t.Logf("seed %d", seed)
	kills, failed := 0, 0
	for cycle := range cycles {
		var victims []int
		for len(victims) == 0 {
			for r := range size {
				if rng.IntN(2) == 0 {
					victims = append(victims, r)
				}
			}
		}
		var dead []cluster.Server
		for _, r := range victims {
			dead = append(dead, killRank(t, tmpdir, r))
		}
		kills += len(victims)
		name := fmt.Sprintf("dead-c%d", cycle)
		f := s.do("write", name)
		named := false
		for _, v := range dead {
			named = named || len(f) == 4 && strings.Contains(f[3], fmt.Sprintf("rank %d (%s)", v.Rank, v.Addr))
		}
		if f[0] != "fail" || f[2] != "unavailable=true" || !named {
			t.Fatalf("write %s with ranks %v dead: %q; want ErrUnavailable naming one of them", name, victims, strings.Join(f, " "))
		}
		failed++
		out := e2e.MustRun(t, "up", "--restart-dead", "--tmpdir", tmpdir)
		if !strings.Contains(out, fmt.Sprintf("restarted %d of 3 servers", len(victims))) {
			t.Fatalf("cycle %d: up --restart-dead with ranks %v dead said %q", cycle, victims, out)
		}
		for i := range 3 {
			s.mustWrite(fmt.Sprintf("after-c%d-%d", cycle, i))
		}
		s.readAll()
	}
	s.queryAll(e2e.Connect(t, tmpdir))
	t.Logf("%d cycles, %d servers killed, %d writes acknowledged and read back after each cycle, %d refused while servers were dead", cycles, kills, len(s.acked), failed)
}
