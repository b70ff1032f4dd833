package metaserver

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// A shrink's commit is visible before its fsync returns. An open in that
// window must not answer the shrink's dims: a data server confirms a
// shrink with an open (Peek) and a client writes through the dims it
// opened, so the rows past the shrink would be cut, and a power loss
// before the fsync brings the old dims back with those rows empty.
func TestOpenInShrinksFsyncHandsOutNoDims(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := openSyncOn(t, fsys)
	ctx := context.Background()
	a := createOne(t, s, "a", []uint64{27})
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
	type answer struct {
		m   wire.ObjectMeta
		err error
	}
	got := make(chan answer, 1)
	go func() {
		b := wire.ObjBatch{Opens: []wire.ObjKey{{ID: a, Peek: true}}}
		resp, err := s.objOpen(ctx, &rpc.Request{Header: b.Marshal(nil), Client: "ds"})
		var res wire.ObjResults
		if err == nil {
			err = res.Unmarshal(resp.Header)
		}
		if err != nil {
			got <- answer{err: err}
			return
		}
		got <- answer{m: res.Items[0].Meta, err: res.Items[0].Code.Err()}
	}()
	var early *answer
	select {
	case a := <-got:
		early = &a
	case <-time.After(300 * time.Millisecond):
	}
	// Power loss now, with the shrink's fsync not done; an open that
	// answered by now answered before it. One that waits answers after
	// the fsync, whatever it answers.
	crashed := mem.CrashClone()
	close(release)
	wg.Wait()
	if early == nil {
		if late := <-got; late.err != nil {
			t.Fatalf("an open after the shrink's fsync: %v", late.err)
		}
	}
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
	if early != nil && early.err == nil && early.m.DimsVersion > m.DimsVersion {
		t.Fatalf("an open during the shrink's fsync answered dims %v (version %d); after a power loss then the object has dims %v (version %d)",
			early.m.Props.Dims, early.m.DimsVersion, m.Props.Dims, m.DimsVersion)
	}
}
