package metastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pdcgo/pdc"
)

func openTest(t testing.TB, dir string, d Durability) *Store {
	t.Helper()
	s, err := openStore(dir, d, 1<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// crash drops the store as a killed process would: the log stays as
// written, and pebble's memtables (it runs without its own log) are lost.
func crash(s *Store) { s.Crash() }

func put(t *testing.T, s *Store, k, v string) {
	t.Helper()
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set([]byte(k), []byte(v), nil)
	if err := s.commit(b); err != nil {
		t.Fatal(err)
	}
}

func mustGet(t *testing.T, s *Store, k, want string) {
	t.Helper()
	v, ok, err := s.get([]byte(k))
	if err != nil || !ok || string(v) != want {
		t.Fatalf("get %q = %q, %v, %v; want %q", k, v, ok, err, want)
	}
}

func TestCommittedSurvivesCrash(t *testing.T) {
	for _, d := range []Durability{DurabilityProcess, DurabilitySync} {
		t.Run(d.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir, d)
			for i := range 100 {
				put(t, s, fmt.Sprint("k", i), fmt.Sprint("v", i))
			}
			put(t, s, "k7", "overwritten") // replay keeps the order
			b := s.db.NewBatch()
			_ = b.Delete([]byte("k8"), nil)
			if err := s.commit(b); err != nil {
				t.Fatal(err)
			}
			crash(s)
			if recs, err := readWAL(filepath.Join(dir, walFile)); err != nil || len(recs) != 103 {
				t.Fatalf("log holds %d records (%v), want 103 (version, 100 puts, overwrite, delete)", len(recs), err)
			}
			s = openTest(t, dir, d)
			defer s.close()
			mustGet(t, s, "k0", "v0")
			mustGet(t, s, "k99", "v99")
			mustGet(t, s, "k7", "overwritten")
			if _, ok, _ := s.get([]byte("k8")); ok {
				t.Fatal("a logged delete was lost")
			}
		})
	}
}

func TestTornLogTailIsDropped(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, DurabilityProcess)
	put(t, s, "a", "1")
	put(t, s, "b", "2")
	crash(s)
	// A crash mid-append leaves part of a record after the last whole one.
	recs, err := readWAL(filepath.Join(dir, walFile))
	if err != nil {
		t.Fatal(err)
	}
	end := int64(walHeaderLen)
	for _, r := range recs {
		end += walRecHeaderLen + int64(len(r))
	}
	f, err := os.OpenFile(filepath.Join(dir, walFile), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{200, 0, 0, 0, 9, 9, 9, 9, 1, 2, 3}, end); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s = openTest(t, dir, DurabilityProcess)
	mustGet(t, s, "a", "1")
	mustGet(t, s, "b", "2")
	put(t, s, "c", "3") // the log works after the torn tail
	crash(s)
	s = openTest(t, dir, DurabilityProcess)
	defer s.close()
	mustGet(t, s, "c", "3")
}

func TestForeignLogIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, walFile), []byte("PDCWAL9\nxxxx"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openStore(dir, DurabilityProcess, 1<<20, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("opened a store whose log has an unknown version")
	}
}

func TestLogRotationKeepsEverything(t *testing.T) {
	old := walRotateBytes
	walRotateBytes = 4 << 10
	defer func() { walRotateBytes = old }()
	dir := t.TempDir()
	s := openTest(t, dir, DurabilityProcess)
	for i := range 500 {
		put(t, s, fmt.Sprint("k", i), fmt.Sprintf("%0100d", i))
	}
	if st, err := os.Stat(filepath.Join(dir, walFile)); err != nil || st.Size() > 8<<10 {
		t.Fatalf("log not rotated: %v, %d bytes", err, st.Size())
	}
	crash(s)
	s = openTest(t, dir, DurabilityProcess)
	defer s.close()
	for i := range 500 {
		mustGet(t, s, fmt.Sprint("k", i), fmt.Sprintf("%0100d", i))
	}
}

func TestConcurrentSyncCommits(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, DurabilitySync)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				put(t, s, fmt.Sprintf("g%d-%d", g, i), "x")
			}
		})
	}
	wg.Wait()
	crash(s)
	s = openTest(t, dir, DurabilitySync)
	defer s.close()
	for g := range 8 {
		mustGet(t, s, fmt.Sprintf("g%d-49", g), "x")
	}
}

func TestIDsAreNotReusedAfterCrash(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, DurabilityProcess)
	seen := map[uint32]bool{}
	for range 10 {
		n, err := s.nextSeqNum()
		if err != nil {
			t.Fatal(err)
		}
		seen[n] = true
	}
	crash(s)
	s = openTest(t, dir, DurabilityProcess)
	defer s.close()
	for range seqBlock + 10 {
		n, err := s.nextSeqNum()
		if err != nil {
			t.Fatal(err)
		}
		if seen[n] || n == 0 {
			t.Fatalf("id sequence %d handed out twice", n)
		}
		seen[n] = true
	}
}

// RaiseSeq keeps later ids above the given one across a crash that
// comes before any id is handed out, and never lowers the sequence.
func TestRaiseSeqIsDurable(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, DurabilityProcess)
	if err := s.RaiseSeq(3 * seqBlock); err != nil {
		t.Fatal(err)
	}
	crash(s)
	s = openTest(t, dir, DurabilityProcess)
	defer s.close()
	if err := s.RaiseSeq(5); err != nil {
		t.Fatal(err)
	}
	n, err := s.nextSeqNum()
	if err != nil {
		t.Fatal(err)
	}
	if n <= 3*seqBlock {
		t.Fatalf("after RaiseSeq(%d) and a crash, id sequence %d handed out", 3*seqBlock, n)
	}
	if err := s.RaiseSeq(n + 7); err != nil {
		t.Fatal(err)
	}
	if m, err := s.nextSeqNum(); err != nil || m != n+8 {
		t.Fatalf("after RaiseSeq(%d): %d, %v", n+7, m, err)
	}
}

func TestCheckpointsArePrunedAndComplete(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir+"/db", DurabilityProcess)
	defer s.close()
	var last string
	for i := range 5 {
		put(t, s, "k", fmt.Sprint(i))
		p, err := s.checkpoint(context.Background(), dir+"/cp", "")
		if err != nil {
			t.Fatal(err)
		}
		last = p
	}
	entries, _ := os.ReadDir(dir + "/cp")
	if len(entries) != keepCheckpoints {
		t.Fatalf("%d checkpoints kept, want %d", len(entries), keepCheckpoints)
	}
	// The newest checkpoint opens as a store with the last value.
	cp := openTest(t, last, DurabilityProcess)
	defer cp.close()
	mustGet(t, cp, "k", "4")
}

// TestBlockCacheHoldsBlocks guards against pebble charging the memtables
// to the block cache: sized without them, the cache kept nothing, and
// every lookup read its table's blocks from the file again.
func TestBlockCacheHoldsBlocks(t *testing.T) {
	s := openTest(t, t.TempDir(), DurabilityProcess)
	defer s.close()
	// Grow the memtables to their full size (pebble starts them small and
	// doubles them as they fill).
	big := string(make([]byte, 1<<20))
	for i := range 80 {
		put(t, s, fmt.Sprintf("big%02d", i), big)
	}
	for i := range 1000 {
		put(t, s, fmt.Sprintf("k%04d", i), "v")
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for i := range 1000 {
			mustGet(t, s, fmt.Sprintf("k%04d", i), "v")
		}
	}
	m := s.db.Metrics()
	if m.BlockCache.Count == 0 || m.BlockCache.Hits == 0 {
		t.Fatalf("block cache holds %d blocks after 2000 lookups (%d hits, %d misses); want the table's blocks cached",
			m.BlockCache.Count, m.BlockCache.Hits, m.BlockCache.Misses)
	}
}

// TestSortedBatchKeepsTheLastChange commits random batches of sets and
// deletes over a few keys, repeated keys included, through the store
// (which sorts them) and straight into pebble, and compares the results.
func TestSortedBatchKeepsTheLastChange(t *testing.T) {
	dir := t.TempDir()
	sorted := openTest(t, dir, DurabilityProcess)
	direct := openTest(t, t.TempDir(), DurabilityProcess)
	defer direct.close()
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		b1, b2 := sorted.db.NewBatch(), direct.db.NewBatch()
		for range 1 + rng.IntN(20) {
			k := []byte(fmt.Sprintf("k%d", rng.IntN(8)))
			if rng.IntN(3) == 0 {
				_ = b1.Delete(k, nil)
				_ = b2.Delete(k, nil)
			} else {
				v := []byte(fmt.Sprint(round, rng.Int()))
				_ = b1.Set(k, v, nil)
				_ = b2.Set(k, v, nil)
			}
		}
		if err := sorted.commit(b1); err != nil {
			t.Fatal(err)
		}
		if err := direct.db.Apply(b2, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		b1.Close()
		b2.Close()
		same(t, fmt.Sprint("round ", round), sorted, direct)
	}
	// The log holds the sorted batches: a replay ends where the store was.
	crash(sorted)
	sorted = openTest(t, dir, DurabilityProcess)
	defer sorted.close()
	same(t, "after a crash and replay", sorted, direct)
}

// same fails unless keys k0..k7 read alike in a and b.
func same(t *testing.T, when string, a, b *Store) {
	t.Helper()
	for i := range 8 {
		k := []byte(fmt.Sprintf("k%d", i))
		v1, ok1, _ := a.get(k)
		v2, ok2, _ := b.get(k)
		if ok1 != ok2 || string(v1) != string(v2) {
			t.Fatalf("%s: key %s is %q (%v) through the store, %q (%v) applied as written", when, k, v1, ok1, v2, ok2)
		}
	}
}

// A store of layout version 1 (before staging namespaces) or 2 (before
// pending dims cuts) opens and is marked version 3, its keys kept; a
// newer layout is refused, saying so.
func TestStoreLayoutUpgrade(t *testing.T) {
	for _, from := range []string{"\x00\x00\x00\x01", "\x00\x00\x00\x02"} {
		dir := t.TempDir()
		s := openTest(t, dir, DurabilityProcess)
		put(t, s, "V", from)
		put(t, s, "Fkept", "record")
		s.close()
		s = openTest(t, dir, DurabilityProcess)
		mustGet(t, s, "V", "\x00\x00\x00\x03")
		mustGet(t, s, "Fkept", "record")
		s.close()
	}
	dir := t.TempDir()
	s := openTest(t, dir, DurabilityProcess)
	put(t, s, "V", "\x00\x00\x00\x04")
	s.close()
	s, err := openStore(dir, DurabilityProcess, 1<<20, slog.New(slog.DiscardHandler))
	if err == nil {
		s.close()
	}
	if !errors.Is(err, pdc.ErrVersion) || !strings.Contains(err.Error(), "layout version 4, written by a newer pdc") {
		t.Fatalf("a store of layout version 4 opened or was refused without saying why: %v", err)
	}
}
