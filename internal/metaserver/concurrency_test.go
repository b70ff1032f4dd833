package metaserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

func newSvc(t testing.TB) *Service {
	s, err := Open(Config{Dir: t.TempDir(), CheckpointDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.SetPlacement(0, 1)
	s.SetReady()
	return s
}

func createReq(names ...string) *rpc.Request {
	var b wire.ObjBatch
	for _, n := range names {
		b.Creates = append(b.Creates, wire.ObjCreate{ContID: 1, Name: n, Props: wire.ObjectProps{Dims: []uint64{4}, Type: 1}})
	}
	return &rpc.Request{Header: b.Marshal(nil), Client: "c"}
}

// Concurrent creates of one identity: exactly one may succeed. The
// existence check once used a view of the store taken before the create
// lock, which missed a create committed meanwhile (found in review).
func TestConcurrentCreatesOfOneIdentity(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	ctx := context.Background()
	var stop atomic.Bool
	var wg sync.WaitGroup
	// Background load holding the create claims with big batches.
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			var names []string
			for j := range 2000 {
				names = append(names, fmt.Sprintf("bg-%d-%d", i, j))
			}
			_, _ = s.objCreate(ctx, createReq(names...))
		}
	})
	dups := 0
	for round := range 500 {
		var ok atomic.Int32
		var rw sync.WaitGroup
		for range 4 {
			rw.Go(func() {
				resp, err := s.objCreate(ctx, createReq(fmt.Sprint("dup-", round)))
				if err != nil {
					t.Error(err)
					return
				}
				var r wire.ObjResults
				_ = r.Unmarshal(resp.Header)
				if r.Items[0].Code == 0 {
					ok.Add(1)
				}
			})
		}
		rw.Wait()
		if ok.Load() > 1 {
			dups++
		}
	}
	stop.Store(true)
	wg.Wait()
	if dups > 0 {
		t.Fatalf("%d of 500 identities were created more than once", dups)
	}
}

// A batch that names one identity twice makes it once and answers the
// second item "exists". A create waits for the claim another create
// holds on an identity; its own claim it must not wait for.
func TestCreateBatchWithOneIdentityTwice(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	got, err := createItems(s, objCreate("x", 4), objCreate("y", 4), objCreate("x", 4))
	if err != nil {
		t.Fatal(err)
	}
	made, exists := 0, 0
	for _, i := range []int{0, 2} {
		switch got[i].Code {
		case wire.CodeOK:
			made++
		case wire.CodeExists:
			exists++
		}
	}
	if made != 1 || exists != 1 || got[1].Code != wire.CodeOK {
		t.Fatalf("a batch of x, y, x answered codes %d, %d, %d; want x made once and found once, y made",
			got[0].Code, got[1].Code, got[2].Code)
	}
}

func TestPeekDoesNotOpen(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	ctx := context.Background()
	resp, err := s.objCreate(ctx, createReq("peeked"))
	if err != nil {
		t.Fatal(err)
	}
	var res wire.ObjResults
	_ = res.Unmarshal(resp.Header)
	id := res.Items[0].Meta.ID
	s.opens.close("c", id) // the create opened it
	peek := wire.ObjBatch{Opens: []wire.ObjKey{{ID: id, Peek: true}}}
	if _, err := s.objOpen(ctx, &rpc.Request{Header: peek.Marshal(nil), Client: "c"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.opens.openIn(1); n != 0 {
		t.Fatalf("a peek left %d objects open", n)
	}
	open := wire.ObjBatch{Opens: []wire.ObjKey{{ID: id}}}
	if _, err := s.objOpen(ctx, &rpc.Request{Header: open.Marshal(nil), Client: "c"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.opens.openIn(1); n != 1 {
		t.Fatalf("an open left %d objects open, want 1", n)
	}
}
