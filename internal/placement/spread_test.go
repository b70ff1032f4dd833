package placement

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/region"
)

func TestUnlimitedIsPDCs(t *testing.T) {
	if unlimited != limits.Unlimited {
		t.Fatalf("unlimited %#x, limits.Unlimited %#x", uint64(unlimited), uint64(limits.Unlimited))
	}
}

func TestNewSpread(t *testing.T) {
	for _, tc := range []struct {
		key       uint32
		dims      []uint64
		elem, ds  int
		want      Spread
		wantFixed bool
	}{
		{key: 7, dims: []uint64{100}, elem: 8, ds: 0},
		{key: 7, dims: nil, elem: 8, ds: 3},
		// 100 rows over 3 servers: blocks of ceil(100/3) = 34 rows.
		{key: 7, dims: []uint64{100, 5}, elem: 8, ds: 3, want: Spread{Home: 1, Block: 34, Over: 3}, wantFixed: true},
		// Fewer rows than servers: blocks of one row.
		{key: 8, dims: []uint64{2}, elem: 1, ds: 4, want: Spread{Home: 0, Block: 1, Over: 4}, wantFixed: true},
		// Unlimited first dim: blocks of StaticBlockBytes, by row size.
		{key: 5, dims: []uint64{unlimited, 1024}, elem: 8, ds: 2, want: Spread{Home: 1, Block: StaticBlockBytes / 8192, Over: 2}, wantFixed: true},
		// A row larger than a block: blocks of one row; elem 0 counts as 1.
		{key: 5, dims: []uint64{unlimited, 1 << 40}, elem: 0, ds: 2, want: Spread{Home: 1, Block: 1, Over: 2}, wantFixed: true},
	} {
		got, ok := NewSpread(tc.key, tc.dims, tc.elem, tc.ds)
		if got != tc.want || ok != tc.wantFixed {
			t.Errorf("NewSpread(%d, %v, %d, %d) = %+v, %v; want %+v, %v", tc.key, tc.dims, tc.elem, tc.ds, got, ok, tc.want, tc.wantFixed)
		}
	}
}

type slotPiece struct {
	slot int
	box  string
}

func staticPieces(box region.Box, block uint64, over int) []slotPiece {
	var out []slotPiece
	StaticPieces(box, block, over, func(slot int, b region.Box) {
		out = append(out, slotPiece{slot, b.String()})
	})
	return out
}

func TestStaticPieces(t *testing.T) {
	box := func(off, size uint64) region.Box {
		return region.Box{Off: []uint64{off, 2}, Size: []uint64{size, 3}}
	}
	for _, tc := range []struct {
		box         region.Box
		block       uint64
		over        int
		want        []slotPiece
		description string
	}{
		{box(0, 10), 4, 3, []slotPiece{{0, box(0, 4).String()}, {1, box(4, 4).String()}, {2, box(8, 2).String()}}, "one piece per block"},
		{box(5, 2), 4, 3, []slotPiece{{1, box(5, 2).String()}}, "inside one block"},
		{box(3, 10), 4, 2, []slotPiece{{0, box(3, 1).String()}, {1, box(4, 4).String()}, {0, box(8, 4).String()}, {1, box(12, 1).String()}}, "partial blocks at both ends"},
		{box(0, 12), 4, 1, []slotPiece{{0, box(0, 12).String()}}, "one slot: neighbours merge"},
		{box(2, 20), 1, 2, nil, "see below"},
		{box(0, 3), 0, 0, []slotPiece{{0, box(0, 3).String()}}, "zero block and over count as one"},
	} {
		got := staticPieces(tc.box, tc.block, tc.over)
		if tc.want == nil {
			// Blocks of one row over two slots alternate: 20 pieces.
			if len(got) != 20 || got[0].slot != 0 || got[1].slot != 1 {
				t.Errorf("%s: %v", tc.description, got)
			}
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: StaticPieces(%v, %d, %d) = %v, want %v", tc.description, tc.box, tc.block, tc.over, got, tc.want)
		}
	}
}

// The pieces are disjoint, cover the box in row order, and each lies in
// the slot of its blocks; the box given is not changed.
func TestStaticPiecesCover(t *testing.T) {
	for off := range uint64(13) {
		for size := uint64(1); size < 30; size++ {
			for block := uint64(1); block < 7; block++ {
				for over := 1; over < 5; over++ {
					b := region.Box{Off: []uint64{off, 1}, Size: []uint64{size, 2}}
					orig := b.Clone()
					row, prevSlot := off, -1
					StaticPieces(b, block, over, func(slot int, p region.Box) {
						what := fmt.Sprintf("%v block %d over %d: piece %v slot %d", b, block, over, p, slot)
						if p.Off[0] != row || p.Size[0] == 0 || p.Off[1] != 1 || p.Size[1] != 2 || slot == prevSlot {
							t.Fatalf("%s: not the next piece from row %d", what, row)
						}
						for r := p.Off[0]; r < p.End(0); r++ {
							if int((r/block)%uint64(over)) != slot {
								t.Fatalf("%s: row %d is in slot %d", what, r, (r/block)%uint64(over))
							}
						}
						row, prevSlot = p.End(0), slot
						p.Off[0] = 999 // the piece is the caller's
					})
					if row != off+size || !b.Equal(orig) {
						t.Fatalf("%v block %d over %d: pieces end at row %d; box now %v", orig, block, over, row, b)
					}
				}
			}
		}
	}
}

// A box at the far end of an unlimited first dim: the last block's end,
// (k+1)*block, is past 2^64. It wrapped to 0, and the cut went back to
// row 0: a piece of 2^64 - from rows, then pieces for ever (a read or
// write of a region-static object there never returned).
func TestStaticPiecesAtTheEndOfTheRows(t *testing.T) {
	const top = ^uint64(0)
	for _, block := range []uint64{1 << 23, 7, 3, top / 2, top} {
		for _, over := range []int{2, 3, 1} {
			for _, size := range []uint64{1, 2, 9} {
				off := top - size
				b := region.Box{Off: []uint64{off}, Size: []uint64{size}}
				row, pieces := off, 0
				StaticPieces(b, block, over, func(slot int, p region.Box) {
					pieces++
					if p.Off[0] != row || p.Size[0] == 0 || p.End(0) > top || pieces > int(size) {
						t.Fatalf("%v block %d over %d: piece %d is %v, want one from row %d within the box", b, block, over, pieces, p, row)
					}
					if want := int((p.End(0) - 1) / block % uint64(over)); slot != want {
						t.Fatalf("%v block %d over %d: piece %v in slot %d, its last row's is %d", b, block, over, p, slot, want)
					}
					row = p.End(0)
				})
				if row != top {
					t.Fatalf("%v block %d over %d: pieces end at row %d, want %d", b, block, over, row, top)
				}
			}
		}
	}
}

func TestCandidates(t *testing.T) {
	if got := Candidates(0, 5); len(got) != 0 {
		t.Errorf("Candidates(0, 5) = %v", got)
	}
	if got, want := Candidates(4, 6), []uint64{2, 3, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("Candidates(4, 6) = %v, want %v", got, want)
	}
	for start := range 10 {
		got := Candidates(3, start)
		sorted := slices.Sorted(slices.Values(got))
		if !slices.Equal(sorted, []uint64{0, 1, 2}) || got[0] != uint64(start%3) {
			t.Errorf("Candidates(3, %d) = %v", start, got)
		}
	}
}

func TestLeastLoaded(t *testing.T) {
	loads := map[uint32]uint64{0: 50, 1: 10, 2: 10, 3: 70}
	var asked []uint32
	load := func(s uint32) (uint64, error) {
		asked = append(asked, s)
		return loads[s], nil
	}
	for _, tc := range []struct {
		cands []uint64
		want  uint32
	}{
		{[]uint64{0, 1, 2, 3}, 1},
		{[]uint64{2, 1, 0}, 2}, // ties to the first
		{[]uint64{3}, 3},
		{[]uint64{3, 0}, 0},
		{nil, 0},
	} {
		asked = nil
		got, err := LeastLoaded(tc.cands, load)
		if err != nil || got != tc.want {
			t.Errorf("LeastLoaded(%v) = %d, %v; want %d", tc.cands, got, err, tc.want)
		}
		if len(asked) != len(tc.cands) {
			t.Errorf("LeastLoaded(%v) asked about %v", tc.cands, asked)
		}
	}
	bad := errors.New("no load")
	asked = nil
	_, err := LeastLoaded([]uint64{0, 1, 2}, func(s uint32) (uint64, error) {
		asked = append(asked, s)
		if s == 1 {
			return 0, bad
		}
		return 0, nil
	})
	if !errors.Is(err, bad) || !slices.Equal(asked, []uint32{0, 1}) {
		t.Errorf("a failing load: %v after asking %v; want its error after asking 0, 1", err, asked)
	}
}
