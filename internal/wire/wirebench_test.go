package wire_test

import (
	"reflect"
	"testing"

	"github.com/pdcgo/pdc/internal/wire"
)

// BenchmarkMarshal and BenchmarkUnmarshal run every golden message (see
// wiregolden_test.go) through its codec, so that a change of the codecs
// shows its cost per message in ns/op and allocs/op (docs/design/0022).
func BenchmarkMarshal(b *testing.B) {
	for _, g := range goldenMessages() {
		b.Run(g.name, func(b *testing.B) {
			buf := g.m.Marshal(nil)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				buf = g.m.Marshal(buf[:0])
			}
		})
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	for _, g := range goldenMessages() {
		b.Run(g.name, func(b *testing.B) {
			enc := g.m.Marshal(nil)
			m := reflect.New(reflect.TypeOf(g.m).Elem()).Interface().(wire.Message)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := m.Unmarshal(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
