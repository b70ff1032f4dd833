package postings

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/pdcgo/pdc"
)

func openDB(t *testing.T, fs vfs.FS) *pebble.DB {
	t.Helper()
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: every store opened after is closed first.
	t.Cleanup(func() { db.Close() })
	return db
}

func commit(b *pebble.Batch) (func() error, error) {
	return func() error { return nil }, b.Commit(pebble.NoSync)
}

func commitNow(b *pebble.Batch) error { return b.Commit(pebble.NoSync) }

// small makes every mechanism run often: merges, flushes, disk merges and
// blocks of a few records.
var small = Options{FlushBytes: 600, Fanout: 3, BlockBytes: 64}

func open(t *testing.T, db *pebble.DB, opt Options) *Store {
	t.Helper()
	s, err := Open(db, commit, 'Y', 'Z', opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// randKey draws from a small space with shared prefixes, zero bytes and
// lengths around the eight-byte sort prefix.
func randKey(r *rand.Rand) []byte {
	n := r.IntN(12)
	k := make([]byte, n)
	for i := range k {
		k[i] = "ab\x00\xff"[r.IntN(4)]
	}
	return k
}

type model map[string][]byte

func (m model) rangeOf(lo, hi []byte) []string {
	var keys []string
	for k := range m {
		if bytes.Compare([]byte(k), lo) >= 0 && (hi == nil || bytes.Compare([]byte(k), hi) < 0) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // Go strings compare as bytes.Compare does
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%x=%x", k, m[k]))
	}
	return out
}

func rangeOf(t *testing.T, s *Store, lo, hi []byte) []string {
	t.Helper()
	var out []string
	err := s.Range(lo, hi, func(k, v []byte) error {
		out = append(out, fmt.Sprintf("%x=%x", k, v))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func check(t *testing.T, s *Store, m model, r *rand.Rand, what string) {
	t.Helper()
	if got, want := rangeOf(t, s, nil, nil), m.rangeOf(nil, nil); !slices.Equal(got, want) {
		t.Fatalf("%s: everything:\n got %v\nwant %v", what, got, want)
	}
	for range 20 {
		lo, hi := randKey(r), randKey(r)
		if bytes.Compare(lo, hi) > 0 {
			lo, hi = hi, lo
		}
		if got, want := rangeOf(t, s, lo, hi), m.rangeOf(lo, hi); !slices.Equal(got, want) {
			t.Fatalf("%s: [%x, %x):\n got %v\nwant %v", what, lo, hi, got, want)
		}
	}
}

// TestStoreMatchesAModel applies random batches (sets, deletes, several
// changes of one key in a batch), reopens the store now and then, and
// compares every read with a map.
func TestStoreMatchesAModel(t *testing.T) {
	// small flushes all the time; inMemory merges runs in memory, whole
	// levels and the newest runs of a level too big to merge whole.
	inMemory := Options{FlushBytes: 16 << 10, Fanout: 3, BlockBytes: 64}
	for _, opt := range []struct {
		name string
		o    Options
	}{{"flushing", small}, {"merging", inMemory}} {
		for seed := range uint64(6) {
			t.Run(fmt.Sprint(opt.name, seed), func(t *testing.T) {
				small := opt.o
				r := rand.New(rand.NewPCG(seed, 1))
				fs := vfs.NewMem()
				db := openDB(t, fs)
				s := open(t, db, small)
				m := model{}
				maxMem, maxDisk := 0, 0
				for round := range 300 {
					var ops Ops
					for range 1 + r.IntN(12) {
						k := randKey(r)
						if r.IntN(3) == 0 {
							ops.Delete(k)
							delete(m, string(k))
						} else {
							v := []byte(fmt.Sprint(round))
							ops.Set(k, v)
							m[string(k)] = v
						}
					}
					if err := s.Apply(&ops); err != nil {
						t.Fatal(err)
					}
					st := s.Stats()
					maxMem, maxDisk = max(maxMem, st.MemRuns), max(maxDisk, st.DiskRuns)
					if round%10 == 0 {
						check(t, s, m, r, fmt.Sprintf("round %d", round))
					}
					if round%37 == 0 {
						s.Close()
						s = open(t, db, small)
						check(t, s, m, r, fmt.Sprintf("reopened at round %d", round))
					}
				}
				if maxDisk < 1 || maxMem < 2 {
					t.Fatalf("the test should exercise several runs in memory (%d at most) and on disk (%d)", maxMem, maxDisk)
				}
				if err := s.Flush(); err != nil {
					t.Fatal(err)
				}
				check(t, s, m, r, "flushed")
				s.Close()
				check(t, open(t, db, small), m, r, "flushed and reopened")
			})
		}
	}
}

// TestStagedSurvivesACrashBeforePublish: a staged batch whose commit
// happened is found after a restart even though Publish never ran.
func TestStagedSurvivesACrashBeforePublish(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	s := open(t, db, small)
	var ops Ops
	ops.Set([]byte("kept"), []byte("1"))
	b := db.NewBatch()
	b.Set([]byte("a tag"), []byte("x"), nil)
	p := s.Stage(b, &ops)
	if p == nil {
		t.Fatal("Stage returned nil for a change")
	}
	if err := commitNow(b); err != nil {
		t.Fatal(err)
	}
	if got := rangeOf(t, s, nil, nil); len(got) != 0 {
		t.Fatalf("visible before Publish: %v", got)
	}
	s.Abandon(p) // as if the process died here
	s.Close()
	if got, want := rangeOf(t, open(t, db, small), nil, nil), []string{fmt.Sprintf("%x=%x", "kept", "1")}; !slices.Equal(got, want) {
		t.Fatalf("after restart: got %v, want %v", got, want)
	}
}

// TestUnfinishedRunIsDropped: blocks of a run whose description never
// committed (a crash mid-flush) are deleted at Open, and the log records
// it would have replaced still count.
func TestUnfinishedRunIsDropped(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	opt := Options{FlushBytes: 1 << 20, Fanout: 100, BlockBytes: 16}
	s := open(t, db, opt)
	m := model{}
	for i := range 50 {
		var ops Ops
		k := fmt.Appendf(nil, "k%03d", i)
		ops.Set(k, []byte("v"))
		m[string(k)] = []byte("v")
		if err := s.Apply(&ops); err != nil {
			t.Fatal(err)
		}
	}
	// A flush that stops before its last batch.
	s.wmu.Lock()
	s.w.nextID++
	w := s.newRunWriter(s.w.nextID, 0, s.w.age)
	var cs []cursor
	for _, r := range s.w.mem[0] {
		cs = append(cs, newMemCursor(r, nil, nil))
	}
	s.wmu.Unlock()
	b, err := s.writeRun(w, cs, false)
	if err != nil {
		t.Fatal(err)
	}
	b.Close() // never committed: its description is lost
	s.Close()
	if err := commitNow(func() *pebble.Batch { // and one block that did reach the store
		b := db.NewBatch()
		b.Set(s.runKey(w.r.id, 0), append([]byte{runVersion}, "junk"...), nil)
		return b
	}()); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, db, opt)
	check(t, s2, m, rand.New(rand.NewPCG(1, 2)), "reopened")
	it, _ := db.NewIter(&pebble.IterOptions{LowerBound: []byte{'Z'}, UpperBound: []byte{'Z' + 1}})
	defer it.Close()
	if it.First() {
		t.Fatalf("an unfinished run's block is left: %x", it.Key())
	}
}

func TestReset(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	s := open(t, db, small)
	for i := range 100 {
		var ops Ops
		ops.Set(fmt.Appendf(nil, "k%03d", i), []byte("v"))
		if err := s.Apply(&ops); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if got := rangeOf(t, s, nil, nil); len(got) != 0 {
		t.Fatalf("after Reset: %v", got)
	}
	s.Close()
	if got := rangeOf(t, open(t, db, small), nil, nil); len(got) != 0 {
		t.Fatalf("after Reset and a restart: %v", got)
	}
}

func TestParseOpsErrors(t *testing.T) {
	var ops Ops
	ops.Set([]byte("key"), []byte("value"))
	ops.Delete([]byte("gone"))
	good := ops.Bytes()
	if p, err := ParseOps(good); err != nil || p.Len() != 2 {
		t.Fatalf("ParseOps(good) = %d changes, %v", p.Len(), err)
	}
	if _, err := ParseOps(append([]byte{OpsVersion + 1}, good[1:]...)); !errors.Is(err, pdc.ErrVersion) {
		t.Fatalf("another version: %v, want ErrVersion", err)
	}
	first := 1 + 1 + 1 + len("key") + 1 + len("value") // where the second record starts
	for n := 2; n < len(good); n++ {
		if _, err := ParseOps(good[:n]); n != first && !errors.Is(err, pdc.ErrInvalid) {
			t.Fatalf("cut at %d: %v, want ErrInvalid", n, err)
		}
	}
	if _, err := ParseOps(append(slices.Clone(good), 7)); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("unknown record kind: %v, want ErrInvalid", err)
	}
}

// TestReadersDuringWrites reads while a writer applies, flushes and
// merges (run it with -race): every read is in order and holds every key
// applied before it began.
func TestReadersDuringWrites(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	s := open(t, db, Options{FlushBytes: 4 << 10, Fanout: 4, BlockBytes: 256})
	var applied atomic.Int64
	const n = 3000
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			var ops Ops
			ops.Set(fmt.Appendf(nil, "k%06d", i), []byte("v"))
			if err := s.Apply(&ops); err != nil {
				errs <- err
				return
			}
			applied.Store(int64(i + 1))
		}
	}()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for applied.Load() < n {
				before := int(applied.Load())
				got := 0
				var last []byte
				err := s.Range(nil, nil, func(k, _ []byte) error {
					if last != nil && bytes.Compare(last, k) >= 0 {
						return fmt.Errorf("out of order: %q after %q", k, last)
					}
					last = bytes.Clone(k)
					got++
					return nil
				})
				if err == nil && got < before {
					err = fmt.Errorf("read %d keys; %d were applied before the read", got, before)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// TestConcurrentAppliesKeepTheirOrder: whichever of many concurrent
// changes of one key readers see last is still the one they see after a
// restart (changes become visible in the order the log replays them).
func TestConcurrentAppliesKeepTheirOrder(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	s := open(t, db, Options{FlushBytes: 1 << 20})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				var ops Ops
				ops.Set([]byte("k"), fmt.Appendf(nil, "%d-%d", g, i))
				if err := s.Apply(&ops); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	before := rangeOf(t, s, nil, nil)
	s.Close()
	s.Close() // idempotent
	if err := s.Flush(); !errors.Is(err, pdc.ErrClosed) {
		t.Fatalf("Flush after Close: %v, want ErrClosed", err)
	}
	if after := rangeOf(t, open(t, db, Options{FlushBytes: 1 << 20}), nil, nil); !slices.Equal(before, after) {
		t.Fatalf("before the restart %v, after %v", before, after)
	}
}

// TestFlushFailureIsRetried: while runs cannot be written to disk the
// entries stay readable from memory, the flusher tries again, and once it
// can, the runs land with no block of a failed try left over.
func TestFlushFailureIsRetried(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	var failing atomic.Bool
	failed := make(chan struct{}, 100)
	faulty := func(b *pebble.Batch) (func() error, error) {
		if failing.Load() {
			r := b.Reader()
			for {
				_, k, _, ok, err := r.Next()
				if err != nil || !ok {
					break
				}
				// The batch that describes a run: its blocks before
				// it committed.
				if len(k) == 13 && k[0] == 'Z' && bytes.HasSuffix(k, []byte{0xff, 0xff, 0xff, 0xff}) {
					select {
					case failed <- struct{}{}:
					default:
					}
					return nil, fmt.Errorf("injected: disk full")
				}
			}
		}
		return commit(b)
	}
	failing.Store(true)
	// Blocks of 64 bytes, committed 512 bytes at a time: the blocks of a
	// run reach the store before the batch that describes it fails.
	s, err := Open(db, faulty, 'Y', 'Z', Options{FlushBytes: 2 << 10, Fanout: 4, BlockBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	m := model{}
	for i := range 30 {
		var ops Ops
		k, v := fmt.Appendf(nil, "key%03d", i), bytes.Repeat([]byte{'v'}, 90)
		ops.Set(k, v)
		m[string(k)] = v
		if err := s.Apply(&ops); err != nil {
			t.Fatal(err)
		}
	}
	<-failed
	<-failed // a second try failed too
	r := rand.New(rand.NewPCG(3, 4))
	check(t, s, m, r, "while flushes fail")
	failing.Store(false)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.DiskRuns == 0 || st.MemRuns != 0 {
		t.Fatalf("after the flush: %+v", st)
	}
	check(t, s, m, r, "flushed")
	// Every block belongs to a run with a description: the failed tries
	// removed theirs.
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{'Z'}, UpperBound: []byte{'Z' + 1}})
	if err != nil {
		t.Fatal(err)
	}
	described := map[string]bool{}
	var ids []string
	for ok := it.First(); ok; ok = it.Next() {
		id := string(it.Key()[1:9])
		ids = append(ids, id)
		if bytes.HasSuffix(it.Key(), []byte{0xff, 0xff, 0xff, 0xff}) {
			described[id] = true
		}
	}
	it.Close()
	for _, id := range ids {
		if !described[id] {
			t.Fatalf("a block of run %x, which has no description, is left", id)
		}
	}
	s.Close()
	check(t, open(t, db, Options{}), m, r, "reopened")
}

// TestSmallChangesAfterABulkLoadMergeInTiers: once memory holds runs too
// big to merge before the flush, a stream of one-entry batches is merged
// tier by tier. Each entry is copied a few times (once per size class),
// and the runs in memory stay few. Merging every newest run under the
// limit into one copied the growing run again every Fanout batches: 2,900
// times the entries' bytes here.
func TestSmallChangesAfterABulkLoadMergeInTiers(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	s := open(t, db, Options{FlushBytes: 32 << 20})
	// A bulk load: runs of about 150 KB, 20 of them (over a 16th of
	// FlushBytes together).
	for i := range 20 {
		applyN(t, s, fmt.Sprintf("bulk%02d-", i), 3000)
	}
	before := s.Stats()
	const n = 4096
	tiny := 0
	for i := range n {
		var ops Ops
		ops.Set(fmt.Appendf(nil, "one%05d", i), bytes.Repeat([]byte{'v'}, 30))
		tiny += len(ops.Bytes())
		if err := s.Apply(&ops); err != nil {
			t.Fatal(err)
		}
	}
	after := s.Stats()
	if after.DiskRuns != 0 {
		t.Fatalf("%d runs on disk: the test means to stay in memory", after.DiskRuns)
	}
	if copied := after.MergedBytes - before.MergedBytes; copied > 6*int64(tiny) {
		t.Fatalf("%d one-entry batches (%d bytes) made merges write %d bytes (%.0fx)", n, tiny, copied, float64(copied)/float64(tiny))
	}
	if after.MemRuns > 20+4*16 {
		t.Fatalf("%d runs in memory after %d one-entry batches", after.MemRuns, n)
	}
	// Everything reads back.
	got := 0
	if err := s.Range([]byte("one"), []byte("onf"), func(k, v []byte) error {
		got++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("read %d of the %d entries", got, n)
	}
}
