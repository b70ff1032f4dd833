package postings

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// gates holds the block commits of chosen runs (commits the flusher and
// the merger make outside the store's locks) until released.
type gates struct {
	mu      sync.Mutex
	blocked map[uint64]chan struct{} // run id -> closed to release
	reached map[uint64]chan struct{} // run id -> closed when a commit waits
}

func newGates() *gates {
	return &gates{blocked: map[uint64]chan struct{}{}, reached: map[uint64]chan struct{}{}}
}

func (g *gates) arm(id uint64) (reached <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rel, r := make(chan struct{}), make(chan struct{})
	g.blocked[id], g.reached[id] = rel, r
	var once sync.Once
	return r, func() { once.Do(func() { close(rel) }) }
}

func (g *gates) commit(b *pebble.Batch) (func() error, error) {
	r := b.Reader()
	var run uint64
	for {
		_, k, _, ok, err := r.Next()
		if err != nil || !ok {
			break
		}
		if len(k) == 13 && k[0] == 'Z' && !bytes.HasSuffix(k, []byte{0xff, 0xff, 0xff, 0xff}) {
			run = binary.BigEndian.Uint64(k[1:9])
		}
	}
	g.mu.Lock()
	rel, reached := g.blocked[run], g.reached[run]
	delete(g.blocked, run)
	g.mu.Unlock()
	if rel != nil {
		close(reached)
		<-rel
	}
	return commit(b)
}

func applyN(t *testing.T, s *Store, tag string, n int) {
	t.Helper()
	var ops Ops
	for i := range n {
		ops.Set(fmt.Appendf(nil, "%s%04d", tag, i), bytes.Repeat([]byte{'v'}, 40))
	}
	if err := s.Apply(&ops); err != nil {
		t.Fatal(err)
	}
}

// TestFlushesDoNotWaitForMerges: while a merge of disk runs is held, a
// writer that fills memory gets its runs flushed, and Flush returns once
// its own runs are on disk. Both would hang if flushes waited behind the
// merge.
func TestFlushesDoNotWaitForMerges(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	g := newGates()
	// Blocks commit 1 KiB at a time: a run's blocks commit before its
	// description, through the gate.
	s, err := Open(db, g.commit, 'Y', 'Z', Options{FlushBytes: 4 << 10, Fanout: 2, BlockBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	applyN(t, s, "a", 50)
	if err := s.Flush(); err != nil { // run 1
		t.Fatal(err)
	}
	mergeReached, releaseMerge := g.arm(3) // the merge of runs 1 and 2
	defer releaseMerge()
	applyN(t, s, "b", 50)
	if err := s.Flush(); err != nil { // run 2; the merge starts
		t.Fatal(err)
	}
	<-mergeReached
	// Memory fills twice over: the second writer waits for the first
	// flush (run 4), which must not wait for the merge.
	applyN(t, s, "c", 100)
	applyN(t, s, "d", 100)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.MemRuns != 0 {
		t.Fatalf("Flush returned with runs in memory: %+v", st)
	}
	releaseMerge()
	m := model{}
	for _, tag := range []string{"a", "b", "c", "d"} {
		n := map[string]int{"a": 50, "b": 50, "c": 100, "d": 100}[tag]
		for i := range n {
			m[fmt.Sprintf("%s%04d", tag, i)] = bytes.Repeat([]byte{'v'}, 40)
		}
	}
	check(t, s, m, rand.New(rand.NewPCG(1, 1)), "after the merge")
}

// TestResetWhileFlushesFail: Reset does not wait for a flush that keeps
// failing (it deletes what that flush would write), and afterwards the
// store is empty and takes changes again.
func TestResetWhileFlushesFail(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	var mu sync.Mutex
	failing := true
	faulty := func(b *pebble.Batch) (func() error, error) {
		mu.Lock()
		f := failing
		mu.Unlock()
		r := b.Reader()
		for f {
			_, k, _, ok, err := r.Next()
			if err != nil || !ok {
				break
			}
			if len(k) == 13 && k[0] == 'Z' && bytes.HasSuffix(k, []byte{0xff, 0xff, 0xff, 0xff}) {
				return nil, fmt.Errorf("injected: disk full")
			}
		}
		return commit(b)
	}
	s, err := Open(db, faulty, 'Y', 'Z', Options{FlushBytes: 2 << 10, BlockBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	applyN(t, s, "a", 50) // over FlushBytes: its flush fails, and again
	if err := s.Flush(); err == nil {
		t.Fatal("Flush succeeded while flushes fail")
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if got := rangeOf(t, s, nil, nil); len(got) != 0 {
		t.Fatalf("after Reset: %v", got)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	applyN(t, s, "b", 10)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := rangeOf(t, s, nil, nil); len(got) != 10 {
		t.Fatalf("after Reset and 10 changes: %d entries", len(got))
	}
}
