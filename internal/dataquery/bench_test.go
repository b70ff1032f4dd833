package dataquery_test

import (
	"math/rand/v2"
	"testing"

	"github.com/pdcgo/pdc/internal/dataquery"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// BenchmarkMatch evaluates predicates over 4 MiB of float32 (a data
// server's chunk); copy is the ceiling: a memcpy of the same bytes.
func BenchmarkMatch(b *testing.B) {
	const n = 1 << 20
	words := make([]uint64, n/2)
	data := unsafeBytes(words)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range n {
		v, _ := dataquery.Encode(region.Float, dataquery.Value{Kind: dataquery.KindFloat, F: r.Float64()})
		copy(data[4*i:], v)
	}
	half, _ := dataquery.Encode(region.Float, dataquery.Value{Kind: dataquery.KindFloat, F: 0.5})
	tenth, _ := dataquery.Encode(region.Float, dataquery.Value{Kind: dataquery.KindFloat, F: 0.1})
	out := make([]bool, n)
	for _, c := range []struct {
		name  string
		nodes []wire.QueryNode
	}{
		{"gt", []wire.QueryNode{{Op: wire.QueryGT, Value: half}}},
		{"range", []wire.QueryNode{{Op: wire.QueryGT, Value: tenth}, {Op: wire.QueryLT, Value: half}, {Op: wire.QueryAND}}},
	} {
		p, err := dataquery.Compile(region.Float, c.nodes)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				p.Match(data, out)
			}
		})
	}
	b.Run("copy", func(b *testing.B) {
		dst := make([]byte, len(data))
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			copy(dst, data)
		}
	})
}
