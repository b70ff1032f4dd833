package metaserver

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

func stageReq(m wire.Message) *rpc.Request { return &rpc.Request{Header: m.Marshal(nil), Client: "c"} }

func produceOn(t *testing.T, s *Service, paths ...string) []wire.StageRecord {
	t.Helper()
	in := wire.StageBatch{}
	for _, p := range paths {
		in.Records = append(in.Records, wire.StageRecord{Path: p, Host: "node-a", Size: 3, CRC: 7})
	}
	resp, err := s.stageProduce(context.Background(), stageReq(&in))
	if err != nil {
		t.Fatal(err)
	}
	var out wire.StageBatch
	if err := out.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	return out.Records
}

func lookupOn(s *Service, path string) (*wire.StageRecord, error) {
	resp, err := s.stageLookup(context.Background(), stageReq(&wire.StageKey{Path: path}))
	if err != nil {
		return nil, err
	}
	var r wire.StageRecord
	return &r, r.Unmarshal(resp.Header)
}

func TestStageVersionsAndLookup(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	if _, err := lookupOn(s, "a"); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("lookup before produce: %v", err)
	}
	got := produceOn(t, s, "a", "b", "a")
	if got[0].Version != 1 || got[1].Version != 1 || got[2].Version != 2 {
		t.Fatalf("versions in one batch: %d %d %d, want 1 1 2", got[0].Version, got[1].Version, got[2].Version)
	}
	if got := produceOn(t, s, "a"); got[0].Version != 3 {
		t.Fatalf("third produce: version %d", got[0].Version)
	}
	r, err := lookupOn(s, "a")
	if err != nil || r.Version != 3 || r.Host != "node-a" || r.CRC != 7 || r.Produced == 0 {
		t.Fatalf("lookup: %+v %v", r, err)
	}
	for _, bad := range []string{"", "../x", "/abs", "a//b", ".pdc-stage/x"} {
		if _, err := lookupOn(s, bad); err == nil {
			t.Errorf("lookup %q: no error", bad)
		}
		in := wire.StageBatch{Records: []wire.StageRecord{{Path: bad, Host: "h"}}}
		if _, err := s.stageProduce(context.Background(), stageReq(&in)); err == nil {
			t.Errorf("produce %q: no error", bad)
		}
	}
	if _, err := s.stageProduce(context.Background(), stageReq(&wire.StageBatch{})); !errors.Is(err, pdc.ErrInvalid) {
		t.Errorf("empty batch: %v", err)
	}
}

// Waiters block on the server until a produce of their path (or a newer
// version than they hold) commits, and end with the caller's deadline or
// the server's shutdown.
func TestStageWait(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	wait := func(ctx context.Context, path string, after uint64) (*wire.StageRecord, error) {
		resp, err := s.stageWait(ctx, stageReq(&wire.StageKey{Path: path, After: after}))
		if err != nil {
			return nil, err
		}
		var r wire.StageRecord
		return &r, r.Unmarshal(resp.Header)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	_, err := wait(ctx, "never", 0)
	cancel()
	if !errors.Is(err, pdc.ErrTimeout) {
		t.Fatalf("wait past the deadline: %v", err)
	}

	const waiters = 8
	var wg sync.WaitGroup
	got := make([]*wire.StageRecord, waiters)
	errs := make([]error, waiters)
	for i := range waiters {
		wg.Go(func() { got[i], errs[i] = wait(context.Background(), "f", 0) })
	}
	// Waiters registered (or not yet: either way a produce must wake or
	// satisfy them all).
	produceOn(t, s, "other")
	produceOn(t, s, "f")
	wg.Wait()
	for i := range waiters {
		if errs[i] != nil || got[i].Version != 1 {
			t.Fatalf("waiter %d: %+v %v", i, got[i], errs[i])
		}
	}
	// A wait for a version after the current one waits for the next.
	done := make(chan *wire.StageRecord, 1)
	go func() {
		r, err := wait(context.Background(), "f", 1)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	produceOn(t, s, "f")
	if r := <-done; r == nil || r.Version != 2 {
		t.Fatalf("wait after version 1: %+v", r)
	}
	if n := len(s.stages.waits.byPath); n != 0 {
		t.Fatalf("%d paths still watched after their waits ended", n)
	}
	// Shutdown ends waits at once.
	stopped := make(chan error, 1)
	go func() {
		_, err := wait(context.Background(), "g", 0)
		stopped <- err
	}()
	s.StopStageWaits()
	if err := <-stopped; !errors.Is(err, pdc.ErrUnavailable) {
		t.Fatalf("wait at shutdown: %v", err)
	}
	s.StopStageWaits() // idempotent
}

func TestStageRecordsSurviveReopen(t *testing.T) {
	dir, cp := t.TempDir(), t.TempDir()
	open := func() *Service {
		s, err := Open(Config{Dir: dir, CheckpointDir: cp, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		s.SetPlacement(0, 1)
		s.SetReady()
		return s
	}
	s := open()
	produceOn(t, s, "kept", "kept")
	// No Close: the process dies; the log holds the records.
	crash(s)
	s2 := open()
	defer s2.Close()
	r, err := lookupOn(s2, "kept")
	if err != nil || r.Version != 2 {
		t.Fatalf("after reopen: %+v %v", r, err)
	}
	if got := produceOn(t, s2, "kept"); got[0].Version != 3 {
		t.Fatalf("produce after reopen: version %d", got[0].Version)
	}
}

func TestStageKeysMoveWithTheirOwner(t *testing.T) {
	want, _ := keyOwner(keyStage("", "dir/file"))
	for _, ns := range []string{"", "run-2"} {
		k := keyStage(ns, "dir/file")
		got, ok := keyOwner(k)
		if !ok {
			t.Fatalf("namespace %q: a staged file's record has no owner: it would not move when the cluster resizes", ns)
		}
		if got != want {
			t.Fatalf("namespace %q: placed by %d, the default namespace's by %d: a path must have one server", ns, got, want)
		}
	}
}
