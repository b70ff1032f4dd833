package dataserver

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/regionstore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// BenchmarkWriteKnownObject measures what knowing objects' lives costs a
// write: small writes, waited, to an object already known alive
// ("checked") and without the check ("unchecked"), through a real RPC
// server and store. Run both with -count so that they interleave.
func BenchmarkWriteKnownObject(b *testing.B) {
	for _, tc := range []struct {
		name string
		objs Objects
	}{{"unchecked", nil}, {"checked", newFakeObjects()}} {
		b.Run(tc.name, func(b *testing.B) {
			store, err := regionstore.Open(regionstore.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			log := slog.New(slog.DiscardHandler)
			svc := New(Config{Store: store, Logger: log, Objects: tc.objs})
			defer svc.Close()
			srv := rpc.NewServer(rpc.ServerConfig{Logger: log})
			svc.Register(srv)
			ln, err := rpc.Listen("127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			defer func() {
				_ = srv.Close()
				if err := <-served; !errors.Is(err, pdc.ErrClosed) {
					b.Error(err)
				}
			}()
			ctx := context.Background()
			c, err := rpc.Dial(ctx, rpc.Addr(ln.Addr()), rpc.DialOptions{ClientName: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			const rows = 1024
			dims := []uint64{rows, 1024}
			data := make([]byte, 1024*elem) // one row: 4 KiB
			b.SetBytes(int64(len(data)))
			var row uint64
			for b.Loop() {
				box := region.Box{Off: []uint64{row % rows, 0}, Size: []uint64{1, 1024}}
				m := wire.DataStart{Items: []wire.DataItem{item(1, true, dims, box.Off, box.Size)}, Wait: true}
				if _, err := c.Call(ctx, wire.MethodDataStart, m.Marshal(nil), [][]byte{data}, nil); err != nil {
					b.Fatal(err)
				}
				row++
			}
		})
	}
}

// BenchmarkAdmitKnown is the check a write of a known object pays.
func BenchmarkAdmitKnown(b *testing.B) {
	store, err := regionstore.Open(regionstore.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	svc := New(Config{Store: store, Logger: slog.New(slog.DiscardHandler), Objects: newFakeObjects()})
	defer svc.Close()
	items := []wire.DataItem{item(1, true, []uint64{8}, []uint64{0}, []uint64{8})}
	if err := svc.admit(context.Background(), items); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if ok, err := svc.admitNow(items); !ok || err != nil {
			b.Fatal(ok, err)
		}
		svc.mu.Lock()
		err := svc.deadLocked(1)
		svc.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
}
