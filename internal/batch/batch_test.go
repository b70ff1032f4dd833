package batch

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestChunks: a chunk ends at MaxItems items or when the next item would
// pass MaxBytes, but never before its first item.
func TestChunks(t *testing.T) {
	seq := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	lens := func(cs [][]int) []int {
		var out []int
		for _, c := range cs {
			out = append(out, len(c))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		n    int
		size func(i int) int
		want []int
	}{
		{"one", 1, nil, []int{1}},
		{"by count, nil size", 2*MaxItems + 1, nil, []int{MaxItems, MaxItems, 1}},
		{"by bytes", 5, func(int) int { return MaxBytes / 2 }, []int{2, 2, 1}},
		{"oversized alone", 3, func(i int) int { return map[int]int{1: 2 * MaxBytes}[i] + 1 }, []int{1, 1, 1}},
		{"small items by count", MaxItems + 1, func(int) int { return 1 }, []int{MaxItems, 1}},
	} {
		idx := seq(tc.n)
		got := Chunks(idx, tc.size)
		if !slices.Equal(lens(got), tc.want) {
			t.Errorf("%s: chunk lengths %v, want %v", tc.name, lens(got), tc.want)
		}
		if joined := slices.Concat(got...); !slices.Equal(joined, idx) {
			t.Errorf("%s: chunks do not cover the items in order", tc.name)
		}
	}
}

// TestFanOut: every rank is called once and every failure is returned.
func TestFanOut(t *testing.T) {
	errOdd := errors.New("odd")
	var mu sync.Mutex
	var called []int
	err := FanOut([]int{1, 2, 3, 4}, func(rank int) error {
		mu.Lock()
		called = append(called, rank)
		mu.Unlock()
		if rank%2 == 1 {
			return errOdd
		}
		return nil
	})
	slices.Sort(called)
	if !slices.Equal(called, []int{1, 2, 3, 4}) {
		t.Errorf("called %v, want each rank once", called)
	}
	if !errors.Is(err, errOdd) {
		t.Fatalf("err %v, want the ranks' errors", err)
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 2 {
		t.Errorf("%d errors joined, want 2", n)
	}
}

// TestInChunks: each server's items arrive in chunks, in order.
func TestInChunks(t *testing.T) {
	groups := map[int][]int{0: {0, 2, 4}, 1: {1, 3}}
	var mu sync.Mutex
	got := map[int][]int{}
	size := func(int) int { return MaxBytes } // one item a chunk
	err := InChunks(groups, size, func(rank int, part []int) error {
		if len(part) != 1 {
			t.Errorf("rank %d: chunk of %d items, want 1", rank, len(part))
		}
		mu.Lock()
		got[rank] = append(got[rank], part...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rank, want := range groups {
		if !slices.Equal(got[rank], want) {
			t.Errorf("rank %d got %v, want %v", rank, got[rank], want)
		}
	}
}
