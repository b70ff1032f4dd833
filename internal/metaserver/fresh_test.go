package metaserver

import "testing"

func TestFreshSet(t *testing.T) {
	var f freshSet
	if f.take(5) {
		t.Fatal("an empty set holds 5")
	}
	f.add(100, 3) // 100, 101, 102
	f.add(200, 1)
	for _, c := range []struct {
		seq  uint32
		want bool
	}{{99, false}, {100, true}, {100, false}, {102, true}, {103, false}, {150, false}, {200, true}, {200, false}, {1 << 31, false}} {
		if got := f.take(c.seq); got != c.want {
			t.Fatalf("take(%d) = %v, want %v", c.seq, got, c.want)
		}
	}
	f.add(100+maxFresh, 1) // beyond the bound: not remembered, not grown
	if f.take(100+maxFresh) || len(f.bits) > 4 {
		t.Fatalf("beyond the bound: remembered, or %d words", len(f.bits))
	}
	f.add(50, 1) // below the base
	if f.take(50) {
		t.Fatal("below the base: remembered")
	}
}
