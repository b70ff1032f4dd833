package hostile_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// The server's limits in this test: small, so that an attack that gets
// past them shows in its resident size.
const (
	maxPayload    = 32 << 20
	payloadBudget = 64 << 20
	dataBudget    = 64 << 20 // also what bufpool keeps of free buffers
	maxHandshakes = 512
	stallTimeout  = time.Second

	halfOpen = 3000 // connections that never complete a handshake
)

// server is one `pdc server` process of a cluster of one.
type server struct {
	pid     int
	addr    string
	tmpdir  string
	secret  []byte
	logPath string
}

// startServer starts a pdc server with flags added, waits until it
// serves, and kills it when the test ends.
func startServer(t *testing.T, flags ...string) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{tmpdir: filepath.Join(dir, "tmp"), logPath: filepath.Join(dir, "server.log")}
	if err := os.MkdirAll(s.tmpdir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret, err := cluster.NewSecret(s.tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	s.secret = secret
	logf, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	ready, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	args := append([]string{"server", "--tmpdir", s.tmpdir, "--datadir", filepath.Join(dir, "data")}, flags...)
	cmd := exec.Command(e2e.Bin(), args...)
	cmd.Env = append(os.Environ(), "PDC_READY_FD=3")
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyW.Close()
	s.pid = cmd.Process.Pid
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(ready).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "ready" {
			t.Fatalf("server did not start (%q):\n%s", l, s.log(t))
		}
		s.addr = f[2]
	case <-time.After(2 * time.Minute):
		t.Fatalf("server not ready within 2 minutes:\n%s", s.log(t))
	}
	return s
}

func (s *server) log(t *testing.T) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rss returns the server's resident set size (VmRSS) in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// attack is the hostile clients' common state.
type attack struct {
	srv  *server
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	counts map[string]int // attack kind -> connections (or frames) sent
	errs   map[string]int // what the attackers' own dials failed with
	conns  map[net.Conn]struct{}
	ended  bool
}

func (a *attack) failed(err error) {
	a.mu.Lock()
	a.errs[err.Error()]++
	a.mu.Unlock()
}

func (a *attack) count(kind string, n int) {
	a.mu.Lock()
	a.counts[kind] += n
	a.mu.Unlock()
}

func (a *attack) stopped() bool {
	select {
	case <-a.stop:
		return true
	default:
		return false
	}
}

// loop runs one attacker until the attack stops.
func (a *attack) loop(f func()) {
	a.wg.Go(func() {
		for !a.stopped() {
			f()
		}
	})
}

// authed connects with the cluster secret: the client is hostile, not a
// stranger (a cluster without a secret lets anyone this far).
func (a *attack) authed() net.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := rpc.DialRaw(ctx, a.srv.addr, rpc.DialOptions{Secret: a.srv.secret, ClientName: "hostile"})
	if err != nil {
		a.failed(err)
		return nil
	}
	return nc
}

// drain reads nc until it closes, or the attack stops (end closes it).
func (a *attack) drain(nc net.Conn) {
	a.mu.Lock()
	if a.ended {
		a.mu.Unlock()
		nc.Close()
		return
	}
	a.conns[nc] = struct{}{}
	a.mu.Unlock()
	_, _ = io.Copy(io.Discard, nc)
	a.mu.Lock()
	delete(a.conns, nc)
	a.mu.Unlock()
	nc.Close()
}

// end stops the attack: every attacker returns, every connection closes.
func (a *attack) end() {
	close(a.stop)
	a.mu.Lock()
	a.ended = true
	for nc := range a.conns {
		nc.Close()
	}
	a.mu.Unlock()
	a.wg.Wait()
}

func frame(m wire.Method, hdrLen uint32, payload uint64) []byte {
	f := wire.Frame{Method: m, ID: rand.Uint64(), HeaderLen: hdrLen, PayloadLen: payload}
	return f.Append(nil)
}

// pause waits for d, or the attack's end.
func (a *attack) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-a.stop:
	}
}

// oversized claims lengths beyond the limits: the server must close the
// connection without allocating.
func (a *attack) oversized() {
	nc := a.authed()
	if nc == nil {
		a.pause(10 * time.Millisecond)
		return
	}
	claims := [][]byte{
		frame(wire.MethodPing, 0, 1<<40),
		frame(wire.MethodDataStart, 0, 1<<62),
		frame(wire.MethodObjCreate, 1<<31, 0),
		frame(wire.MethodPing, 0, maxPayload+1),
	}
	_, _ = nc.Write(claims[rand.IntN(len(claims))])
	a.count("oversized length claims", 1)
	a.drain(nc)
}

// flood claims the largest payload accepted and sends most of it at full
// speed, then trickles: memory the server takes for it must come from its
// budget.
func (a *attack) flood() {
	nc := a.authed()
	if nc == nil {
		a.pause(10 * time.Millisecond)
		return
	}
	a.wg.Go(func() { a.drain(nc) })
	m := wire.MethodPing
	hdr := []byte(nil)
	if rand.IntN(2) == 0 {
		// A region start whose header is garbage: tried on the reading
		// goroutine, declined, its payload read into memory.
		m, hdr = wire.MethodDataStart, []byte{0xff, 0xff, 0xff}
	}
	a.count("claims of the largest payload, most of it sent", 1)
	if _, err := nc.Write(append(frame(m, uint32(len(hdr)), maxPayload), hdr...)); err != nil {
		return
	}
	if _, err := nc.Write(zeros[:maxPayload-1<<20]); err != nil {
		return
	}
	for !a.stopped() {
		if _, err := nc.Write([]byte{1}); err != nil {
			return
		}
		a.pause(100 * time.Millisecond)
	}
}

// zeros is what the flood sends: one buffer, only read, for every flood
// (allocating one per connection made the test process, not the server,
// the bottleneck under the race detector).
var zeros = make([]byte, maxPayload)

// trickle sends a frame a byte at a time: its prefix, its header or its
// payload.
func (a *attack) trickle() {
	nc := a.authed()
	if nc == nil {
		a.pause(10 * time.Millisecond)
		return
	}
	a.wg.Go(func() { a.drain(nc) })
	var b []byte
	switch rand.IntN(3) {
	case 0:
		b = frame(wire.MethodPing, 0, 1<<20)[:30]
	case 1:
		b = frame(wire.MethodObjCreate, 64<<10, 0)
	default:
		b = append(frame(wire.MethodPing, 0, 1<<20), make([]byte, 64<<10)...)
	}
	a.count("trickled frames", 1)
	if _, err := nc.Write(b); err != nil {
		return
	}
	for !a.stopped() {
		if _, err := nc.Write([]byte{2}); err != nil {
			return
		}
		a.pause(50 * time.Millisecond)
	}
}

// halfOpen opens n connections that never say a word, from 32 dialers at
// once, and holds them until the server or the attack ends them.
func (a *attack) halfOpen(n int) {
	const dialers = 32
	for range dialers {
		a.wg.Go(func() {
			for i := 0; i < n/dialers && !a.stopped(); i++ {
				nc, err := net.Dial("tcp", a.srv.addr)
				if err != nil {
					a.failed(err)
					a.pause(10 * time.Millisecond)
					continue
				}
				a.count("half-open connections", 1)
				a.wg.Go(func() { a.drain(nc) })
			}
		})
	}
}

// unauthenticated sends garbage instead of a handshake.
func (a *attack) unauthenticated() {
	nc, err := net.Dial("tcp", a.srv.addr)
	if err != nil {
		a.pause(10 * time.Millisecond)
		return
	}
	var b []byte
	switch rand.IntN(4) {
	case 0:
		b = make([]byte, 1+rand.IntN(4096))
		for i := range b {
			b[i] = byte(rand.Uint32())
		}
	case 1:
		b = []byte("GET / HTTP/1.1\r\nHost: pdc\r\n\r\n")
	case 2:
		b = frame(wire.MethodAuth, 0, 1<<30) // a payload before proving anything
	default:
		b = frame(wire.MethodPing, 0, 1<<20) // no auth at all
	}
	a.count("unauthenticated garbage", 1)
	_, _ = nc.Write(b)
	a.drain(nc)
}

// safeMethods are the methods a garbage header is sent to: all of them
// but those that stop or reconfigure the server or delete data when a
// header happens to parse (an authenticated client may do those anyway).
var safeMethods = []wire.Method{
	wire.MethodPing, wire.MethodStatus, wire.MethodContCreate, wire.MethodContGet, wire.MethodContList,
	wire.MethodContLifetime, wire.MethodObjCreate, wire.MethodObjOpen, wire.MethodObjList, wire.MethodObjSetDims,
	wire.MethodObjClose, wire.MethodObjOpenCount, wire.MethodTagPut, wire.MethodTagGet, wire.MethodTagDelete,
	wire.MethodTagList, wire.MethodTagQuery, wire.MethodIndexFence, wire.MethodRegionAssign, wire.MethodRegionQuery,
	wire.MethodRegionQueryAll, wire.MethodStageLookup, wire.MethodStageWait, wire.MethodFetch, wire.MethodDataStart,
	wire.MethodDataWait, wire.MethodDataStatus, wire.MethodDataFlush, wire.MethodDataQuery, wire.MethodDataLane,
	8, 9, 15, 33, 63, 99, 200, 4096, 1 << 31,
}

// garbageMethods sends bursts of requests with garbage headers, and
// payloads to methods that take none, and reads the answers.
func (a *attack) garbageMethods() {
	nc := a.authed()
	if nc == nil {
		a.pause(10 * time.Millisecond)
		return
	}
	a.wg.Go(func() { a.drain(nc) })
	var out []byte
	for range 64 {
		m := safeMethods[rand.IntN(len(safeMethods))]
		hdr := make([]byte, 8+rand.IntN(512))
		for i := range hdr {
			hdr[i] = byte(rand.Uint32())
		}
		var payload []byte
		if rand.IntN(4) == 0 {
			payload = make([]byte, rand.IntN(64<<10))
		}
		f := wire.Frame{Method: m, ID: rand.Uint64(), HeaderLen: uint32(len(hdr)), PayloadLen: uint64(len(payload)),
			Timeout: time.Second}
		out = f.Append(out)
		out = append(out, hdr...)
		out = append(out, payload...)
	}
	a.count("garbage method headers (frames)", 64)
	_, _ = nc.Write(out)
	a.pause(50 * time.Millisecond)
	nc.Close()
}

// legit is what a real client does during the attack; it records every
// acknowledged write to check it afterwards.
type legit struct {
	tmpdir string
	c      *client.Client
	ct     *client.Container

	writes []ackedWrite
	pings  int
}

type ackedWrite struct {
	obj  string
	data []byte
}

const cellsPerObject = 4096

func cells(seed int) []byte {
	b := make([]byte, 4*cellsPerObject)
	for i := range b {
		b[i] = byte(seed*31 + i*7)
	}
	return b
}

// round pings every server with `pdc ping`, creates an object, writes it
// and reads it back.
func (l *legit) round(t *testing.T, i int) error {
	r := e2e.Run(t, nil, "ping", "--tmpdir", l.tmpdir, "--timeout", "30s")
	if r.Err != nil {
		return fmt.Errorf("pdc ping: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
	l.pings++
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("during-attack-%d", i)
	o, err := l.ct.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{cellsPerObject}, Type: region.Int32, Partition: client.RegionDynamic})
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	data := cells(i)
	if err := o.Write(ctx, region.Shape(cellsPerObject), data); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	l.writes = append(l.writes, ackedWrite{name, data})
	got := make([]byte, len(data))
	if err := o.Read(ctx, region.Shape(cellsPerObject), got); err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("%s reads back other bytes than were written", name)
	}
	return nil
}

// verify reads back every acknowledged write with a fresh client.
func (l *legit) verify(t *testing.T) (checked, lost int) {
	c := e2e.Connect(t, l.tmpdir)
	ctx := e2e.Ctx(t, 2*time.Minute)
	for _, w := range l.writes {
		o, err := c.OpenObject(ctx, w.obj)
		got := make([]byte, len(w.data))
		if err == nil {
			err = o.Read(ctx, region.Shape(cellsPerObject), got)
		}
		checked++
		if err != nil || !bytes.Equal(got, w.data) {
			lost++
			t.Errorf("acknowledged write of %s: %v, or reads back other bytes", w.obj, err)
		}
	}
	return checked, lost
}

func TestHostileClients(t *testing.T) {
	srv := startServer(t,
		"--max-payload", strconv.Itoa(maxPayload),
		"--payload-budget", strconv.Itoa(payloadBudget),
		"--data-budget", strconv.Itoa(dataBudget),
		"--max-handshakes", strconv.Itoa(maxHandshakes),
		"--handshake-timeout", "5s",
		"--stall-timeout", stallTimeout.String(),
		"--min-recv-rate", "1MiB",
	)
	l := &legit{tmpdir: srv.tmpdir, c: e2e.Connect(t, srv.tmpdir)}
	ct, _, err := l.c.CreateContainer(e2e.Ctx(t, time.Minute), "hostile", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	l.ct = ct
	// Warm up, then take the resident size the budget is measured from.
	for i := range 3 {
		if err := l.round(t, -1-i); err != nil {
			t.Fatal(err)
		}
	}
	base, err := rss(srv.pid)
	if err != nil {
		t.Fatal(err)
	}

	// What the server may hold beyond its resting size: payloads (the
	// budget), free buffers bufpool keeps (the data budget), reads in
	// flight (the data budget); twice that, for the collector lets the
	// heap grow to twice what is live before it collects; and buffers and
	// goroutines of connections. The race detector's shadow memory adds
	// to all of it.
	allowed := int64(2*(payloadBudget+2*dataBudget)) + 32<<20
	if e2e.Race {
		allowed *= 3
	}
	peak, stopSampling := sampleRSS(srv.pid)
	a := startAttacks(t, srv)
	// A real client keeps working during the attack: a fresh one too.
	roundErr := legitRoundsFor(t, l, srv, 15*time.Second)
	a.end()
	stopSampling()
	if roundErr != nil {
		t.Errorf("a real client during the attack: %v", roundErr)
	}

	if !e2e.Alive(srv.pid) {
		t.Fatalf("the server died:\n%s", srv.log(t))
	}
	if err := l.round(t, 1<<20); err != nil {
		t.Fatalf("after the attack: %v", err)
	}
	checked, lost := l.verify(t)
	grown := peak.Load() - base
	if grown > allowed {
		t.Errorf("the server's resident size grew by %d MiB under attack (from %d MiB), beyond its budget of %d MiB",
			grown>>20, base>>20, allowed>>20)
	}
	reportAttack(t, srv, a, l, checked, lost, base, peak.Load(), allowed)
}

// sampleRSS samples the resident size of process pid until stop, which
// waits for the sampler to end; peak is the largest size seen.
func sampleRSS(pid int) (peak *atomic.Int64, stop func()) {
	peak = new(atomic.Int64)
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				if n, err := rss(pid); err == nil && n > peak.Load() {
					peak.Store(n)
				}
			}
		}
	}()
	return peak, func() {
		close(stopSampling)
		<-sampled
	}
}

// startAttacks starts every kind of hostile peer against srv; they run
// until the attack's end.
func startAttacks(t *testing.T, srv *server) *attack {
	a := &attack{srv: srv, stop: make(chan struct{}), counts: map[string]int{}, errs: map[string]int{},
		conns: map[net.Conn]struct{}{}}
	for range 4 {
		a.loop(a.oversized)
	}
	for range 16 {
		a.loop(a.flood)
	}
	for range 16 {
		a.loop(a.trickle)
	}
	raiseFileLimit(t, halfOpen)
	a.halfOpen(halfOpen)
	for range 4 {
		a.loop(a.unauthenticated)
	}
	for range 4 {
		a.loop(a.garbageMethods)
	}
	return a
}

// legitRoundsFor runs a real client's rounds for d, with a fresh client
// from the third round on, and returns the first round's error.
func legitRoundsFor(t *testing.T, l *legit, srv *server, d time.Duration) error {
	window := time.Now().Add(d)
	var roundErr error
	var err error
	for i := 0; time.Now().Before(window); i++ {
		if i == 2 {
			l.c = e2e.Connect(t, srv.tmpdir)
			if l.ct, _, err = l.c.CreateContainer(e2e.Ctx(t, time.Minute), "hostile", client.Persistent); err != nil {
				roundErr = err
				break
			}
		}
		if roundErr = l.round(t, i); roundErr != nil {
			break
		}
	}
	return roundErr
}

// reportAttack logs the fault table of the attack and checks the server's
// log stayed bounded and the attack was as strong as meant.
func reportAttack(t *testing.T, srv *server, a *attack, l *legit, checked, lost int, base, peak, allowed int64) {
	t.Helper()
	grown := peak - base
	logs := srv.log(t)
	lines := strings.Count(logs, "\n")
	t.Logf("attack lasted 15s; server resting at %d MiB, peak %d MiB (+%d MiB, budget +%d MiB); %d log lines",
		base>>20, peak>>20, grown>>20, allowed>>20, lines)
	for kind, n := range a.counts {
		t.Logf("fault: %-48s %6d", kind, n)
	}
	t.Logf("acknowledged writes checked %d, lost %d; pings %d; server deaths 0", checked, lost, l.pings)
	for e, n := range a.errs {
		t.Logf("attackers' own dials failed %d times: %s", n, e)
	}
	// Bounds for a slow machine: what a quiet one does is several times more.
	if a.counts["half-open connections"] < 500 || a.counts["claims of the largest payload, most of it sent"] < 16 {
		t.Errorf("the attack was weaker than meant: %v", a.counts)
	}
	// Every refused or dropped peer is not a line of its own: the log is
	// bounded however many there were.
	if lines > 400 {
		t.Errorf("%d log lines for the attack: refusals and drops are not rate-limited", lines)
	}
}

// raiseFileLimit lets this process hold conns connections and then some.
func raiseFileLimit(t *testing.T, conns uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	want := conns + 1024
	if lim.Cur >= want {
		return
	}
	if lim.Max < want {
		t.Skipf("the descriptor limit (%d) is below the %d this attack needs", lim.Max, want)
	}
	lim.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
}
