package metaserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// fakeCuts records the dims cuts each data server applied; the ranks in
// down fail.
type fakeCuts struct {
	mu   sync.Mutex
	down map[int]bool
	got  map[int][]wire.DimsCut
}

func newFakeCuts(down ...int) *fakeCuts {
	f := &fakeCuts{down: map[int]bool{}, got: map[int][]wire.DimsCut{}}
	for _, r := range down {
		f.down[r] = true
	}
	return f
}

func (f *fakeCuts) DataRanks() []int { return []int{0, 1} }

func (f *fakeCuts) CallData(ctx context.Context, rank int, m wire.Method, hdr []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[rank] {
		return fmt.Errorf("rank %d: %w", rank, pdc.ErrUnavailable)
	}
	if m != wire.MethodDataCut {
		return nil // tombstones
	}
	var c wire.DimsCut
	if err := c.Unmarshal(hdr); err != nil {
		return err
	}
	f.got[rank] = append(f.got[rank], c)
	return nil
}

func (f *fakeCuts) setDown(rank int, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[rank] = down
}

func (f *fakeCuts) versions(rank int) []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []uint64
	for _, c := range f.got[rank] {
		out = append(out, c.DimsVersion)
	}
	return out
}

func setDimsReq(id uint64, dims ...uint64) *rpc.Request {
	return &rpc.Request{Header: (&wire.SetDims{ID: id, Dims: dims}).Marshal(nil), Client: "c"}
}

// A shrink is pushed to every data server before the set dims answers;
// grows are not. One a data server did not apply stays pending, across a
// restart of the metadata server: the object's next set dims is refused,
// naming that server, until the cut reaches it, and start pushes it in
// the background once it is back.
func TestPendingCutHoldsBackNewerDims(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openAt(t, dir)
	data := newFakeCuts(1)
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	a := createOne(t, s, "a", []uint64{4})
	pending := func(s *Service) uint64 {
		t.Helper()
		c, err := s.pendingCut(a)
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			return 0
		}
		return c.DimsVersion
	}
	// A grow cuts nothing: nothing is pushed.
	if _, err := s.objSetDims(ctx, setDimsReq(a, 27)); err != nil {
		t.Fatal(err)
	}
	if v := data.versions(0); len(v) != 0 || pending(s) != 0 {
		t.Fatalf("a grow pushed cuts %v, left pending version %d", v, pending(s))
	}
	// The shrink succeeds with rank 1 down; rank 0 has it, and it stays
	// pending for rank 1.
	if _, err := s.objSetDims(ctx, setDimsReq(a, 8)); err != nil {
		t.Fatalf("shrink with a data server down: %v", err)
	}
	if v := slices.Compact(data.versions(0)); !slices.Equal(v, []uint64{2}) {
		t.Fatalf("rank 0 applied cuts of versions %v, want [2]", v)
	}
	if v := pending(s); v != 2 {
		t.Fatalf("pending cut of version %d, want 2", v)
	}
	_, err := s.objSetDims(ctx, setDimsReq(a, 26))
	if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("regrow before the cut reached rank 1: %v, want ErrUnavailable naming rank 1", err)
	}
	m, _, err := s.loadObjByID(a)
	if err != nil {
		t.Fatal(err)
	}
	if m.DimsVersion != 2 || m.Props.Dims[0] != 8 {
		t.Fatalf("after the refused regrow: dims %v version %d, want [8] version 2", m.Props.Dims, m.DimsVersion)
	}
	// Across a restart, with rank 1 still down, the cut is still pending.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir)
	defer s.Close()
	if v := pending(s); v != 2 {
		t.Fatalf("pending cut after a restart: version %d, want 2", v)
	}
	data.setDown(1, false)
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); pending(s) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cut left pending was not pushed at start")
		}
	}
	if v := slices.Compact(data.versions(1)); !slices.Equal(v, []uint64{2}) {
		t.Fatalf("rank 1 applied cuts of versions %v, want [2]", v)
	}
	if _, err := s.objSetDims(ctx, setDimsReq(a, 26)); err != nil {
		t.Fatalf("regrow once every data server has the cut: %v", err)
	}
	if pending(s) != 0 {
		t.Fatal("a grow left a pending cut")
	}
}

// A set dims delivers, before committing, a cut left pending by the one
// before it, so that a data server that came back gets the cut before
// the newer version.
func TestSetDimsDeliversPendingCutFirst(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	data := newFakeCuts(1)
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	a := createOne(t, s, "a", []uint64{4})
	if _, err := s.objSetDims(ctx, setDimsReq(a, 2)); err != nil {
		t.Fatal(err)
	}
	data.setDown(1, false)
	// The next shrink delivers version 1's cut to rank 1 before its own
	// (version 2).
	if _, err := s.objSetDims(ctx, setDimsReq(a, 1)); err != nil {
		t.Fatal(err)
	}
	// The retrier of pending cuts may have pushed version 1 too,
	// even after version 2 (it read the cut before this set dims dropped
	// it): pushing a cut twice is harmless, and one older than the
	// data server's is ignored there. What counts is that 1 came first.
	v := data.versions(1)
	if i1, i2 := slices.Index(v, 1), slices.Index(v, 2); i1 < 0 || i2 < 0 || i1 > i2 {
		t.Fatalf("rank 1 applied cuts of versions %v, want 1 before 2", v)
	}
	if c, err := s.pendingCut(a); err != nil || c != nil {
		t.Fatalf("pending cut %v, %v; want none", c, err)
	}
}

// A cut a data server missed (it was down at the shrink) reaches it once
// it is back, with no further set dims of the object and no restart of
// the metadata server: until then its files hold the rows the shrink
// dropped, which a transfer through a handle that never learned the
// shrink reads back.
func TestPendingCutIsRetriedWhileRunning(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	data := newFakeCuts(1)
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	// Whatever start pushes, it has found in the store by now.
	time.Sleep(200 * time.Millisecond)
	a := createOne(t, s, "a", []uint64{27})
	if _, err := s.objSetDims(ctx, setDimsReq(a, 8)); err != nil {
		t.Fatalf("shrink with a data server down: %v", err)
	}
	if v := data.versions(1); len(v) != 0 {
		t.Fatalf("rank 1, down, applied cuts of versions %v", v)
	}
	data.setDown(1, false)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := s.pendingCut(a)
		if err != nil {
			t.Fatal(err)
		}
		if c == nil && s.PendingCuts() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank 1 back for 10 s, the cut still pending (%v; %d marked); rank 1 applied %v", c, s.PendingCuts(), data.versions(1))
		}
	}
	if v := slices.Compact(data.versions(1)); !slices.Equal(v, []uint64{1}) {
		t.Fatalf("rank 1 applied cuts of versions %v, want [1]", v)
	}
}

// stoppingCuts is a fakeCuts whose rank 1 can be stopped: a call to it
// then waits for the caller's deadline, as one to a data server that
// takes connections and answers nothing (SIGSTOP) does, or until it is
// let go again, when the call fails as one to a server that was stopped
// (SIGCONT) and has dropped the connection.
type stoppingCuts struct {
	*fakeCuts
	smu     sync.Mutex
	stopped chan struct{} // closed when let go; nil while running
	calls   int           // calls to rank 1 while stopped
}

func (f *stoppingCuts) CallData(ctx context.Context, rank int, m wire.Method, hdr []byte) error {
	f.smu.Lock()
	stopped := f.stopped
	if rank != 1 || m != wire.MethodDataCut {
		stopped = nil
	}
	if stopped != nil {
		f.calls++
	}
	f.smu.Unlock()
	if stopped != nil {
		select {
		case <-ctx.Done():
			return fmt.Errorf("rank 1: %w", ctx.Err())
		case <-stopped:
			return fmt.Errorf("rank 1: connection dropped while stopped: %w", pdc.ErrUnavailable)
		}
	}
	return f.fakeCuts.CallData(ctx, rank, m, hdr)
}

func (f *stoppingCuts) setStopped(stopped bool) (calls int) {
	f.smu.Lock()
	defer f.smu.Unlock()
	switch {
	case stopped && f.stopped == nil:
		f.stopped = make(chan struct{})
	case !stopped && f.stopped != nil:
		close(f.stopped)
		f.stopped = nil
	}
	return f.calls
}

// A data server that answers nothing holds a retrier round of pending
// cuts for one bound, not once per few cuts: a round calls it only for
// the cuts under way when the first calls to it ran out of time (at most
// cutPushers), sends it none of the others, and delivers all of them to
// the other data servers. Each wave of cutPushers cuts waited for it in
// turn, the other data servers' cuts behind them, and it was called for
// every cut.
func TestStoppedDataServerHoldsACutRoundOnce(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	// Each of its shrinks misses a data server, and would wait out the
	// dims leases (6 s); this tests the retrier's rounds, not leases.
	s.cuts.leaseWait = 0
	// A push waits this long for the stopped data server: a round
	// then holds for it once (not cutWait, whose length is not what
	// this tests).
	s.cuts.pushWait = 3 * time.Second
	ctx := context.Background()
	data := &stoppingCuts{fakeCuts: newFakeCuts(0, 1)}
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	// Shrinks with both data servers down: every cut stays pending.
	const n = 3*cutPushers + 1
	var ids []uint64
	for i := range n {
		id := createOne(t, s, fmt.Sprint("o", i), []uint64{27})
		if _, err := s.objSetDims(ctx, setDimsReq(id, 8)); err != nil {
			t.Fatalf("shrink with the data servers down: %v", err)
		}
		ids = append(ids, id)
	}
	data.setStopped(true)
	data.setDown(1, false)
	data.setDown(0, false)
	s.cuts.retry.poke()
	for deadline := time.Now().Add(2 * time.Minute); len(data.versions(0)) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("rank 0 applied %d of %d cuts while rank 1 was stopped", len(data.versions(0)), n)
		}
	}
	calls := data.setStopped(false)
	t.Logf("rank 1, stopped, was called %d times for %d cuts", calls, n)
	s.cuts.retry.poke() // the next round now, not after the back-off
	// A round that began before rank 0 was back calls it too: at most
	// two rounds, each calling it for the cuts of its first wave.
	if calls >= n {
		t.Errorf("rank 1, stopped, was called %d times while %d cuts were delivered to rank 0; want it called for the first cuts of a round only", calls, n)
	}
	for deadline := time.Now().Add(2 * time.Minute); s.PendingCuts() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("rank 1 running again, %d cuts still pending; it applied %d", s.PendingCuts(), len(data.versions(1)))
		}
	}
	for _, id := range ids {
		if c, err := s.pendingCut(id); err != nil || c != nil {
			t.Fatalf("object %d: pending cut %v (%v) once every data server applied it", id, c, err)
		}
	}
}
