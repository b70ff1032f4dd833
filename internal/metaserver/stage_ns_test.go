package metaserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/wire"
)

func produceNS(t *testing.T, s *Service, ns string, paths ...string) []wire.StageRecord {
	t.Helper()
	in := wire.StageBatch{Version: wire.StageVersion}
	for _, p := range paths {
		in.Records = append(in.Records, wire.StageRecord{Path: p, Host: "node-a", Size: 3, CRC: 7, Namespace: ns})
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

func listNS(t *testing.T, s *Service, ns, prefix string, limit uint32) []string {
	t.Helper()
	var got []string
	q := wire.StageListReq{Version: wire.StageVersion, Namespace: ns, Prefix: prefix, Limit: limit}
	for range 1000 {
		resp, err := s.stageList(context.Background(), stageReq(&q))
		if err != nil {
			t.Fatal(err)
		}
		var p wire.StageList
		if err := p.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		if limit > 0 && len(p.Records) > int(limit) {
			t.Fatalf("a page of %d records, limit %d", len(p.Records), limit)
		}
		for _, r := range p.Records {
			got = append(got, fmt.Sprintf("%s@%d", r.Path, r.Version))
		}
		if p.Next == "" {
			return got
		}
		q.After = p.Next
	}
	t.Fatal("the listing does not end")
	return nil
}

func removeNS(t *testing.T, s *Service, q wire.StageRemoveReq) uint64 {
	t.Helper()
	q.Version = wire.StageVersion
	var n uint64
	for range 1000 {
		resp, err := s.stageRemove(context.Background(), stageReq(&q))
		if err != nil {
			t.Fatal(err)
		}
		var out wire.StageRemoved
		if err := out.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		n += out.N
		if out.Next == "" {
			return n
		}
		q.After = out.Next
	}
	t.Fatal("the removal does not end")
	return 0
}

// Namespaces keep their own records and versions; a record stored by a
// client before namespaces is in the default one.
func TestStageNamespaces(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	produceOn(t, s, "a", "a") // a client before namespaces: version 0 requests
	if got := produceNS(t, s, "run-2", "a"); got[0].Version != 1 || got[0].Namespace != "run-2" {
		t.Fatalf("first produce of a in run-2: %+v", got[0])
	}
	if got := produceNS(t, s, "", "a"); got[0].Version != 3 {
		t.Fatalf("produce of a in the default namespace: version %d, want 3", got[0].Version)
	}
	look := func(ns, path string) (*wire.StageRecord, error) {
		resp, err := s.stageLookup(context.Background(), stageReq(&wire.StageKey{Path: path, Namespace: ns, Version: wire.StageVersion}))
		if err != nil {
			return nil, err
		}
		var r wire.StageRecord
		return &r, r.Unmarshal(resp.Header)
	}
	if r, err := look("run-2", "a"); err != nil || r.Version != 1 {
		t.Fatalf("lookup in run-2: %+v %v", r, err)
	}
	if _, err := look("run-3", "a"); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("lookup in a namespace never produced in: %v", err)
	}
	for _, bad := range []string{"a/b", "a\x00b", string(make([]byte, 200))} {
		if _, err := look(bad, "a"); !errors.Is(err, pdc.ErrInvalid) {
			t.Errorf("namespace %q: %v, want %v", bad, err, pdc.ErrInvalid)
		}
	}
	_, err := s.stageLookup(context.Background(), stageReq(&wire.StageKey{Path: "a", Namespace: "run-2", Version: 9}))
	if !errors.Is(err, pdc.ErrVersion) {
		t.Errorf("a lookup of staging version 9: %v, want %v", err, pdc.ErrVersion)
	}
}

// Listings and removals go a bounded page at a time, by prefix, in one
// namespace only.
func TestStageListAndRemovePages(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	var paths []string
	for i := range 25 {
		paths = append(paths, fmt.Sprintf("out/%02d", i))
	}
	produceNS(t, s, "n", append(paths, "outer", "x/y")...)
	produceNS(t, s, "m", "out/00")
	produceNS(t, s, "", "out/00")
	if got := listNS(t, s, "n", "out/", 4); len(got) != 25 || got[0] != "out/00@1" || got[24] != "out/24@1" {
		t.Fatalf("list of n out/ by 4: %v", got)
	}
	if got := listNS(t, s, "n", "", 0); len(got) != 27 {
		t.Fatalf("list of n: %v", got)
	}
	if n := removeNS(t, s, wire.StageRemoveReq{Namespace: "n", Path: "out/03"}); n != 1 {
		t.Fatalf("remove out/03: %d", n)
	}
	if n := removeNS(t, s, wire.StageRemoveReq{Namespace: "n", Path: "out/03"}); n != 0 {
		t.Fatalf("remove out/03 again: %d", n)
	}
	if n := removeNS(t, s, wire.StageRemoveReq{Namespace: "n", Prefix: "out/", Limit: 5}); n != 24 {
		t.Fatalf("remove prefix out/ by 5: %d, want 24", n)
	}
	if got := listNS(t, s, "n", "", 0); len(got) != 2 || got[0] != "outer@1" || got[1] != "x/y@1" {
		t.Fatalf("after removing out/: %v", got)
	}
	if n := removeNS(t, s, wire.StageRemoveReq{Namespace: "n", All: true}); n != 2 {
		t.Fatalf("remove all of n: %d", n)
	}
	if got := listNS(t, s, "m", "", 0); len(got) != 1 {
		t.Fatalf("namespace m after n was removed: %v", got)
	}
	if got := listNS(t, s, "", "", 0); len(got) != 1 {
		t.Fatalf("the default namespace after n was removed: %v", got)
	}
	named := []wire.StageProduce{{Path: "a/x", Record: 1}}
	for _, q := range []wire.StageRemoveReq{{}, {Path: "a", Prefix: "b"}, {Prefix: "a", All: true}, {Path: "a", All: true},
		{Path: "a/x", Produces: named}, {Prefix: "b/", Produces: named}, {Prefix: "a/", After: "a/", Produces: named},
		{Prefix: "a/", Limit: 1, Produces: named}, {All: true, Produces: make([]wire.StageProduce, 4097)}} {
		q.Version = wire.StageVersion
		if _, err := s.stageRemove(context.Background(), stageReq(&q)); !errors.Is(err, pdc.ErrInvalid) {
			t.Errorf("remove %+v: %v, want %v", q, err, pdc.ErrInvalid)
		}
	}
}

// A wait for a version newer than one the path has ends at its next
// produce, also when its record was removed in between and the produce
// starts the versions again.
func TestStageWaitNewerAcrossRemove(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	produceNS(t, s, "n", "a", "a") // version 2
	type result struct {
		r   wire.StageRecord
		err error
	}
	wait := func(after uint64) chan result {
		ch := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			resp, err := s.stageWait(ctx, stageReq(&wire.StageKey{Path: "a", Namespace: "n", After: after, Version: wire.StageVersion}))
			var res result
			if res.err = err; err == nil {
				res.err = res.r.Unmarshal(resp.Header)
			}
			ch <- res
		}()
		return ch
	}
	if r := <-wait(1); r.err != nil || r.r.Version != 2 {
		t.Fatalf("wait newer than 1 with version 2 there: %+v", r)
	}
	w := wait(2)
	awaitWaiters(t, s, waitKey("n", "a"))
	produceNS(t, s, "m", "a") // another namespace does not end it
	if n := removeNS(t, s, wire.StageRemoveReq{Namespace: "n", Path: "a"}); n != 1 {
		t.Fatal("remove")
	}
	produceNS(t, s, "n", "a")
	if r := <-w; r.err != nil || r.r.Version != 1 {
		t.Fatalf("wait newer than 2 across a removal: %+v, want the next produce, version 1", r)
	}
}

// awaitWaiters returns once someone waits on key.
func awaitWaiters(t *testing.T, s *Service, key string) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for range 60000 {
		s.stages.waits.mu.Lock()
		n := 0
		if w := s.stages.waits.byPath[key]; w != nil {
			n = w.waiters
		}
		s.stages.waits.mu.Unlock()
		if n > 0 {
			return
		}
		<-tick.C
	}
	t.Fatalf("nobody waits on %q", key)
}

// Staged records of every namespace move to their path's new owner when
// the cluster grows, and are gone from the old one.
func TestStageNamespacesMoveWithTheirOwner(t *testing.T) {
	a, b := newSvc(t), newSvc(t)
	defer a.Close()
	defer b.Close()
	var paths []string
	for i := range 100 {
		paths = append(paths, fmt.Sprintf("run/%d.dat", i))
	}
	produceNS(t, a, "n", paths...)
	produceNS(t, a, "n", paths[:10]...) // version 2
	produceNS(t, a, "", paths...)
	ctx := context.Background()
	a.ready.Store(false)
	b.ready.Store(false)
	a.SetPlacement(0, 2)
	b.SetPlacement(1, 2)
	if _, err := a.MoveForeign(ctx, func(ctx context.Context, index int, kvs *wire.KVBatch) error {
		return b.importKVs(kvs)
	}); err != nil {
		t.Fatal(err)
	}
	a.SetReady()
	b.SetReady()
	onB := 0
	for i, p := range paths {
		owner, other := a, b
		if placement.Owner(placement.Key(p, 0), 2) == 1 {
			owner, other = b, a
			onB++
		}
		for _, ns := range []string{"n", ""} {
			want := uint64(1)
			if ns == "n" && i < 10 {
				want = 2
			}
			if r, err := owner.stages.loadStage(ns, p); err != nil || r == nil || r.Version != want || r.Namespace != ns {
				t.Fatalf("%s in %q on its new owner: %+v, %v; want version %d", p, ns, r, err, want)
			}
			if r, _ := other.stages.loadStage(ns, p); r != nil {
				t.Fatalf("%s in %q still on its old owner", p, ns)
			}
		}
	}
	if onB == 0 || onB == len(paths) {
		t.Fatalf("%d of %d paths moved: the test proves nothing", onB, len(paths))
	}
	if got := len(listNS(t, a, "n", "", 7)) + len(listNS(t, b, "n", "", 7)); got != len(paths) {
		t.Fatalf("namespace n lists %d records across both servers, want %d", got, len(paths))
	}
}

// A removal of a path names the produce it removes, so that a copy of it
// sent again (its answer was lost, its sync failed) after the path was
// produced again leaves that later, acknowledged produce alone; before,
// the second copy removed whatever record the path had.
func TestStageRemoveSentAgainSparesALaterProduce(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	first := produceNS(t, s, "n", "a")[0]
	q := wire.StageRemoveReq{Namespace: "n", Path: "a", Record: first.Version, Produced: first.Produced}
	if n := removeNS(t, s, q); n != 1 {
		t.Fatalf("removal of a: %d removed, want 1", n)
	}
	later := produceNS(t, s, "n", "a")[0]
	if later.Version != first.Version || later.Produced == first.Produced {
		t.Fatalf("produce after the removal: %+v; the first was %+v", later, first)
	}
	if n := removeNS(t, s, q); n != 0 {
		t.Fatalf("the removal sent again removed %d records, want none", n)
	}
	if got := listNS(t, s, "n", "", 0); len(got) != 1 || got[0] != "a@1" {
		t.Fatalf("records after the removal sent again: %v, want [a@1]", got)
	}
	// Naming the later produce removes it; naming none removes any.
	if n := removeNS(t, s, wire.StageRemoveReq{Namespace: "n", Path: "a", Record: later.Version, Produced: later.Produced}); n != 1 {
		t.Fatalf("removal naming the later produce: %d removed, want 1", n)
	}
	produceNS(t, s, "n", "a")
	if n := removeNS(t, s, wire.StageRemoveReq{Namespace: "n", Path: "a"}); n != 1 {
		t.Fatalf("removal naming no produce: %d removed, want 1", n)
	}
}

// A removal of a prefix names the produces it listed, so that a copy of
// it sent again (its answer was lost) after paths under the prefix were
// produced, again or for the first time, leaves those later, acknowledged
// produces; before, the copy removed whatever the prefix held by then.
func TestStagePrefixRemoveSentAgainSparesLaterProduces(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	listed := produceNS(t, s, "n", "d/a", "d/b", "e")
	q := wire.StageRemoveReq{Namespace: "n", Prefix: "d/", Produces: wire.StageProduces(listed[:2])}
	if n := removeNS(t, s, q); n != 2 {
		t.Fatalf("removal of d/: %d removed, want 2", n)
	}
	produceNS(t, s, "n", "d/a", "d/c")
	if n := removeNS(t, s, q); n != 0 {
		t.Fatalf("the removal sent again removed %d records, want none", n)
	}
	if got := listNS(t, s, "n", "", 0); strings.Join(got, " ") != "d/a@1 d/c@1 e@1" {
		t.Fatalf("records after the removal sent again: %v, want [d/a@1 d/c@1 e@1]", got)
	}
	// Named twice counts once; a path named that has no record is passed.
	again := produceNS(t, s, "n", "d/a")
	q.Produces = append(wire.StageProduces(again), wire.StageProduces(again)...)
	q.Produces = append(q.Produces, wire.StageProduce{Path: "d/none", Record: 1})
	if n := removeNS(t, s, q); n != 1 {
		t.Fatalf("removal naming d/a twice: %d removed, want 1", n)
	}
	// All of the namespace, by the produces listed.
	all := wire.StageRemoveReq{Namespace: "n", All: true, Produces: wire.StageProduces(produceNS(t, s, "n", "d/c", "e"))}
	if n := removeNS(t, s, all); n != 2 {
		t.Fatalf("removal of all of n: %d removed, want 2", n)
	}
	if got := listNS(t, s, "n", "", 0); len(got) != 0 {
		t.Fatalf("records after the removal of all: %v", got)
	}
}
