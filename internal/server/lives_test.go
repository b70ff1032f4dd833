package server

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/dataserver"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// A data server's question about objects (Lives) tells apart, among the
// objects their metadata server does not find, those it says are deleted
// from those it does not (a delete not yet durable): the dims confirmation
// took "not found" as version 0 and let a start that may cut go on. An
// open answered short (a reply too large) is asked again for the rest.
func TestLivesTellsNotFoundFromGone(t *testing.T) {
	const found, gone, held = 5, 6, 7
	var mu sync.Mutex
	var opens [][]uint64
	srv := rpc.NewServer(rpc.ServerConfig{Logger: slog.New(slog.DiscardHandler)})
	srv.Handle(wire.MethodObjOpen, func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var b wire.ObjBatch
		if err := b.Unmarshal(req.Header); err != nil {
			return nil, err
		}
		var ids []uint64
		for _, k := range b.Opens {
			if !k.Peek {
				t.Errorf("object %d opened without Peek", k.ID)
			}
			ids = append(ids, k.ID)
		}
		mu.Lock()
		opens = append(opens, ids)
		mu.Unlock()
		// One answer at a time, as a server whose reply is full.
		var out wire.ObjResults
		switch id := b.Opens[0].ID; id {
		case found:
			out.Items = []wire.ObjResult{{Meta: wire.ObjectMeta{ID: id, DimsVersion: 3, Props: wire.ObjectProps{Dims: []uint64{4, 16}}}}}
		default:
			out.Items = []wire.ObjResult{{Code: wire.CodeNotFound, Message: "not found"}}
		}
		return rpc.Respond(&out), nil
	})
	srv.Handle(wire.MethodObjGone, func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var q wire.IDList
		if err := q.Unmarshal(req.Header); err != nil {
			return nil, err
		}
		var out wire.IDList
		if slices.Contains(q.IDs, gone) {
			out.IDs = []uint64{gone}
		}
		return rpc.Respond(&out), nil
	})
	ln, err := rpc.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Close()
		<-served
	}()

	list := &cluster.List{Size: 1, Servers: []cluster.Server{{Rank: 0, Addr: rpc.Addr(ln.Addr()), Roles: "both"}}}
	peers := newMetaPeers(t.TempDir(), nil, list)
	defer peers.Close()
	o := newObjects()
	o.start(peers)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lives, err := o.Lives(ctx, []uint64{found, gone, held})
	if err != nil {
		t.Fatal(err)
	}
	want := []dataserver.Life{
		{Found: true, Dims: []uint64{4, 16}, DimsVersion: 3},
		{Gone: true},
		{},
	}
	for i, l := range lives {
		w := want[i]
		if l.Found != w.Found || l.Gone != w.Gone || l.DimsVersion != w.DimsVersion || !slices.Equal(l.Dims, w.Dims) {
			t.Errorf("object %d: %+v, want %+v", []uint64{found, gone, held}[i], l, w)
		}
	}
	mu.Lock()
	if len(opens) != 3 || !slices.Equal(opens[1], []uint64{gone, held}) {
		t.Errorf("opens %v: want three, each asking for the rest", opens)
	}
	mu.Unlock()

	// A metadata server that cannot answer fails the question.
	_ = srv.Close()
	if _, err := o.Lives(ctx, []uint64{found}); err == nil {
		t.Errorf("a metadata server that is gone: %v, want an error", err)
	}
}
