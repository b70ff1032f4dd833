package metaserver

import (
	"context"
	"errors"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// crashAtCut is fakeCuts that takes a power-loss image of the metadata
// server's file system the first time a data server applies a cut: what
// the metadata server would find if it lost power right then.
type crashAtCut struct {
	*fakeCuts
	mem     *vfs.MemFS
	once    sync.Once
	crashed *vfs.MemFS
}

func (f *crashAtCut) CallData(ctx context.Context, rank int, m wire.Method, hdr []byte) error {
	if err := f.fakeCuts.CallData(ctx, rank, m, hdr); err != nil || m != wire.MethodDataCut {
		return err
	}
	f.once.Do(func() { f.crashed = f.mem.CrashClone() })
	return nil
}

// A shrink whose fsync failed is applied (visible) but may be lost in a
// power loss; its pending cut must not reach a data server before it is
// durable. Else the next set dims of the object pushes the cut, the data
// servers cut the rows past the shrink, and a power loss before any
// later commit brings back the old dims with those rows gone: rows that
// were written and acknowledged, under dims that are the object's again.
func TestUnsyncedShrinkIsNotPushedBeforeDurable(t *testing.T) {
	mem := vfs.NewMem()
	s := openSyncOn(t, mem)
	ctx := context.Background()
	data := &crashAtCut{fakeCuts: newFakeCuts(), mem: mem}
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	a := createOne(t, s, "a", []uint64{4})
	if _, err := s.objSetDims(ctx, setDimsReq(a, 27)); err != nil {
		t.Fatal(err)
	}
	restore := failSyncs(s)
	if _, err := s.objSetDims(ctx, setDimsReq(a, 8)); !errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("a shrink whose fsync failed: %v, want an error wrapping ErrUnsynced", err)
	}
	// The next set dims (a regrow), with the log still failing its
	// syncs, delivers the shrink's pending cut first; power is lost as
	// the first data server applies it, or after the set dims if none
	// does.
	_, _ = s.objSetDims(ctx, setDimsReq(a, 26))
	if data.crashed == nil {
		data.crashed = mem.CrashClone()
	}
	restore()
	crash(s)
	s = openSyncOn(t, data.crashed)
	defer s.Close()
	m, _, err := s.loadObjByID(a)
	if err != nil {
		t.Fatal(err)
	}
	for rank := range 2 {
		for _, v := range data.versions(rank) {
			if v > m.DimsVersion {
				t.Errorf("data server %d applied the cut of dims version %d, and after a power loss the object has dims %v of version %d: the rows it cut are lost under dims that hold them",
					rank, v, m.Props.Dims, m.DimsVersion)
			}
		}
	}
}

// A shrink's commit is visible before its fsync returns. A concurrent set
// dims of the object that meets the pending cut in that window must not
// push it: a power loss before the fsync takes the shrink back, and the
// data servers would have cut rows under dims that hold them.
func TestShrinkInItsFsyncIsNotPushed(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := openSyncOn(t, fsys)
	ctx := context.Background()
	data := newFakeCuts()
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	a := createOne(t, s, "a", []uint64{4})
	if _, err := s.objSetDims(ctx, setDimsReq(a, 27)); err != nil {
		t.Fatal(err)
	}
	// The next fsync blocks until released.
	var armed sync.Once
	syncing, release := make(chan struct{}), make(chan struct{})
	fsys.OnOp(func(op vfs.Op, _ string) {
		if op == vfs.OpSync {
			armed.Do(func() {
				close(syncing)
				<-release
			})
		}
	})
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = s.objSetDims(ctx, setDimsReq(a, 8)) })
	<-syncing
	wg.Go(func() { _, _ = s.objSetDims(ctx, setDimsReq(a, 26)) })
	time.Sleep(300 * time.Millisecond)
	// Power loss now, with the shrink's fsync not done. The pushes are
	// read first: each was made before the power-loss image.
	pushed := append(data.versions(0), data.versions(1)...)
	crashed := mem.CrashClone()
	close(release)
	wg.Wait()
	fsys.OnOp(nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSyncOn(t, crashed)
	defer s.Close()
	m, _, err := s.loadObjByID(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range pushed {
		if v > m.DimsVersion {
			t.Fatalf("a data server applied the cut of dims version %d before its fsync; after a power loss the object has dims %v of version %d",
				v, m.Props.Dims, m.DimsVersion)
		}
	}
}

// The retrier of pending cuts takes the cut of a shrink whose fsync
// failed, and must push it only once the store has made it durable: a
// power loss while syncs still fail brings back the old dims, under
// which the rows a pushed cut dropped were acknowledged. Once syncs work
// again it pushes the cut, with no further set dims of the object.
func TestRetrierPushesUnsyncedShrinkOnceDurable(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := openSyncOn(t, fsys)
	ctx := context.Background()
	data := &crashAtCut{fakeCuts: newFakeCuts(), mem: mem}
	if err := s.StartTombstones(data); err != nil {
		t.Fatal(err)
	}
	a := createOne(t, s, "a", []uint64{4})
	if _, err := s.objSetDims(ctx, setDimsReq(a, 27)); err != nil {
		t.Fatal(err)
	}
	// Every fsync fails (EIO) until restored: the log's, and pebble's
	// that a fresh log would need first.
	restore := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Err: syscall.EIO})
	if _, err := s.objSetDims(ctx, setDimsReq(a, 8)); !errors.Is(err, metastore.ErrUnsynced) {
		restore()
		t.Fatalf("a shrink whose fsync failed: %v, want an error wrapping ErrUnsynced", err)
	}
	// A few rounds of the retrier (0.5 s, 1 s) with syncs still failing.
	time.Sleep(2 * time.Second)
	pushed := append(data.versions(0), data.versions(1)...)
	restore()
	if len(pushed) > 0 {
		t.Fatalf("cuts of versions %v pushed while the shrink (version 2) was not durable", pushed)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := s.pendingCut(a)
		if err != nil {
			t.Fatal(err)
		}
		if c == nil && s.PendingCuts() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after syncs work again, the shrink's cut is still pending (%v); pushed %v, %v", c, data.versions(0), data.versions(1))
		}
	}
	for rank := range 2 {
		if v := slices.Compact(data.versions(rank)); !slices.Equal(v, []uint64{2}) {
			t.Errorf("rank %d applied cuts of versions %v, want [2]", rank, v)
		}
	}
	// Power lost as the first data server applied the cut: the shrink
	// was durable by then.
	crash(s)
	s = openSyncOn(t, data.crashed)
	defer s.Close()
	m, _, err := s.loadObjByID(a)
	if err != nil {
		t.Fatal(err)
	}
	if m.DimsVersion < 2 {
		t.Fatalf("a data server applied the cut of version 2; after a power loss then the object has dims %v of version %d", m.Props.Dims, m.DimsVersion)
	}
}

// A data server confirms dims that may cut its data (a shrink newer than
// any it saw) with an open (Peek) before it applies them. An open must
// not answer the dims of a set dims whose fsync failed while they may
// still be lost: the data server would cut the rows past the shrink, and
// a power loss would bring the old dims back with those rows empty.
func TestOpenHandsOutNoUnsyncedDims(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := openSyncOn(t, fsys)
	defer s.Close()
	ctx := context.Background()
	a := createOne(t, s, "a", []uint64{27})
	restore := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Err: syscall.EIO})
	if _, err := s.objSetDims(ctx, setDimsReq(a, 8)); !errors.Is(err, metastore.ErrUnsynced) {
		restore()
		t.Fatalf("a shrink whose fsync failed: %v, want an error wrapping ErrUnsynced", err)
	}
	peek := func() (*wire.ObjectMeta, error) {
		b := wire.ObjBatch{Opens: []wire.ObjKey{{ID: a, Peek: true}}}
		resp, err := s.objOpen(ctx, &rpc.Request{Header: b.Marshal(nil), Client: "ds"})
		if err != nil {
			return nil, err
		}
		var res wire.ObjResults
		if err := res.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		return &res.Items[0].Meta, nil
	}
	m, err := peek()
	restore()
	if err == nil {
		t.Fatalf("an open with the shrink not durable answered dims %v (version %d)", m.Props.Dims, m.DimsVersion)
	}
	if !errors.Is(err, metastore.ErrUnsynced) {
		t.Fatalf("an open with the shrink not durable: %v, want an error wrapping ErrUnsynced", err)
	}
	// Once a commit makes it durable, the open answers it.
	if m, err = peek(); err != nil || m.DimsVersion != 1 || m.Props.Dims[0] != 8 {
		t.Fatalf("an open once syncs work again: %+v, %v; want dims [8] version 1", m, err)
	}
}
