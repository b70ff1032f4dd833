package metaserver

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkCreate is the create handler without the RPC around it: one
// object a request (pdc bench meta's one-at-a-time creates) and 256 a
// request (its batched creates). Its allocations per object are the figure
// to keep from growing.
func BenchmarkCreate(b *testing.B) {
	for _, n := range []int{1, 256} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s := newSvc(b)
			defer s.Close()
			ctx := context.Background()
			names := make([]string, n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				for j := range names {
					names[j] = fmt.Sprintf("obj-%d-%d", i, j)
				}
				if _, err := s.objCreate(ctx, createReq(names...)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
