package dtltest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/dtl/dtlpeer"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

const (
	envPeer      = "PDC_DTLTEST_PEER"
	envSecret    = "PDC_DTLTEST_SECRET"
	envEndpoints = "PDC_DTLTEST_MAX_ENDPOINTS"
	envShmDir    = "PDC_DTLTEST_SHM_DIR"
)

// PeerMain runs a peer process when the test binary was started as one
// by StartPeer, and then reports true: TestMain must exit. Otherwise it
// returns false at once.
func PeerMain() (bool, error) {
	if os.Getenv(envPeer) == "" {
		return false, nil
	}
	eps, _ := strconv.Atoi(os.Getenv(envEndpoints))
	return true, dtlpeer.Main(dtlpeer.Config{Secret: []byte(os.Getenv(envSecret)), ShmDir: os.Getenv(envShmDir), MaxEndpoints: eps})
}

// Peer is a sender process.
type Peer struct {
	Addr   string
	Secret []byte
	cmd    *exec.Cmd
	stdin  io.Closer
	waited chan struct{}
}

// PeerOptions shape a peer process.
type PeerOptions struct {
	MaxEndpoints int
}

// StartPeer starts a sender process from the test binary; it is stopped
// when the test ends.
func StartPeer(t testing.TB, o PeerOptions) *Peer {
	t.Helper()
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	hexSecret := fmt.Sprintf("%x", secret)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envPeer+"=1", envSecret+"="+hexSecret,
		envEndpoints+"="+strconv.Itoa(o.MaxEndpoints), envShmDir+"="+t.TempDir())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Peer{Secret: []byte(hexSecret), cmd: cmd, stdin: stdin, waited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.waited)
	}()
	t.Cleanup(p.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("peer process did not start: %v", err)
	}
	p.Addr = strings.TrimSpace(line)
	return p
}

// Kill ends the peer with SIGKILL and waits for it.
func (p *Peer) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.waited
}

func (p *Peer) stop() {
	p.stdin.Close()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-p.waited:
	case <-t.C:
		p.Kill()
	}
}

// Stats asks the peer for its counters.
func (p *Peer) Stats(t testing.TB) dtlpeer.Stats {
	t.Helper()
	r := newReceiver(t, p, dtl.ModeStream)
	var buf bytes.Buffer
	if _, err := r.Fetch(ctx(t), p.Addr, []byte("stats"), dtl.IntoWriter(&buf)); err != nil {
		t.Fatalf("stats: %v", err)
	}
	var s dtlpeer.Stats
	if err := json.Unmarshal(buf.Bytes(), &s); err != nil {
		t.Fatalf("stats %q: %v", buf.Bytes(), err)
	}
	return s
}

// waitHanging returns once the peer holds n fetches of "hang" (a wait on
// the peer's side, asked over a connection of its own).
func (p *Peer) waitHanging(t testing.TB, n int) {
	t.Helper()
	r := newReceiver(t, p, dtl.ModeStream)
	if _, err := r.Fetch(ctx(t), p.Addr, key("wait-hang", int64(n)), dtl.IntoWriter(io.Discard)); err != nil {
		t.Fatalf("waiting for the peer to hold %d fetches: %v", n, err)
	}
}

func newReceiver(t testing.TB, p *Peer, m dtl.Mode) *dtl.Receiver {
	t.Helper()
	r, err := dtl.NewReceiver(dtl.ReceiverConfig{Mode: m, Secret: p.Secret, ClientName: "dtltest"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// Sizes of the suite; the last is skipped under -short.
var Sizes = []int64{0, 1, 4 << 10, 1 << 20, bigPayload, 5 << 30}

// Fixture is what a suite runs against: a sender in a process of its
// own, and a receiver in this one.
type Fixture struct {
	Mode     dtl.Mode
	Peer     *Peer
	Receiver *dtl.Receiver
}

// A Suite is one named part of the conformance suite; each of its cases
// is a subtest.
type Suite struct {
	Name  string
	About string
	Cases []Case
}

// A Case is one subtest of a suite.
type Case struct {
	Name string
	Run  func(t *testing.T, fx *Fixture)
}

// Suites is the conformance suite, part by part.
var Suites = []Suite{
	{Name: "data", About: "payloads of every size and shape arrive whole and in order, into every kind of sink", Cases: []Case{
		{"sizes", sizes},
		{"buffer source", bufferSource},
		{"file and writer sinks", fileAndWriterSinks},
		{"section", section},
		{"view", view},
	}},
	{Name: "concurrency", About: "many fetches at once, through one receiver and through many", Cases: []Case{
		{"concurrent", concurrent},
		{"churn", churn},
	}},
	{Name: "errors", About: "bad requests get the error that names them, and the sender keeps serving", Cases: []Case{
		{"refused requests", refusedRequests},
		{"bad headers", badHeaders},
	}},
	{Name: "faults", About: "deadlines, cancels and a sender killed mid-transfer end fetches with an error, never a hang", Cases: []Case{
		{"cancel", cancels},
		{"peer death", peerDeath},
	}},
}

// Run is the conformance suite for mode m: every suite's every case, in
// one fixture.
func Run(t *testing.T, m dtl.Mode) {
	p := StartPeer(t, PeerOptions{})
	f := &Fixture{Mode: m, Peer: p, Receiver: newReceiver(t, p, m)}
	for _, s := range Suites {
		t.Run(s.Name, func(t *testing.T) {
			for _, c := range s.Cases {
				t.Run(c.Name, func(t *testing.T) { c.Run(t, f) })
			}
		})
	}
}

func sizes(t *testing.T, fx *Fixture) {
	p := fx.Peer
	r := fx.Receiver
	for _, n := range Sizes {
		t.Run(strconv.FormatInt(n, 10), func(t *testing.T) {
			if n > 1<<30 && (testing.Short() || raceEnabled) {
				t.Skip("5 GiB: skipped under -short and -race (pdc bench dtl runs it)")
			}
			buf := make([]byte, n)
			got, err := r.Fetch(ctx(t), p.Addr, key("pattern", n), dtl.IntoBuffer(buf))
			if err != nil {
				t.Fatal(err)
			}
			if got != n {
				t.Fatalf("got %d bytes, want %d", got, n)
			}
			if err := dtlpeer.Check(buf, 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func bufferSource(t *testing.T, fx *Fixture) {
	p := fx.Peer
	r := fx.Receiver
	for _, n := range []int64{100, 3<<20 + 5} {
		buf := make([]byte, n+10) // room to spare: only n bytes are written
		got, err := r.Fetch(ctx(t), p.Addr, key("buf", n), dtl.IntoBuffer(buf))
		if err != nil || got != n {
			t.Fatalf("%d bytes: got %d, %v", n, got, err)
		}
		if err := dtlpeer.Check(buf[:n], 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[n:], make([]byte, 10)) {
			t.Fatal("bytes past the payload were written")
		}
	}
}

func fileAndWriterSinks(t *testing.T, fx *Fixture) {
	p := fx.Peer
	r := fx.Receiver
	f, err := os.Create(filepath.Join(t.TempDir(), "sink"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const n = 3<<20 + 17
	if _, err := r.Fetch(ctx(t), p.Addr, key("pattern", n), dtl.IntoFile(f, 4096)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if _, err := f.ReadAt(got, 4096); err != nil {
		t.Fatal(err)
	}
	if err := dtlpeer.Check(got, 0); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{5000, 2 << 20} {
		var w bytes.Buffer
		if _, err := r.Fetch(ctx(t), p.Addr, key("pattern", n), dtl.IntoWriter(&w)); err != nil {
			t.Fatal(err)
		}
		if int64(w.Len()) != n {
			t.Fatalf("writer got %d bytes, want %d", w.Len(), n)
		}
		if err := dtlpeer.Check(w.Bytes(), 0); err != nil {
			t.Fatal(err)
		}
	}
}

func section(t *testing.T, fx *Fixture) {
	p := fx.Peer
	r := fx.Receiver
	const off, n = 1<<20 + 3, 2<<20 + 1
	buf := make([]byte, n)
	got, err := r.Fetch(ctx(t), p.Addr, key("pattern", 4<<20), dtl.IntoBuffer(buf), dtl.WithSection(off, n))
	if err != nil || got != n {
		t.Fatalf("got %d, %v", got, err)
	}
	if err := dtlpeer.Check(buf, off); err != nil {
		t.Fatal(err)
	}
	_, err = r.Fetch(ctx(t), p.Addr, key("pattern", 4<<20), dtl.IntoBuffer(buf), dtl.WithSection(4<<20, 1))
	if !errors.Is(err, pdc.ErrOutOfRange) {
		t.Fatalf("section past the end: got %v, want pdc.ErrOutOfRange", err)
	}
}

func view(t *testing.T, fx *Fixture) {
	p := fx.Peer
	r := fx.Receiver
	for _, n := range []int64{10, 8 << 20} {
		v, err := r.FetchView(ctx(t), p.Addr, key("pattern", n))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(v.Bytes())) != n {
			t.Fatalf("view of %d bytes, want %d", len(v.Bytes()), n)
		}
		if err := dtlpeer.Check(v.Bytes(), 0); err != nil {
			t.Fatal(err)
		}
		v.Close()
		v.Close()
	}
}

func concurrent(t *testing.T, fx *Fixture) {
	p := fx.Peer
	r := fx.Receiver
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := []int64{0, 7, 70 << 10, 1 << 20, 9 << 20}[i%5]
			buf := make([]byte, n)
			if _, err := r.Fetch(ctx(t), p.Addr, key("pattern", n), dtl.IntoBuffer(buf)); err != nil {
				errs <- err
				return
			}
			if err := dtlpeer.Check(buf, 0); err != nil {
				errs <- fmt.Errorf("%d bytes: %w", n, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func refusedRequests(t *testing.T, fx *Fixture) {
	p := fx.Peer
	r := fx.Receiver
	_, err := r.Fetch(ctx(t), p.Addr, []byte("no-such-key"), dtl.IntoBuffer(make([]byte, 10)))
	if !errors.Is(err, dtl.ErrNotFound) || !errors.Is(err, pdc.ErrNotFound) || !strings.Contains(err.Error(), "no-such-key") {
		t.Fatalf("missing key: got %v, want dtl.ErrNotFound naming the key", err)
	}
	_, err = r.Fetch(ctx(t), p.Addr, key("pattern", 1<<20), dtl.IntoBuffer(make([]byte, 1000)))
	if !errors.Is(err, dtl.ErrBadBuffer) {
		t.Fatalf("small buffer: got %v, want dtl.ErrBadBuffer", err)
	}
	_, err = r.Fetch(ctx(t), p.Addr, key("pattern", 10), dtl.Sink{})
	if !errors.Is(err, dtl.ErrBadBuffer) {
		t.Fatalf("no sink: got %v, want dtl.ErrBadBuffer", err)
	}
	_, err = r.Fetch(ctx(t), p.Addr, key("pattern", 10), dtl.IntoBuffer(make([]byte, 10)), dtl.WithMode(dtl.Mode(42)))
	if !errors.Is(err, dtl.ErrBadMode) {
		t.Fatalf("mode 42: got %v, want dtl.ErrBadMode", err)
	}
	mustServe(t, r, p)
}

func cancels(t *testing.T, fx *Fixture) {
	p := fx.Peer
	r := fx.Receiver
	m := fx.Mode
	// A sender that never answers: the deadline ends the wait.
	c, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	_, err := r.Fetch(c, p.Addr, []byte("hang"), dtl.IntoBuffer(make([]byte, 10)))
	cancel()
	if !errors.Is(err, dtl.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hang: got %v, want a timeout", err)
	}
	// A caller that gives up mid-payload.
	c, cancelMid := context.WithCancel(ctx(t))
	w := &cancelWriter{cancel: cancelMid}
	_, err = r.Fetch(c, p.Addr, key("pattern", 4*bigPayload), dtl.IntoWriter(w))
	cancelMid()
	if m != dtl.ModeShm && !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled mid-payload: got %v, want context.Canceled", err)
	}
	mustServe(t, r, p)
}

func badHeaders(t *testing.T, fx *Fixture) {
	p := fx.Peer
	r := fx.Receiver
	conn, err := rpc.Dial(ctx(t), p.Addr, rpc.DialOptions{Secret: p.Secret})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = conn.Call(ctx(t), wire.MethodFetch, []byte{0xff, 0xff, 0xff}, nil, nil)
	if !errors.Is(err, pdc.ErrProtocol) || !strings.Contains(err.Error(), "fetch request") {
		t.Fatalf("corrupted request: got %v, want pdc.ErrProtocol naming the fetch request", err)
	}
	fr := wire.FetchRequest{Key: []byte("pattern:10"), Mode: 77}
	_, err = conn.Call(ctx(t), wire.MethodFetch, fr.Marshal(nil), nil, nil)
	if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "transport") {
		t.Fatalf("unknown mode on the wire: got %v, want pdc.ErrInvalid naming the transport", err)
	}
	// A header beyond the server's limit ends that connection only.
	_, err = conn.Call(ctx(t), wire.MethodFetch, make([]byte, 2<<20), nil, nil)
	if err == nil {
		t.Fatal("2 MiB header accepted")
	}
	// Garbage on the bulk port is refused without harm.
	bulkGarbage(t, p, r)
	mustServe(t, r, p)
}

func churn(t *testing.T, fx *Fixture) {
	m := fx.Mode
	// Many receivers (each its own push listener and connections)
	// through a sender whose endpoint cache holds two.
	cp := StartPeer(t, PeerOptions{MaxEndpoints: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		rr := newReceiver(t, cp, m)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 6 {
				n := int64(100<<10 + i*1000 + j)
				buf := make([]byte, n)
				if _, err := rr.Fetch(ctx(t), cp.Addr, key("pattern", n), dtl.IntoBuffer(buf)); err != nil {
					errs <- err
					return
				}
				if err := dtlpeer.Check(buf, 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := cp.Stats(t).Sender
	if st.Endpoints > 2 {
		t.Errorf("%d push endpoints open, bound 2", st.Endpoints)
	}
	if m == dtl.ModePush && st.Evictions == 0 {
		t.Errorf("8 receivers through a cache of 2 evicted nothing: %+v", st)
	}
	if m == dtl.ModePush && st.Pushes != 48 {
		t.Errorf("%d pushes, want 48", st.Pushes)
	}
}

func peerDeath(t *testing.T, fx *Fixture) {
	m := fx.Mode
	dp := StartPeer(t, PeerOptions{})
	dr := newReceiver(t, dp, m)
	mustServe(t, dr, dp)
	errc := make(chan error, 1)
	go func() {
		_, err := dr.Fetch(ctx(t), dp.Addr, []byte("hang"), dtl.IntoBuffer(make([]byte, 10)))
		errc <- err
	}()
	dp.waitHanging(t, 1)
	dp.Kill()
	err := <-errc
	if !errors.Is(err, dtl.ErrPeerFailed) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sender killed while we waited: got %v, want dtl.ErrPeerFailed before the deadline", err)
	}
	if m == dtl.ModeShm {
		return // once mapped, a payload no longer needs its sender
	}
	// Killed mid-payload.
	dp2 := StartPeer(t, PeerOptions{})
	dr2 := newReceiver(t, dp2, m)
	mustServe(t, dr2, dp2)
	started, killed := make(chan struct{}), make(chan struct{})
	go func() {
		// The writer holds the first bytes until the sender is dead,
		// so that most of the payload is still to come.
		w := &signalWriter{started: started, killed: killed}
		_, err := dr2.Fetch(ctx(t), dp2.Addr, key("pattern", bigPayload), dtl.IntoWriter(w))
		errc <- err
	}()
	<-started
	dp2.Kill()
	close(killed)
	err = <-errc
	if !errors.Is(err, dtl.ErrPeerFailed) {
		t.Fatalf("sender killed mid-payload: got %v, want dtl.ErrPeerFailed", err)
	}
}

// bulkGarbage sends a corrupted and a stale pull to the peer's bulk port:
// each gets an error answer naming the problem, and the peer stays up.
func bulkGarbage(t *testing.T, p *Peer, r *dtl.Receiver) {
	t.Helper()
	addr := p.Stats(t).BulkAddr
	for _, c := range []struct {
		name string
		hdr  []byte
		want string
	}{
		{"garbage", bytes.Repeat([]byte{0xee}, 48), "header starts"},
		{"stale handle", append(append([]byte("PDCB\x01\x00\x00\x00"), make([]byte, 32)...), 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0), "no such payload"},
		{"future version", append([]byte("PDCB\x09\x00\x00\x00"), make([]byte, 40)...), "version 9"},
	} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(time.Minute))
		if _, err := nc.Write(c.hdr); err != nil {
			t.Fatal(err)
		}
		ans := make([]byte, 32)
		if _, err := io.ReadFull(nc, ans); err != nil {
			t.Fatalf("%s on the bulk port: %v", c.name, err)
		}
		msg := make([]byte, min(binary.LittleEndian.Uint32(ans[12:]), 4096))
		if _, err := io.ReadFull(nc, msg); err != nil {
			t.Fatalf("%s on the bulk port: %v", c.name, err)
		}
		ans = append(ans, msg...)
		nc.Close()
		if !bytes.HasPrefix(ans, []byte("PDCb")) || !bytes.Contains(ans, []byte(c.want)) {
			t.Fatalf("%s on the bulk port: answer %q, want an error naming %q", c.name, ans, c.want)
		}
	}
}

func key(kind string, n int64) []byte { return []byte(kind + ":" + strconv.FormatInt(n, 10)) }

// mustServe checks that the peer still answers.
func mustServe(t *testing.T, r *dtl.Receiver, p *Peer) {
	t.Helper()
	buf := make([]byte, 70<<10)
	if _, err := r.Fetch(ctx(t), p.Addr, key("pattern", int64(len(buf))), dtl.IntoBuffer(buf)); err != nil {
		t.Fatalf("peer no longer serves: %v", err)
	}
	if err := dtlpeer.Check(buf, 0); err != nil {
		t.Fatal(err)
	}
}

type cancelWriter struct {
	cancel func()
	n      int
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	if w.n > 1<<20 {
		w.cancel()
	}
	return len(p), nil
}

type signalWriter struct {
	started, killed chan struct{}
	once            sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() {
		close(w.started)
		<-w.killed
	})
	return len(p), nil
}
