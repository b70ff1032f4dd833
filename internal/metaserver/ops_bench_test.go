package metaserver

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// benchObjects creates n objects on s and returns their ids.
func benchObjects(b *testing.B, s *Service, n int) []uint64 {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%d", i)
	}
	resp, err := s.objCreate(context.Background(), createReq(names...))
	if err != nil {
		b.Fatal(err)
	}
	var out wire.ObjResults
	if err := out.Unmarshal(resp.Header); err != nil {
		b.Fatal(err)
	}
	ids := make([]uint64, n)
	for i, r := range out.Items {
		ids[i] = r.Meta.ID
	}
	return ids
}

// BenchmarkOpen, BenchmarkTagPut and BenchmarkTagGet are the open, tag put
// and tag get handlers of pdc bench meta without the RPC around them: their
// allocations per operation are the figures to keep from growing.
func BenchmarkOpen(b *testing.B) {
	s := newSvc(b)
	defer s.Close()
	benchObjects(b, s, 1)
	req := &rpc.Request{Header: (&wire.ObjBatch{Opens: []wire.ObjKey{{Name: "bench-0"}}}).Marshal(nil), Client: "c"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.objOpen(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTagPut(b *testing.B) {
	for _, n := range []int{1, 256} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s := newSvc(b)
			defer s.Close()
			ids := benchObjects(b, s, n)
			ctx := context.Background()
			val := make([]byte, 8)
			var tb wire.TagBatch
			for _, id := range ids {
				tb.Puts = append(tb.Puts, wire.TagPut{ID: id, Name: "step", Type: int32(region.Int64), Value: val})
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				for j := range tb.Puts {
					binary.LittleEndian.PutUint64(val, uint64(i))
					tb.Puts[j].Value = val
				}
				if _, err := s.tagPut(ctx, &rpc.Request{Header: tb.Marshal(nil)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTagGet(b *testing.B) {
	s := newSvc(b)
	defer s.Close()
	ids := benchObjects(b, s, 1)
	ctx := context.Background()
	if _, err := s.tagPut(ctx, tagPutReq(ids[0], "step", 7)); err != nil {
		b.Fatal(err)
	}
	req := &rpc.Request{Header: (&wire.TagKey{Kind: kindObject, ID: ids[0], Name: "step"}).Marshal(nil)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.tagGet(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
