package overlay

import (
	"slices"

	"github.com/pdcgo/pdc/region"
)

// Piece is a stored region: its box and the order in which its write
// completed (a higher Seq is newer).
type Piece struct {
	Box region.Box
	Seq uint64
}

// Fragment is the part of a read that comes from one piece.
type Fragment struct {
	// Piece indexes the pieces given to Resolve.
	Piece int
	// Box is the fragment, inside both the read and the piece.
	Box region.Box
}

// Resolve splits a read of box over the stored pieces: every element comes
// from the newest piece that holds it, and holes are the parts no piece
// holds (they read as zeros). Fragments and holes are disjoint and
// together cover box exactly. Pieces of another dimensionality are
// ignored.
func Resolve(box region.Box, pieces []Piece) (frags []Fragment, holes []region.Box) {
	order := make([]int, 0, len(pieces))
	for i, p := range pieces {
		if p.Box.Ndim() == box.Ndim() {
			if _, ok := region.Intersect(p.Box, box); ok {
				order = append(order, i)
			}
		}
	}
	// Newest first: what a newer piece covers is taken, the rest falls
	// through to older ones.
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case pieces[a].Seq > pieces[b].Seq:
			return -1
		case pieces[a].Seq < pieces[b].Seq:
			return 1
		}
		return 0
	})
	remaining := []region.Box{box.Clone()}
	for _, i := range order {
		if len(remaining) == 0 {
			break
		}
		var next []region.Box
		for _, r := range remaining {
			in, ok := region.Intersect(r, pieces[i].Box)
			if !ok {
				next = append(next, r)
				continue
			}
			frags = append(frags, Fragment{Piece: i, Box: in})
			next = append(next, region.Subtract(r, in)...)
		}
		remaining = next
	}
	return frags, remaining
}
