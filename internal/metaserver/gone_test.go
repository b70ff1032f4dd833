package metaserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// fakeData records the tombstones each data server confirmed; the ranks in
// down fail.
type fakeData struct {
	mu   sync.Mutex
	down map[int]bool
	got  map[int][]uint64
	pok  chan struct{} // a push arrived (capacity 1)
}

func newFakeData(down ...int) *fakeData {
	f := &fakeData{down: map[int]bool{}, got: map[int][]uint64{}, pok: make(chan struct{}, 1)}
	for _, r := range down {
		f.down[r] = true
	}
	return f
}

func (f *fakeData) DataRanks() []int { return []int{0, 1} }

func (f *fakeData) CallData(ctx context.Context, rank int, m wire.Method, hdr []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case f.pok <- struct{}{}:
	default:
	}
	if m != wire.MethodDataGone {
		return fmt.Errorf("method %v: %w", m, pdc.ErrUnimplemented)
	}
	if f.down[rank] {
		return fmt.Errorf("rank %d: %w", rank, pdc.ErrUnavailable)
	}
	var l wire.IDList
	if err := l.Unmarshal(hdr); err != nil {
		return err
	}
	f.got[rank] = append(f.got[rank], l.IDs...)
	return nil
}

func (f *fakeData) setDown(rank int, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[rank] = down
}

func (f *fakeData) confirmed(rank int) []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got[rank])
}

func openAt(t *testing.T, dir string) *Service {
	t.Helper()
	s, err := Open(Config{Dir: dir, CheckpointDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.SetPlacement(0, 1)
	s.SetReady()
	return s
}

func tombstones(t *testing.T, s *Service) []uint64 {
	t.Helper()
	var ids []uint64
	if err := s.scan([]byte{'G'}, func(k, _ []byte) error {
		ids = append(ids, uint64(k[1])<<56|uint64(k[2])<<48|uint64(k[3])<<40|uint64(k[4])<<32|uint64(k[5])<<24|uint64(k[6])<<16|uint64(k[7])<<8|uint64(k[8]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// A delete pushes its tombstone to every data server; one that is down
// gets it later, across a restart of the metadata server, and the
// tombstone is dropped only once every data server has confirmed it.
func TestTombstonesReachEveryDataServer(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openAt(t, dir)
	data := newFakeData(1)
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	resp, err := s.objCreate(ctx, createReq("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	var res wire.ObjResults
	if err := res.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	a := res.Items[0].Meta.ID
	// The object exists: a data server asking is told so.
	gone := func(ids ...uint64) []uint64 {
		t.Helper()
		resp, err := s.objGone(ctx, &rpc.Request{Header: (&wire.IDList{IDs: ids}).Marshal(nil)})
		if err != nil {
			t.Fatal(err)
		}
		var l wire.IDList
		if err := l.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		return l.IDs
	}
	if g := gone(a); len(g) != 0 {
		t.Fatalf("a live object is reported gone: %v", g)
	}
	if _, err := s.objDelete(ctx, &rpc.Request{Header: (&wire.ObjKey{ID: a}).Marshal(nil)}); err != nil {
		t.Fatal(err)
	}
	if g := gone(a, res.Items[1].Meta.ID); !slices.Equal(g, []uint64{a}) {
		t.Fatalf("gone after the delete: %v, want [%d]", g, a)
	}
	if got := data.confirmed(0); !slices.Equal(got, []uint64{a}) {
		t.Fatalf("data server 0 got tombstones %v before the delete answered, want [%d]", got, a)
	}
	if ids := tombstones(t, s); !slices.Equal(ids, []uint64{a}) || s.PendingTombstones() != 1 {
		t.Fatalf("tombstones kept while data server 1 is down: %v (pending %d)", ids, s.PendingTombstones())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarted: the tombstone is still there and reaches data server 1
	// once it is back.
	s = openAt(t, dir)
	defer s.Close()
	data = newFakeData(1)
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	if s.PendingTombstones() != 1 {
		t.Fatalf("pending after restart: %d, want 1", s.PendingTombstones())
	}
	data.setDown(1, false)
	deadline := time.Now().Add(time.Minute)
	for s.PendingTombstones() != 0 || len(tombstones(t, s)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("tombstone never confirmed by data server 1: pending %d, got %v", s.PendingTombstones(), data.confirmed(1))
		}
		select {
		case <-data.pok:
		case <-time.After(100 * time.Millisecond):
		}
	}
	if got := data.confirmed(1); !slices.Equal(got, []uint64{a}) {
		t.Fatalf("data server 1 got %v, want [%d]", got, a)
	}
}

// A delete whose commit was applied but whose fsync failed has deleted
// the object here (a retried delete finds nothing), so its data must go
// from the data servers without a restart of the metadata server; but
// not before the delete is durable, or a crash could bring back an
// object whose data was dropped. Before, its tombstone was pushed only
// by the next start, which loaded it from the store: the data stayed for
// as long as the server ran. Both an object delete and a container
// delete.
func TestDeleteWithFailedSyncRemovesTheDataOnceDurable(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"object", "container"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s := openAt(t, dir)
			data := newFakeData()
			if err := s.StartTombstones(data); err != nil {
				t.Fatal(err)
			}
			var b wire.ObjBatch
			for _, n := range []string{"a", "b"} {
				b.Creates = append(b.Creates, wire.ObjCreate{ContID: 7, Name: n, Props: wire.ObjectProps{Dims: []uint64{4}, Type: 1}})
			}
			resp, err := s.objCreate(ctx, &rpc.Request{Header: b.Marshal(nil), Client: "c"})
			if err != nil {
				t.Fatal(err)
			}
			var res wire.ObjResults
			if err := res.Unmarshal(resp.Header); err != nil {
				t.Fatal(err)
			}
			ids := []uint64{res.Items[0].Meta.ID, res.Items[1].Meta.ID}
			want := []uint64{ids[0]}
			restore := failSyncs(s)
			if kind == "object" {
				_, err = s.objDelete(ctx, &rpc.Request{Header: (&wire.ObjKey{ID: ids[0]}).Marshal(nil)})
			} else {
				want = slices.Sorted(slices.Values(ids))
				_, err = s.objDeleteCont(ctx, &rpc.Request{Header: (&wire.IDArg{ID: 7, Force: true}).Marshal(nil)})
			}
			if err == nil {
				t.Fatal("a delete whose fsync failed succeeded")
			}
			// Not pushed while the delete may not survive a crash.
			time.Sleep(700 * time.Millisecond)
			if got := data.confirmed(0); len(got) != 0 {
				t.Fatalf("tombstones %v pushed while their delete was not durable", got)
			}
			restore()
			deadline := time.Now().Add(20 * time.Second)
			for {
				got0, got1 := data.confirmed(0), data.confirmed(1)
				slices.Sort(got0)
				slices.Sort(got1)
				if slices.Equal(got0, want) && slices.Equal(got1, want) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the data servers got tombstones %v and %v once the store syncs again, want %v", got0, got1, want)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// After a restart the delete holds, and nothing is left to push.
			s = openAt(t, dir)
			defer s.Close()
			for _, id := range want {
				if err := s.objExists(id); !errors.Is(err, pdc.ErrNotFound) {
					t.Fatalf("deleted object %d after a restart: %v", id, err)
				}
			}
			if left := tombstones(t, s); len(left) != 0 {
				t.Fatalf("tombstones left after every data server confirmed: %v", left)
			}
		})
	}
}

// A delete whose commit is durable but whose wait for a full outbox ends
// (its context, while the server its index changes go to is stalled)
// answers with that error; the objects are deleted all the same, so
// their tombstones must be pushed. Before, the error skipped the push,
// and the data stayed on the data servers until the next start.
func TestDeleteAnsweredLateStillRemovesTheData(t *testing.T) {
	c := newTestCluster(t, 2)
	owner := c.svcs[0]
	data := newFakeData()
	if err := owner.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	victim, key := c.createWithRemoteKey(0)
	c.put(victim, key, "value")
	var ids []uint64
	for i := 0; len(ids) < 20; i++ {
		if name := fmt.Sprintf("fill%d", i); c.owner(name) == owner {
			ids = append(ids, c.create(name))
		}
	}
	// Stall server 1 and fill the outbox past its bound. Once over it, a
	// put waits for server 1 (holding lifeMu for reading, which a delete
	// needs for writing): each waits only briefly here.
	gate := make(chan struct{})
	c.mu.Lock()
	c.gate, c.gated = gate, 1
	c.mu.Unlock()
	defer close(gate)
	for i := 0; !owner.ix.ob.Overloaded(); i++ {
		if i == 5000 {
			t.Fatal("the outbox never went over its bound")
		}
		v := fmt.Sprintf("%04d-", i) + strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 5)
		b := wire.TagBatch{Puts: []wire.TagPut{{ID: ids[i%len(ids)], Name: "long-value", Type: int32(region.String), Value: []byte(v)}}}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, _ = owner.tagPut(ctx, &rpc.Request{Header: b.Marshal(nil)})
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := owner.objDelete(ctx, &rpc.Request{Header: (&wire.ObjKey{ID: victim}).Marshal(nil)})
	cancel()
	if err == nil {
		t.Fatal("the delete did not wait for the stalled server: the test proves nothing")
	}
	if err := owner.objExists(victim); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("after a delete answered late the object is %v, want deleted", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !slices.Contains(data.confirmed(0), victim) || !slices.Contains(data.confirmed(1), victim) {
		if time.Now().After(deadline) {
			t.Fatalf("the data servers got tombstones %v and %v, want %d among them", data.confirmed(0), data.confirmed(1), victim)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A data server asking about an object whose delete was applied but not
// synced is not told it is gone until the delete is durable: a crash
// could still bring the object back, and a data server told "gone"
// refuses it for as long as it runs (a scrub removing orphans would drop
// its data). Before, it was told at once.
func TestObjectIsNotReportedGoneUntilItsDeleteIsDurable(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, t.TempDir())
	defer s.Close()
	if err := s.StartTombstones(newFakeData()); err != nil {
		t.Fatal(err)
	}
	id := createOne(t, s, "a", []uint64{4})
	gone := func() []uint64 {
		t.Helper()
		resp, err := s.objGone(ctx, &rpc.Request{Header: (&wire.IDList{IDs: []uint64{id}}).Marshal(nil)})
		if err != nil {
			t.Fatal(err)
		}
		var l wire.IDList
		if err := l.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		return l.IDs
	}
	restore := failSyncs(s)
	if _, err := s.objDelete(ctx, &rpc.Request{Header: (&wire.ObjKey{ID: id}).Marshal(nil)}); err == nil {
		t.Fatal("a delete whose fsync failed succeeded")
	}
	if g := gone(); len(g) != 0 {
		t.Fatalf("an object whose delete is not durable is reported gone: %v", g)
	}
	restore()
	deadline := time.Now().Add(20 * time.Second)
	for !slices.Equal(gone(), []uint64{id}) {
		if time.Now().After(deadline) {
			t.Fatal("the object is not reported gone once its delete is durable")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A data server asking about an object whose delete is still in its
// fsync is not told it is gone: the delete is applied, so the store no
// longer holds the object, but a power loss during that fsync brings it
// back, and a data server told "gone" refuses it for as long as it runs
// (a scrub removing orphans would drop its data). The object is asked
// about after a restart, so that the server's memory of objects seen
// (the live set) does not answer for the store. Before, it was told
// "gone" during the fsync.
//
// A gone check fails at once with a context already done, whatever it
// would answer, so it is probed with one that is not: an answer that comes
// while the fsync is held is one given during it, and must be what the
// power-loss image taken then answers; a check that waits answers once
// the fsync is released (after a bound that decides nothing but when to
// release it).
func TestObjectIsNotReportedGoneDuringItsDeletesFsync(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := openSyncOn(t, fsys)
	if err := createObjNamed("a")(s); err != nil {
		t.Fatal(err)
	}
	id := objNamed("a")(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSyncOn(t, fsys)
	defer func() { s.Close() }()
	gone := func(s *Service) ([]uint64, error) {
		resp, err := s.objGone(ctx, &rpc.Request{Header: (&wire.IDList{IDs: []uint64{id}}).Marshal(nil)})
		if err != nil {
			return nil, err
		}
		var g wire.GoneIDs
		return g.IDs, g.Unmarshal(resp.Header)
	}
	type answer struct {
		ids []uint64
		err error
	}
	syncing, release := holdWALSync(fsys)
	deleted := make(chan error, 1)
	go func() { deleted <- deleteObjNamed("a")(s) }()
	<-syncing
	crashed := mem.CrashClone() // power loss now, during the delete's fsync
	asked := make(chan answer, 1)
	go func() {
		ids, err := gone(s)
		asked <- answer{ids, err}
	}()
	var during *answer
	select {
	case a := <-asked:
		during = &a
	case <-time.After(time.Second):
	}
	close(release)
	if err := <-deleted; err != nil {
		t.Fatalf("the delete: %v", err)
	}
	after := during
	if after == nil {
		a := <-asked
		after = &a
	}
	if after.err != nil {
		t.Fatalf("the gone check: %v", after.err)
	}
	fsys.OnOp(nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSyncOn(t, crashed)
	lost, err := gone(s)
	if err != nil {
		t.Fatalf("after a power loss during the delete's fsync: %v", err)
	}
	if len(lost) != 0 {
		t.Fatalf("after a power loss during the delete's fsync the object is gone (%v): the image was not taken during it", lost)
	}
	if during != nil && len(during.ids) != 0 {
		t.Fatalf("during its delete's fsync the object was reported gone (%v); a power loss then brings it back", during.ids)
	}
	if during == nil && !slices.Equal(after.ids, []uint64{id}) {
		t.Fatalf("once its delete is durable the object is reported gone as %v, want [%d]", after.ids, id)
	}
}

// MethodObjGone tells ids never created from those of deleted objects:
// an id not handed out yet, or one of a create whose commit has not
// returned, is named in Never as well as in IDs (which data servers of
// earlier builds read alone); a deleted object's in IDs only; a live
// one's in neither.
func TestObjGoneTellsNeverCreatedFromDeleted(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, t.TempDir())
	defer s.Close()
	if err := s.StartTombstones(newFakeData()); err != nil {
		t.Fatal(err)
	}
	live := createOne(t, s, "live", []uint64{4})
	dead := createOne(t, s, "dead", []uint64{4})
	if _, err := s.objDelete(ctx, &rpc.Request{Header: (&wire.ObjKey{ID: dead}).Marshal(nil)}); err != nil {
		t.Fatal(err)
	}
	key := placement.KeyOf(live)
	next := placement.ID(key, uint32(s.st.HighWater()))
	far := placement.ID(key, 1<<31)
	ask := func(ids ...uint64) wire.GoneIDs {
		t.Helper()
		resp, err := s.objGone(ctx, &rpc.Request{Header: (&wire.IDList{IDs: ids}).Marshal(nil)})
		if err != nil {
			t.Fatal(err)
		}
		var g wire.GoneIDs
		if err := g.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := ask(live, dead, next, far)
	if want := []uint64{dead, next, far}; !slices.Equal(g.IDs, want) {
		t.Errorf("gone: %v, want %v", g.IDs, want)
	}
	if want := []uint64{next, far}; !slices.Equal(g.Never, want) {
		t.Errorf("never created: %v, want %v", g.Never, want)
	}

	// A create under way: its sequence numbers are handed out, its
	// commit has not returned.
	f, err := s.creates.begin(s.st, 2)
	if err != nil {
		t.Fatal(err)
	}
	creating := placement.ID(key, f.first+1)
	g = ask(creating)
	if !slices.Equal(g.Never, []uint64{creating}) || !slices.Equal(g.IDs, []uint64{creating}) {
		t.Errorf("an id of a create under way: gone %v, never created %v; want it in both", g.IDs, g.Never)
	}
	// Its commit failed: the id is never used, and is gone for good.
	s.creates.end(f)
	g = ask(creating)
	if len(g.Never) != 0 || !slices.Equal(g.IDs, []uint64{creating}) {
		t.Errorf("an id of a failed create: gone %v, never created %v; want it gone only", g.IDs, g.Never)
	}
}
