package metaserver

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
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
