package metastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
)

const faultDir = "/data/meta-0"

func openFS(t testing.TB, fsys vfs.FS, d Durability) (*Store, error) {
	t.Helper()
	return openStoreFS(fsys, faultDir, d, 1<<20, 0, slog.New(slog.DiscardHandler))
}

func mustOpenFS(t testing.TB, fsys vfs.FS, d Durability) *Store {
	t.Helper()
	s, err := openFS(t, fsys, d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func smallLog(t testing.TB) {
	old := walRotateBytes
	walRotateBytes = 16 << 10 // a rotation, with a flush, every dozen commits
	t.Cleanup(func() { walRotateBytes = old })
}

func faultKey(i int) []byte { return []byte(fmt.Sprintf("key-%05d", i)) }

func faultValue(i int) []byte { return []byte(strings.Repeat(fmt.Sprintf("value %d;", i), 120)) }

// checkAcked fails unless every key in acked reads back with its value.
func checkAcked(t testing.TB, s *Store, acked []int, when string) {
	t.Helper()
	for _, i := range acked {
		v, ok, err := s.get(faultKey(i))
		if err != nil || !ok || string(v) != string(faultValue(i)) {
			t.Fatalf("%s: acknowledged key %d: found %v, %v", when, i, ok, err)
		}
	}
}

// The store runs on an in-memory FS through pebble's adapter: what it
// acknowledges survives closing and a crash of either kind.
func TestStoreOnMemFS(t *testing.T) {
	smallLog(t)
	for _, d := range []Durability{DurabilityProcess, DurabilitySync} {
		mem := vfs.NewMem()
		s := mustOpenFS(t, mem, d)
		var acked []int
		for i := range 100 {
			b := s.db.NewBatch()
			_ = b.Set(faultKey(i), faultValue(i), nil)
			if err := s.commit(b); err != nil {
				t.Fatal(err)
			}
			b.Close()
			acked = append(acked, i)
		}
		crashed := mem.Clone()
		if d == DurabilitySync {
			crashed = mem.CrashClone()
		}
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
		for when, fsys := range map[string]vfs.FS{"reopened": mem, "after a crash": crashed} {
			s := mustOpenFS(t, fsys, d)
			checkAcked(t, s, acked, d.String()+" "+when)
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Every write path of the store failing (ENOSPC, EIO, short writes) at
// every kind of operation on its log, pebble's tables and pebble's MANIFEST:
// commits fail with the error, never kill the process; what was
// acknowledged reads back throughout; commits work again once the fault
// is gone; and everything acknowledged is there after a reopen.
func TestStoreFaults(t *testing.T) {
	smallLog(t)
	// Every operation each file of the store sees after it opens.
	cases := []struct {
		op    vfs.Op
		path  string
		after int
	}{
		{vfs.OpWrite, walFile, 3}, {vfs.OpSync, walFile, 3}, {vfs.OpCreate, walFile, 1},
		{vfs.OpFallocate, walFile, 1}, {vfs.OpRename, walFile, 1},
		{vfs.OpCreate, ".sst", 1}, {vfs.OpWrite, ".sst", 1}, {vfs.OpSync, ".sst", 1},
		{vfs.OpWrite, "MANIFEST", 1}, {vfs.OpSync, "MANIFEST", 1},
		{vfs.OpSyncDir, faultDir, 1}, {vfs.OpRemove, "", 1}, {vfs.OpWrites, "", 5},
	}
	injected, checked := 0, 0
	for j, errno := range []error{syscall.ENOSPC, syscall.EIO} {
		for i, c := range cases {
			// Each case once with ENOSPC and once with EIO, one of them
			// under each durability.
			for _, d := range []Durability{Durability((i + j) % 2)} {
				name := fmt.Sprintf("%s/%v/%q/%s", errName(errno), c.op, c.path, d)
				n, k := storeFaultCase(t, name, vfs.Rule{Ops: c.op, Path: c.path, After: c.after, Count: 3, Err: errno, Short: true}, d)
				if n == 0 {
					t.Errorf("%s: no fault injected", name)
				}
				injected += n
				checked += k
			}
		}
	}
	t.Logf("%d faults injected, %d acknowledged commits checked, 0 lost", injected, checked)
}

func errName(err error) string {
	if errors.Is(err, syscall.ENOSPC) {
		return "ENOSPC"
	}
	return "EIO"
}

func storeFaultCase(t *testing.T, name string, r vfs.Rule, d Durability) (injected, checked int) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := mustOpenFS(t, fsys, d)
	errno := r.Err
	fsys.Inject(r)
	var acked []int
	stuck := false
	i := 0
	for ; i < 80; i++ {
		b := s.db.NewBatch()
		_ = b.Set(faultKey(i), faultValue(i), nil)
		err := s.commit(b)
		b.Close()
		if err == nil {
			acked = append(acked, i)
			continue
		}
		if !errors.Is(err, errno) && !errors.Is(err, pdc.ErrClosed) {
			t.Fatalf("%s: commit %d: %v; want the injected %v", name, i, err, errno)
		}
		stuck = stuck || strings.Contains(err.Error(), "until the server restarts")
	}
	for _, n := range fsys.Injected() {
		injected += n
	}
	checkAcked(t, s, acked, name+": with faults")
	fsys.Clear()
	if stuck {
		// Pebble's MANIFEST could not be synced: the store takes no writes
		// until a restart, which finds everything acknowledged. The stuck
		// store is left as a dead process would leave it.
		leaveStuck()
		s2 := mustOpenFS(t, mem.Clone(), d)
		checkAcked(t, s2, acked, name+": after the restart a failed MANIFEST fsync asks for")
		s2.close()
		return injected, 2 * len(acked)
	}
	// The fault is gone: commits work again. The first ones may find
	// pebble still pausing before it retries the failed file, and fail
	// with the old error; how long that takes is pebble's and the
	// machine's, so the test waits for it under a generous deadline (a
	// hundred tries in a row used to pass or fail with the load).
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b := s.db.NewBatch()
		_ = b.Set(faultKey(i), faultValue(i), nil)
		err = s.commit(b)
		b.Close()
		if err == nil {
			acked = append(acked, i)
			break
		}
		if time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("%s: commits still fail once the fault is gone: %v", name, err)
	}
	crashed := mem.Clone()
	if d == DurabilitySync {
		crashed = mem.CrashClone()
	}
	if err := s.close(); err != nil {
		t.Fatalf("%s: close: %v", name, err)
	}
	for when, fs := range map[string]vfs.FS{"reopened": mem, "after a crash": crashed} {
		s := mustOpenFS(t, fs, d)
		checkAcked(t, s, acked, name+": "+when)
		s.close()
	}
	return injected, 3 * len(acked)
}

// A crash at any point of a run of commits (a power loss under sync
// durability, the death of the process under process durability) loses
// nothing acknowledged before it: the store reopens over what survives
// and finds every commit that had returned.
func TestStoreCrashes(t *testing.T) {
	smallLog(t)
	for _, d := range []Durability{DurabilityProcess, DurabilitySync} {
		mem := vfs.NewMem()
		fsys := vfs.NewFaulty(mem)
		s := mustOpenFS(t, fsys, d)
		var acked atomic.Int64
		type point struct {
			fs    *vfs.MemFS
			acked int
			op    string
		}
		var points []point
		seen := 0
		fsys.OnOp(func(op vfs.Op, path string) {
			seen++
			if seen%5 != 0 {
				return
			}
			// Taken on whichever goroutine does the operation: every commit
			// that had returned by now must survive.
			a := int(acked.Load())
			c := mem.Clone()
			if d == DurabilitySync {
				c = mem.CrashClone()
			}
			points = append(points, point{c, a, op.String() + " " + path})
		})
		for i := range 150 {
			b := s.db.NewBatch()
			_ = b.Set(faultKey(i), faultValue(i), nil)
			if err := s.commit(b); err != nil {
				t.Fatal(err)
			}
			b.Close()
			acked.Add(1)
		}
		fsys.OnOp(nil)
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
		for _, p := range points {
			s, err := openFS(t, p.fs, d)
			if err != nil {
				t.Fatalf("%s: reopen after a crash before %s: %v", d, p.op, err)
			}
			want := make([]int, p.acked)
			for i := range want {
				want[i] = i
			}
			checkAcked(t, s, want, fmt.Sprintf("%s: crash before %s with %d acknowledged", d, p.op, p.acked))
			s.close()
		}
		t.Logf("%s: %d crash points, each reopened and checked", d, len(points))
	}
}

// Opening an existing store on a disk that fails (ENOSPC, EIO) at any one
// of the operations of the open fails with an error, or opens a store
// that has everything acknowledged and takes commits; it never ends the
// process (pebble would, on some failed writes of its MANIFEST).
func TestStoreOpenFaults(t *testing.T) {
	smallLog(t)
	mem := vfs.NewMem()
	s := mustOpenFS(t, mem, DurabilityProcess)
	var acked []int
	for i := range 40 {
		b := s.db.NewBatch()
		_ = b.Set(faultKey(i), faultValue(i), nil)
		if err := s.commit(b); err != nil {
			t.Fatal(err)
		}
		b.Close()
		acked = append(acked, i)
	}
	crashed := mem.Clone() // with records to replay, as after kill -9
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	// Count the operations of an open.
	f := vfs.NewFaulty(crashed.Clone())
	s = mustOpenFS(t, f, DurabilityProcess)
	ops := int(f.Ops())
	s.close()
	failed, opened := 0, 0
	// Not a failed fsync of pebble's MANIFEST: pebble ends the process on
	// that while it opens, and that may not be retried (the design
	// record's residual risk). Failed fsyncs of the log are tried.
	rules := []vfs.Rule{{Ops: vfs.OpWrites &^ vfs.OpSync}, {Ops: vfs.OpSync, Path: walFile}}
	// ENOSPC at even operations, EIO at odd ones.
	for _, errno := range []error{syscall.ENOSPC, syscall.EIO} {
		for n, rule := 0, 0; rule < len(rules); n++ {
			if n >= ops {
				n, rule = -1, rule+1
				continue
			}
			if (n%2 == 0) != (errno == syscall.ENOSPC) {
				continue
			}
			f := vfs.NewFaulty(crashed.Clone())
			r := rules[rule]
			r.After, r.Count, r.Err, r.Short = n, 1, errno, true
			f.Inject(r)
			s, err := openFS(t, f, DurabilityProcess)
			if err != nil {
				if !errors.Is(err, errno) {
					t.Fatalf("open with %s at write op %d: %v", errName(errno), n, err)
				}
				failed++
				continue
			}
			opened++
			checkAcked(t, s, acked, fmt.Sprintf("opened with %s at write op %d", errName(errno), n))
			// The fault may fall on the first commit instead: it fails
			// with it, and the next one works.
			for try := 0; ; try++ {
				b := s.db.NewBatch()
				_ = b.Set([]byte("after"), []byte("x"), nil)
				err := s.commit(b)
				b.Close()
				if err == nil {
					break
				}
				if try > 0 || !errors.Is(err, errno) {
					t.Fatalf("opened with %s at write op %d: commit: %v", errName(errno), n, err)
				}
			}
			s.close()
		}
	}
	t.Logf("%d opens failed cleanly, %d opened whole, over %d operations of an open", failed, opened, ops)
}

// A commit whose fsync fails is applied all the same, and says so
// (ErrUnsynced); a commit that fails before it is applied does not. The
// next commit that succeeds makes the unsynced one durable too: what is
// built on the store (tombstones of deletes, retried creates) relies on
// both.
func TestUnsyncedCommitIsAppliedAndMadeDurableByTheNext(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := mustOpenFS(t, fsys, DurabilitySync)
	defer s.close()
	commit := func(i int) error {
		b := s.db.NewBatch()
		defer b.Close()
		_ = b.Set(faultKey(i), faultValue(i), nil)
		return s.commit(b)
	}
	if err := commit(0); err != nil {
		t.Fatal(err)
	}
	remove := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Path: walFile, Count: 1, Err: syscall.EIO})
	err := commit(1)
	remove()
	if !errors.Is(err, ErrUnsynced) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("commit with a failed fsync: %v; want EIO and ErrUnsynced", err)
	}
	checkAcked(t, s, []int{1}, "after the failed fsync")

	restore := s.FailCommits()
	err = commit(2)
	restore()
	if err == nil || errors.Is(err, ErrUnsynced) {
		t.Fatalf("commit that could not be logged: %v; want an error without ErrUnsynced", err)
	}
	if _, ok, _ := s.get(faultKey(2)); ok {
		t.Fatal("a commit that failed before it was logged is applied")
	}

	if err := commit(3); err != nil {
		t.Fatal(err)
	}
	crashed := mustOpenFS(t, mem.CrashClone(), DurabilitySync)
	defer crashed.close()
	checkAcked(t, crashed, []int{0, 1, 3}, "after a power loss that followed the next commit")
}

// Settle makes what a commit whose fsync failed applied durable, with a
// commit of its own, and fails while the disk still fails: a retry that
// finds its change applied may acknowledge it only then.
func TestSettleMakesAnUnsyncedCommitDurable(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := mustOpenFS(t, fsys, DurabilitySync)
	defer s.close()
	if err := s.Settle(); err != nil {
		t.Fatalf("settle with nothing to sync: %v", err)
	}
	remove := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Path: walFile, Err: syscall.EIO})
	b := s.db.NewBatch()
	_ = b.Set(faultKey(1), faultValue(1), nil)
	if err := s.commit(b); !errors.Is(err, ErrUnsynced) {
		t.Fatalf("commit with a failed fsync: %v; want ErrUnsynced", err)
	}
	b.Close()
	if err := s.Settle(); !errors.Is(err, ErrUnsynced) {
		t.Fatalf("settle while the disk fails: %v; want ErrUnsynced", err)
	}
	remove()
	if err := s.Settle(); err != nil {
		t.Fatalf("settle once the disk works: %v", err)
	}
	crashed := mustOpenFS(t, mem.CrashClone(), DurabilitySync)
	defer crashed.close()
	checkAcked(t, crashed, []int{1}, "after a power loss that followed the settle")
}

// AwaitDurable returns once what was applied before it is durable: during
// a commit's fsync it waits for it (a context already done fails it at
// once, so no timer decides), after a failed fsync it settles, and while
// the disk fails it fails with ErrUnsynced. A power-loss image taken
// after it returned holds the change.
func TestAwaitDurableWaitsForTheSyncsOfWhatWasApplied(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := mustOpenFS(t, fsys, DurabilitySync)
	defer s.close()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.AwaitDurable(done); err != nil {
		t.Fatalf("with nothing applied and not durable: %v", err)
	}
	// A commit in its fsync.
	committed, release := commitInFsync(fsys, s)
	if err := s.AwaitDurable(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("during a commit's fsync with a context done: %v; want it to wait (context canceled)", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- s.AwaitDurable(context.Background()) }()
	close(release)
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("once the fsync is done: %v", err)
	}
	fsys.OnOp(nil)
	// A commit whose fsync failed.
	remove := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Err: syscall.EIO})
	b := s.db.NewBatch()
	_ = b.Set(faultKey(2), faultValue(2), nil)
	if err := s.commit(b); !errors.Is(err, ErrUnsynced) {
		t.Fatalf("commit with a failed fsync: %v; want ErrUnsynced", err)
	}
	b.Close()
	if err := s.AwaitDurable(context.Background()); !errors.Is(err, ErrUnsynced) {
		t.Fatalf("while the disk fails: %v; want ErrUnsynced", err)
	}
	remove()
	if err := s.AwaitDurable(context.Background()); err != nil {
		t.Fatalf("once the disk works: %v", err)
	}
	crashed := mustOpenFS(t, mem.CrashClone(), DurabilitySync)
	defer crashed.close()
	checkAcked(t, crashed, []int{1, 2}, "after a power loss that followed AwaitDurable")
}

// SettleContext returns at its context's end while the commit that
// settles the store cannot finish (a disk that stalls after a failed
// sync), and callers meanwhile join that one commit rather than make one
// each. Once the disk works, the settle ends, and what it made durable
// survives a power loss. (Settle, which takes no context, waited for the
// disk: every read after a failed sync did.)
func TestSettleContextGivesUpOnAStalledDiskAndIsJoined(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := mustOpenFS(t, fsys, DurabilitySync)
	remove := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Path: walFile, Err: syscall.EIO})
	b := s.db.NewBatch()
	_ = b.Set(faultKey(1), faultValue(1), nil)
	if err := s.commit(b); !errors.Is(err, ErrUnsynced) {
		t.Fatalf("commit with a failed fsync: %v; want ErrUnsynced", err)
	}
	b.Close()
	remove()
	var first sync.Once
	stalled, release := make(chan struct{}), make(chan struct{})
	fsys.OnOp(func(op vfs.Op, _ string) {
		if op == vfs.OpSync || op == vfs.OpSyncDir {
			first.Do(func() { close(stalled) })
			<-release
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 3)
	go func() { gaveUp <- s.SettleContext(ctx) }()
	<-stalled
	s.settleMu.Lock()
	settling := s.settling
	s.settleMu.Unlock()
	for range 2 {
		go func() { gaveUp <- s.SettleContext(ctx) }()
	}
	cancel()
	for range 3 {
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled while the disk stalls: %v; want the context's error", err)
		}
	}
	s.settleMu.Lock()
	joined := s.settling == settling
	s.settleMu.Unlock()
	if settling == nil || !joined {
		t.Fatalf("the settle under way was %p, then %p: callers did not join one", settling, s.settling)
	}
	close(release)
	<-settling.done
	fsys.OnOp(nil)
	if settling.err != nil {
		t.Fatalf("the settle once the disk works: %v", settling.err)
	}
	if err := s.SettleContext(context.Background()); err != nil {
		t.Fatalf("once settled: %v", err)
	}
	crashed := mustOpenFS(t, mem.CrashClone(), DurabilitySync)
	defer crashed.close()
	checkAcked(t, crashed, []int{1}, "after a power loss that followed the settle")
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
}

// Reads that wait for durability during a commit's fsync and give up at
// their deadline leave nothing behind. Each AwaitDurable started a
// goroutine to wait for the fsync, which outlived its caller for as long
// as the fsync took: on a stalled disk they grew with the requests. And
// with no fsync under way (a commit applied, its committer not yet
// waiting), a waiter still gets one made.
func TestAwaitDurableLeavesNoGoroutinePerWaiter(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := mustOpenFS(t, fsys, DurabilitySync)
	defer s.close()
	committed, release := commitInFsync(fsys, s)
	before := runtime.NumGoroutine()
	const waiters = 64
	for range waiters {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // its deadline passed while it waited
		if err := s.AwaitDurable(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("during a stalled fsync with a context done: %v; want it to wait (context canceled)", err)
		}
	}
	if grown := runtime.NumGoroutine() - before; grown >= waiters/2 {
		t.Errorf("%d waiters that gave up left %d more goroutines", waiters, grown)
	}
	close(release)
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	fsys.OnOp(nil)

	// Applied, and its committer not waiting for the fsync.
	b := s.NewBatch()
	b.Set(faultKey(2), faultValue(2))
	if _, err := s.CommitApply(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := s.AwaitDurable(context.Background()); err != nil {
		t.Fatalf("with no fsync under way: %v", err)
	}
	crashed := mustOpenFS(t, mem.CrashClone(), DurabilitySync)
	defer crashed.close()
	checkAcked(t, crashed, []int{1, 2}, "after a power loss that followed AwaitDurable")
}

// commitInFsync commits one key on a goroutine of its own and returns once
// that commit is in the log's fsync, which holds until release is closed;
// committed has the commit's result.
func commitInFsync(fsys *vfs.Faulty, s *Store) (committed <-chan error, release chan struct{}) {
	var armed sync.Once
	syncing, release := make(chan struct{}), make(chan struct{})
	fsys.OnOp(func(op vfs.Op, path string) {
		if op == vfs.OpSync && strings.Contains(path, walFile) {
			armed.Do(func() {
				close(syncing)
				<-release
			})
		}
	})
	done := make(chan error, 1)
	go func() {
		b := s.db.NewBatch()
		defer b.Close()
		_ = b.Set(faultKey(1), faultValue(1), nil)
		done <- s.commit(b)
	}()
	<-syncing
	return done, release
}
