package postings

import (
	"fmt"
	"testing"
)

func BenchmarkBuildRun(b *testing.B) {
	var ops Ops
	for i := range 4096 {
		ops.Set(fmt.Appendf(nil, "XW%07d\x00\x01name\x00\x01%08d", (i*7919)%100000, i), []byte{1})
	}
	b.SetBytes(int64(len(ops.Bytes())))
	for b.Loop() {
		buildRun(&ops)
	}
}
