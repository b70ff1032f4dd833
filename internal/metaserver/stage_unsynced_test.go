package metaserver

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// openSyncOn opens a metadata server with sync durability on fsys (nil:
// the operating system's, in a temporary dir).
// holdWALSync makes the next fsync of the metadata log on fsys wait: the
// returned channel is closed once it has begun, and it goes on once the
// other one is closed.
func holdWALSync(fsys *vfs.Faulty) (syncing, release chan struct{}) {
	var armed sync.Once
	syncing, release = make(chan struct{}), make(chan struct{})
	fsys.OnOp(func(op vfs.Op, path string) {
		if op == vfs.OpSync && strings.Contains(path, walPath) {
			armed.Do(func() {
				close(syncing)
				<-release
			})
		}
	})
	return syncing, release
}

// memLogBytes is the metadata log's size in tests on an in-memory file
// system: each sync and each crash image copies the log file, at the
// default 64 MiB minutes of a run under the race detector.
const memLogBytes = 1 << 20

func openSyncOn(t *testing.T, fsys vfs.FS) *Service {
	t.Helper()
	dir, cp := "meta", "checkpoints"
	if fsys == nil {
		dir, cp = t.TempDir(), t.TempDir()
	}
	s, err := Open(Config{Dir: dir, CheckpointDir: cp, FS: fsys, LogBytes: memLogBytes, Durability: metastore.DurabilitySync,
		NoIndex: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.SetPlacement(0, 1)
	s.SetReady()
	return s
}

// produceCRC produces path with a record of checksum crc (standing for
// its bytes) and returns the stored record.
func produceCRC(s *Service, path string, crc uint32) (*wire.StageRecord, error) {
	in := wire.StageBatch{Version: wire.StageVersion, Records: []wire.StageRecord{{Path: path, Host: "node-a", Size: 3, CRC: crc}}}
	resp, err := s.stageProduce(context.Background(), stageReq(&in))
	if err != nil {
		return nil, err
	}
	var out wire.StageBatch
	if err := out.Unmarshal(resp.Header); err != nil {
		return nil, err
	}
	return &out.Records[0], nil
}

func waitOn(ctx context.Context, s *Service, path string, after uint64) (*wire.StageRecord, error) {
	resp, err := s.stageWait(ctx, stageReq(&wire.StageKey{Path: path, After: after, Version: wire.StageVersion}))
	if err != nil {
		return nil, err
	}
	var r wire.StageRecord
	return &r, r.Unmarshal(resp.Header)
}

// sameVersionOtherProduce fails t if a record a consumer was given before
// a power loss and one given after name one version of one path for two
// different produces: a consumer holding the first could not tell them
// apart by version (WithNewerThan, pdc stage consume --newer-than).
func sameVersionOtherProduce(t *testing.T, before, after []*wire.StageRecord) {
	t.Helper()
	for _, b := range before {
		for _, a := range after {
			if a.Path == b.Path && a.Version == b.Version && (a.CRC != b.CRC || a.Produced != b.Produced) {
				t.Fatalf("version %d of %s named the produce of CRC %08x before the power loss and that of CRC %08x after",
					a.Version, a.Path, b.CRC, a.CRC)
			}
		}
	}
}

// A consumer is only ever given a produce's record once it is durable: a
// produce whose fsync failed may be lost in a power loss, and the next
// produce of its path would then get its version again for other bytes,
// so that a consumer holding version N (waiting for one newer than N)
// would take the new N for the one it has. Before, a lookup answered the
// applied record at once.
func TestStageFailedSyncProduceIsNotAnsweredUntilDurable(t *testing.T) {
	mem := vfs.NewMem()
	s := openSyncOn(t, mem)
	if _, err := produceCRC(s, "p", 1); err != nil {
		t.Fatal(err)
	}
	restore := failSyncs(s)
	if _, err := produceCRC(s, "p", 2); !errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("a produce whose fsync failed: %v, want an error wrapping ErrUnsynced", err)
	}
	var seen []*wire.StageRecord
	r, err := lookupOn(s, "p")
	if err == nil {
		seen = append(seen, r)
	} else if !errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("lookup while the produce is not durable: %v, want an error wrapping ErrUnsynced", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	r, err = waitOn(ctx, s, "p", 1)
	cancel()
	if err == nil {
		seen = append(seen, r)
	} else if !errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("wait for a version after 1 while the produce of 2 is not durable: %v, want an error wrapping ErrUnsynced", err)
	}

	// Power loss: only what was synced is left.
	crashed := mem.CrashClone()
	restore()
	crash(s)
	s = openSyncOn(t, crashed)
	defer s.Close()
	var after []*wire.StageRecord
	if r, err := lookupOn(s, "p"); err != nil {
		t.Fatal(err)
	} else {
		after = append(after, r)
	}
	r, err = produceCRC(s, "p", 3)
	if err != nil {
		t.Fatal(err)
	}
	after = append(after, r)
	sameVersionOtherProduce(t, seen, after)
}

// As above, for a produce whose fsync has not returned yet: its record is
// applied (visible to readers) before the fsync, and a power loss then
// loses it. A lookup in that window waits for the fsync.
func TestStageLookupDuringAProducesSyncWaitsForIt(t *testing.T) {
	mem := vfs.NewMem()
	f := vfs.NewFaulty(mem)
	s := openSyncOn(t, f)
	defer func() { f.OnOp(nil) }()
	if _, err := produceCRC(s, "p", 1); err != nil {
		t.Fatal(err)
	}
	// The next fsync of the log stops until released.
	var once sync.Once
	inSync, release := make(chan struct{}), make(chan struct{})
	f.OnOp(func(op vfs.Op, path string) {
		if op == vfs.OpSync && strings.Contains(path, "pdc.wal") {
			once.Do(func() {
				close(inSync)
				<-release
			})
		}
	})
	produced := make(chan error, 1)
	go func() {
		_, err := produceCRC(s, "p", 2)
		produced <- err
	}()
	<-inSync
	looked := make(chan *wire.StageRecord, 1)
	go func() {
		r, err := lookupOn(s, "p")
		if err != nil {
			t.Error(err)
		}
		looked <- r
	}()
	var seen []*wire.StageRecord
	select {
	case r := <-looked:
		seen = append(seen, r)
	case <-time.After(200 * time.Millisecond):
		// Waiting for the fsync, as it should.
	}
	crashed := mem.CrashClone() // power loss before the fsync
	close(release)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 {
		if r := <-looked; r == nil || r.Version != 2 || r.CRC != 2 {
			t.Fatalf("lookup after the produce's fsync: %+v, want version 2", r)
		}
	}
	s.Close()
	s = openSyncOn(t, crashed)
	defer s.Close()
	r, err := produceCRC(s, "p", 3)
	if err != nil {
		t.Fatal(err)
	}
	sameVersionOtherProduce(t, seen, []*wire.StageRecord{r})
}

// Consumers waiting for a path when its produce's fsync fails are woken
// and told: with the error while the store cannot make the record durable,
// with the record once it can. Before, nothing woke them: they waited for
// the path's next produce, or their deadline, while a lookup found it.
func TestStageWaitersOfAProduceWhoseSyncFailed(t *testing.T) {
	// Opened with sync durability: the waiter reads the store's while
	// the syncs are made to fail (failSyncs).
	s := openSyncOn(t, nil)
	defer s.Close()
	type result struct {
		r   *wire.StageRecord
		err error
	}
	wait := func() chan result {
		ch := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := waitOn(ctx, s, "p", 0)
			ch <- result{r, err}
		}()
		return ch
	}
	w := wait()
	awaitWaiters(t, s, waitKey("", "p"))
	restore := failSyncs(s)
	if _, err := produceCRC(s, "p", 2); !errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("a produce whose fsync failed: %v", err)
	}
	select {
	case got := <-w:
		if got.err == nil || errors.Is(got.err, pdc.ErrTimeout) {
			t.Fatalf("a waiter while the store cannot sync: %+v %v, want the store's error", got.r, got.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter of a produce whose fsync failed was not woken")
	}
	restore()
	if got := <-wait(); got.err != nil || got.r.Version != 1 || got.r.CRC != 2 {
		t.Fatalf("a wait once the store syncs again: %+v %v, want version 1", got.r, got.err)
	}
	// The retried produce is answered like any: the next version.
	if r, err := produceCRC(s, "p", 2); err != nil || r.Version != 2 {
		t.Fatalf("retried produce: %+v %v, want version 2", r, err)
	}
}

// A listing shows only durable versions, as a lookup answers: a version
// listed may be named by a consumer (pdc stage ls, then consume
// --newer-than). Before, it listed the record of a produce whose fsync
// failed.
func TestStageListShowsOnlyDurableVersions(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	if _, err := produceCRC(s, "p", 1); err != nil {
		t.Fatal(err)
	}
	restore := failSyncs(s)
	if _, err := produceCRC(s, "p", 2); !errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("a produce whose fsync failed: %v", err)
	}
	list := func() (*wire.StageList, error) {
		resp, err := s.stageList(context.Background(), stageReq(&wire.StageListReq{Version: wire.StageVersion}))
		if err != nil {
			return nil, err
		}
		var out wire.StageList
		return &out, out.Unmarshal(resp.Header)
	}
	if got, err := list(); err == nil {
		t.Fatalf("a listing while the produce of version 2 is not durable: %+v, want an error", got.Records)
	} else if !errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("a listing while the produce of version 2 is not durable: %v, want an error wrapping ErrUnsynced", err)
	}
	restore()
	got, err := list()
	if err != nil || len(got.Records) != 1 || got.Records[0].Version != 2 || got.Records[0].CRC != 2 {
		t.Fatalf("a listing once the store syncs: %+v %v, want version 2", got, err)
	}
}

// Lookups and waits while produces of the same path follow each other
// under sync durability each get a record, in order, without waiting
// for more than the fsync of the produce they met.
func TestStageLookupsDuringProduces(t *testing.T) {
	s := openSyncOn(t, nil)
	defer s.Close()
	const producers, produces = 4, 40
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range producers {
		wg.Go(func() {
			for range produces {
				if _, err := produceCRC(s, "p", 1); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var lookers sync.WaitGroup
	for i := range 4 {
		lookers.Go(func() {
			var last uint64
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				var r *wire.StageRecord
				var err error
				if i%2 == 0 {
					r, err = lookupOn(s, "p")
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					r, err = waitOn(ctx, s, "p", 0)
					cancel()
				}
				if errors.Is(err, pdc.ErrNotFound) && last == 0 {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if r.Version < last {
					t.Errorf("read version %d after %d", r.Version, last)
					return
				}
				last = r.Version
			}
		})
	}
	wg.Wait()
	close(stop)
	lookers.Wait()
	if r, err := lookupOn(s, "p"); err != nil || r.Version != producers*produces {
		t.Fatalf("last version: %+v %v, want %d", r, err, producers*produces)
	}
}

// A produce whose commit fails outright (nothing applied) leaves the mark
// of an earlier produce of its path whose fsync failed: that record is
// still not durable, and is not answered until it is. Before, the failed
// commit took the mark away, and a lookup answered the record.
func TestStageFailedCommitKeepsAnEarlierUnsureProduce(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	restoreSyncs := failSyncs(s)
	if _, err := produceCRC(s, "p", 1); !errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("a produce whose fsync failed: %v", err)
	}
	restoreCommits := failCommits(t, s)
	if _, err := produceCRC(s, "p", 2); err == nil || errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("a produce whose commit failed: %v, want an error not wrapping ErrUnsynced", err)
	}
	restoreCommits()
	if r, err := lookupOn(s, "p"); err == nil {
		t.Fatalf("lookup while the produce of version 1 is not durable: %+v, want an error", r)
	} else if !errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("lookup while the produce of version 1 is not durable: %v, want an error wrapping ErrUnsynced", err)
	}
	restoreSyncs()
	if r, err := lookupOn(s, "p"); err != nil || r.Version != 1 || r.CRC != 1 {
		t.Fatalf("lookup once the store syncs: %+v %v, want version 1", r, err)
	}
}

// The marks of unsure produces, step by step: a commit not applied puts
// back what it replaced, through others not applied either, unless that
// became durable meanwhile.
func TestUnsureStagesMarks(t *testing.T) {
	var u unsureStages
	u.byKey = map[string]*unsureProduce{}
	k := []string{"k"}
	q := u.add(k)
	u.finish(k, q, produceUnsynced)
	p1 := u.add(k)
	p2 := u.add(k) // before p1's commit is known not applied
	u.finish(k, p1, produceNotApplied)
	u.finish(k, p2, produceNotApplied)
	if got := u.get("k"); got != q || u.failed != 1 {
		t.Fatalf("after two commits not applied: mark %p (failed %d), want the failed produce's %p (failed 1)", got, u.failed, q)
	}
	// A produce synced after it covers it, on its key and others.
	o := u.add([]string{"o"})
	u.finish([]string{"o"}, o, produceUnsynced)
	r := u.add(k)
	u.finish(k, r, produceSynced)
	if u.get("k") != nil || u.get("o") != nil || u.failed != 0 || u.n.Load() != 0 {
		t.Fatalf("after a synced produce: k %p, o %p, failed %d, n %d; want no marks", u.get("k"), u.get("o"), u.failed, u.n.Load())
	}
	// One in flight when a commit replacing it is not applied stays
	// marked until its own fsync returns.
	f := u.add(k)
	g := u.add(k)
	u.finish(k, g, produceNotApplied)
	if u.get("k") != f {
		t.Fatal("the mark of a produce in flight was not put back")
	}
	u.finish(k, f, produceSynced)
	if u.get("k") != nil {
		t.Fatal("a synced produce left its mark")
	}
}

// A reader that met a produce in flight whose commit is then not applied
// waits on for the mark that produce replaced: the record it read may be
// that of an earlier produce whose fsync failed, which the one not
// applied made no more durable.
func TestStageReaderOfAProduceNotApplied(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	restore := failSyncs(s)
	defer restore()
	if _, err := produceCRC(s, "p", 1); !errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("a produce whose fsync failed: %v", err)
	}
	key := waitKey("", "p")
	keys := []string{key}
	inFlight := s.stages.unsure.add(keys) // a produce about to commit
	got := make(chan error, 1)
	go func() { got <- s.stages.awaitDurable(context.Background(), "p", key, inFlight) }()
	s.stages.unsure.finish(keys, inFlight, produceNotApplied)
	if err := <-got; !errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("a reader of version 1 that met a produce not applied: %v, want an error wrapping ErrUnsynced", err)
	}
}

// A produce of a path whose removal is in its fsync finds no record and
// takes version 1; it commits after the removal, so it is acknowledged,
// and its record answered, only once the removal is durable too. A
// lookup meanwhile, whether it reads the removal or the produce, waits:
// a power loss then brings back the record the two replaced. Before,
// a lookup that read the removal before the produce was applied
// answered "not produced" at once.
func TestStageProduceRacingARemovalInItsFsync(t *testing.T) {
	mem := vfs.NewMem()
	f := vfs.NewFaulty(mem)
	s := openSyncOn(t, f)
	defer func() { f.OnOp(nil) }()
	first, err := produceCRC(s, "p", 1)
	if err != nil {
		t.Fatal(err)
	}
	// The removal's fsync of the log stops until released.
	var once sync.Once
	inSync, release := make(chan struct{}), make(chan struct{})
	f.OnOp(func(op vfs.Op, path string) {
		if op == vfs.OpSync && strings.Contains(path, walPath) {
			once.Do(func() {
				close(inSync)
				<-release
			})
		}
	})
	removed := make(chan error, 1)
	go func() {
		_, err := call(s, stageRemoveH, &wire.StageRemoveReq{Version: wire.StageVersion, Path: "p"})
		removed <- err
	}()
	<-inSync
	type produced struct {
		r   *wire.StageRecord
		err error
	}
	second := make(chan produced, 1)
	go func() {
		r, err := produceCRC(s, "p", 2)
		second <- produced{r, err}
	}()
	// A context already done: a lookup that waits fails at once.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	lookup := readStageLookup("p")
	early, earlyErr := lookup(done, s)
	lost := mem.CrashClone() // power loss during the removal's fsync
	close(release)
	if err := <-removed; err != nil {
		t.Fatalf("the removal: %v", err)
	}
	got := <-second
	if got.err != nil || got.r.Version != 1 || got.r.CRC != 2 {
		t.Fatalf("a produce after the removal: %+v %v, want version 1 of CRC 2", got.r, got.err)
	}
	acked := mem.CrashClone() // power loss right after the produce's answer
	f.OnOp(nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		fsys vfs.FS
		want *wire.StageRecord
	}{
		{"during the removal's fsync", lost, first},
		{"once the produce is answered", acked, got.r},
	} {
		s := openSyncOn(t, c.fsys)
		r, err := lookupOn(s, "p")
		s.Close()
		if err != nil || r.Version != c.want.Version || r.CRC != c.want.CRC || r.Produced != c.want.Produced {
			t.Fatalf("after a power loss %s: %+v %v, want %+v", c.name, r, err, c.want)
		}
	}
	// During the fsync the store holds neither the first record nor
	// nothing for sure: any answer then a power loss could contradict.
	if !errors.Is(earlyErr, context.Canceled) {
		t.Fatalf("a lookup during the removal's fsync answered %q, %v; want it to wait (context canceled)", early, earlyErr)
	}
}
