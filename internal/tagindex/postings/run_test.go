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

func BenchmarkMergeRuns(b *testing.B) {
	var runs []*run
	for r := range 8 {
		var ops Ops
		for i := range 2048 {
			ops.Set(fmt.Appendf(nil, "XW%07d\x00\x01name\x00\x01%08d", (i*7919+r*31)%100000, i+r*2048), []byte{1})
		}
		x := buildRun(&ops)
		x.age = uint64(r + 1)
		runs = append(runs, x)
	}
	n := 0
	for _, r := range runs {
		n += len(r.data)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		mergeRuns(runs, true)
	}
}
