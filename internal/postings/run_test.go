package postings

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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

// TestBuildRunSortsLikeAStableSort: keys with long shared prefixes, zero
// bytes, every length around the eight-byte steps, and repeated keys (the
// last change wins) come out as a stable sort by key would leave them.
func TestBuildRunSortsLikeAStableSort(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 50 {
		var ops Ops
		type change struct{ k, v string }
		var all []change
		prefix := strings.Repeat("XKname\x00\x01s", r.IntN(3))
		for i := range 1 + r.IntN(3000) {
			n := r.IntN(30)
			k := []byte(prefix)
			for range n {
				k = append(k, "ab\x00z"[r.IntN(4)])
			}
			v := fmt.Sprint(round, i)
			ops.Set(k, []byte(v))
			all = append(all, change{string(k), v})
		}
		slices.SortStableFunc(all, func(x, y change) int { return strings.Compare(x.k, y.k) })
		var want []string
		for i, c := range all {
			if i+1 < len(all) && all[i+1].k == c.k {
				continue // a later change of the key wins
			}
			want = append(want, fmt.Sprintf("%q=%s", c.k, c.v))
		}
		run := buildRun(&ops)
		var got []string
		c := newMemCursor(run, nil, nil)
		for ; c.valid(); c.next() {
			k, v, _, _ := c.rec()
			got = append(got, fmt.Sprintf("%q=%s", k, v))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: %d records, want %d; first difference at %d", round, len(got), len(want), firstDiff(got, want))
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
