package metaserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// probeDone runs rd with a context already done, as a read whose deadline
// passed while it waits: one that must wait fails at once with the
// context's error. The timer only ends a probe stuck on a lock that
// ignores its context; what passes does not depend on it.
func probeDone(t *testing.T, s *Service, what string, rd storeRead, unblock func()) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	type answer struct {
		got string
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		got, err := rd(ctx, s)
		ch <- answer{got, err}
	}()
	select {
	case a := <-ch:
		return a.got, a.err
	case <-time.After(10 * time.Second):
		unblock()
		a := <-ch
		t.Fatalf("%s: still waiting 10s past its deadline, for a lock held through a stalled fsync (answered %q, %v once released)", what, a.got, a.err)
		return "", nil
	}
}

// A delete, a set dims and a container's lifetime change hold lifeMu
// through their fsync, and a set dims dimsMu too; on a stalled disk,
// reads queued behind them must give up at their deadline. Each change
// here is held in its fsync, and each read (of another object, which
// waits for the lock and nothing else) is probed with a context already
// done: it must fail at once with the context's error. Before, the locks
// were sync.RWMutexes, and the reads waited past their deadline for as
// long as the disk stalled (here until the test's timer released it).
func TestReadsGiveUpOnALockHeldThroughAStalledFsync(t *testing.T) {
	a, b := objNamed("a"), objNamed("b")
	lifetime := func(s *Service) error {
		_, err := call(s, contLifetimeH, &wire.ContCreate{Name: "c", Lifetime: 1})
		return err
	}
	ofB := map[string]storeRead{
		"tag get":           readTagGet(kindObject, b, "k"),
		"tag list":          readTagList(kindObject, b),
		"region query":      readRegion(b),
		"region query, all": readRegions(b),
	}
	withOpen := map[string]storeRead{"open": readOpen(func(*Service) wire.ObjKey { return wire.ObjKey{Name: "b"} })}
	for k, v := range ofB {
		withOpen[k] = v
	}
	steps := []struct {
		name   string
		change storeChange
		reads  map[string]storeRead
	}{
		{"object delete", deleteObjNamed("a"), ofB},
		{"set dims", growDims(a), withOpen},
		{"container lifetime change", lifetime, ofB},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fsys := vfs.NewFaulty(mem)
			s := openSyncOn(t, fsys)
			setupAll(createContNamed("c"), createObjNamed("a"), createObjNamed("b"), putTagOn(kindObject, b, "k", 1), placeOn(b, 0))(t, s)
			syncing, release := holdWALSync(fsys)
			released := false
			unblock := func() {
				if !released {
					released = true
					close(release)
				}
			}
			var changeErr error
			changed := make(chan struct{})
			go func() {
				defer close(changed)
				changeErr = st.change(s)
			}()
			defer func() {
				unblock()
				<-changed
				fsys.OnOp(nil)
				s.Close()
			}()
			<-syncing
			for what, rd := range st.reads {
				got, err := probeDone(t, s, what+" of b", rd, unblock)
				if !errors.Is(err, context.Canceled) {
					t.Errorf("%s of b during the fsync of a %s: %q, %v; want the context's error", what, st.name, got, err)
				}
			}
			unblock()
			<-changed
			if changeErr != nil {
				t.Fatalf("the %s: %v", st.name, changeErr)
			}
			for what, rd := range st.reads {
				if _, err := rd(context.Background(), s); err != nil {
					t.Errorf("%s of b once the %s is durable: %v", what, st.name, err)
				}
			}
		})
	}
}

// A delete of object a queued for lifeMu behind a tag put on a in its
// fsync holds back no region query or tag get of object b: they only
// look, and the tag put keeps the delete out anyway. Before, lifeMu was a
// sync.RWMutex, whose queued writer kept every new reader out: every
// query of every object waited for the tag put's fsync, then the
// delete's. A tag put on b still queues behind the delete (it commits
// under the lock, and such writes must not keep a delete out for ever).
func TestQueriesGoPastADeleteQueuedBehindAnFsync(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := openSyncOn(t, fsys)
	a, b := objNamed("a"), objNamed("b")
	setupAll(createObjNamed("a"), createObjNamed("b"), putTagOn(kindObject, b, "k", 1), placeOn(b, 0))(t, s)
	ctx := context.Background()
	wantRegion, err := readRegion(b)(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	wantTag, err := readTagGet(kindObject, b, "k")(ctx, s)
	if err != nil {
		t.Fatal(err)
	}

	syncing, release := holdWALSync(fsys)
	released := false
	unblock := func() {
		if !released {
			released = true
			close(release)
		}
	}
	var putErr, delErr error
	put, deleted := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(put)
		putErr = putTagOn(kindObject, a, "k", 2)(s)
	}()
	waits := waitsOf(t, &s.lifeMu)
	defer func() {
		unblock()
		<-put
		<-deleted
		fsys.OnOp(nil)
		s.Close()
	}()
	<-syncing
	go func() {
		defer close(deleted)
		delErr = deleteObjNamed("a")(s)
	}()
	if k := <-waits; k != lockWrite {
		t.Fatalf("queued on lifeMu: kind %d, want the delete", k)
	}

	if got, err := probeDone(t, s, "region query of b", readRegion(b), unblock); err != nil || got != wantRegion {
		t.Errorf("a region query of b while a's delete waits behind a tag put's fsync: %q, %v; want %q at once", got, err, wantRegion)
	}
	if got, err := probeDone(t, s, "tag get of b", readTagGet(kindObject, b, "k"), unblock); err != nil || got != wantTag {
		t.Errorf("a tag get of b while a's delete waits behind a tag put's fsync: %q, %v; want %q at once", got, err, wantTag)
	}
	donePut := func(ctx context.Context, s *Service) (string, error) {
		_, err := callCtx(ctx, s, tagPutH, &wire.TagBatch{Puts: []wire.TagPut{{Kind: kindObject, ID: b(s), Name: "j", Type: 1, Value: []byte{1, 0, 0, 0}}}})
		return "", err
	}
	if _, err := probeDone(t, s, "tag put on b", donePut, unblock); !errors.Is(err, context.Canceled) {
		t.Errorf("a tag put on b while a's delete waits: %v; want it to wait behind the delete (context canceled)", err)
	}

	unblock()
	<-put
	<-deleted
	if putErr != nil || delErr != nil {
		t.Fatalf("the tag put on a: %v; the delete of a: %v", putErr, delErr)
	}
	if got, err := readRegion(b)(ctx, s); err != nil || got != wantRegion {
		t.Fatalf("a region query of b after a's delete: %q, %v; want %q", got, err, wantRegion)
	}
}
