package transfer

import (
	"slices"
	"testing"
)

func TestChunk(t *testing.T) {
	mib := 1 << 20
	for _, tc := range []struct {
		name  string
		sizes []int
		want  [][2]int
	}{
		{"none", nil, nil},
		{"one", []int{5}, [][2]int{{0, 1}}},
		{"fits", []int{32 * mib, 32 * mib}, [][2]int{{0, 2}}},
		{"splits by bytes", []int{32 * mib, 32 * mib, 1}, [][2]int{{0, 2}, {2, 3}}},
		{"oversized alone", []int{1, 200 * mib, 1}, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
		{"reads carry no bytes", []int{0, 0, 0}, [][2]int{{0, 3}}},
	} {
		got := chunk(len(tc.sizes), chunkBytes, func(i int) int { return tc.sizes[i] })
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: chunk = %v, want %v", tc.name, got, tc.want)
		}
	}
	got := chunk(2*chunkItems+1, chunkBytes, func(int) int { return 0 })
	if want := [][2]int{{0, chunkItems}, {chunkItems, 2 * chunkItems}, {2 * chunkItems, 2*chunkItems + 1}}; !slices.Equal(got, want) {
		t.Errorf("by items: chunk = %v, want %v", got, want)
	}
}
