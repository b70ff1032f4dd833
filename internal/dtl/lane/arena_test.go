package lane

import (
	"math/rand/v2"
	"testing"
)

// TestArenaMatchesModel allocates and frees at random and checks, against
// a page-by-page model, that spans never overlap, stay inside the arena,
// and that an allocation fails only when no run of free pages fits.
func TestArenaMatchesModel(t *testing.T) {
	const pages = 256
	rng := rand.New(rand.NewPCG(1, 2))
	a := NewArena(pages*Align + 100) // the odd tail is not usable
	if a.Size() != pages*Align {
		t.Fatalf("size %d, want %d", a.Size(), pages*Align)
	}
	owner := make([]int, pages) // span id per page, 0 free
	var out []Span
	next := 1
	fits := func(n int) bool {
		run := 0
		for _, o := range owner {
			if o == 0 {
				run++
				if run >= n {
					return true
				}
			} else {
				run = 0
			}
		}
		return false
	}
	for step := range 20000 {
		if len(out) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(out))
			s := out[i]
			out = append(out[:i], out[i+1:]...)
			for p := s.Off / Align; p < s.End()/Align; p++ {
				owner[p] = 0
			}
			a.Free(s)
			continue
		}
		n := 1 + rng.IntN(20*Align)
		want := (n + Align - 1) / Align
		s, ok := a.Alloc(n)
		if ok != fits(want) {
			t.Fatalf("step %d: Alloc(%d) = %v, model says a run fits: %v", step, n, ok, fits(want))
		}
		if !ok {
			continue
		}
		if s.Off%Align != 0 || s.Len != want*Align || s.End() > a.Size() {
			t.Fatalf("step %d: Alloc(%d) = %+v", step, n, s)
		}
		for p := s.Off / Align; p < s.End()/Align; p++ {
			if owner[p] != 0 {
				t.Fatalf("step %d: span %+v overlaps span %d at page %d", step, s, owner[p], p)
			}
			owner[p] = next
		}
		next++
		out = append(out, s)
	}
	used := 0
	for _, s := range out {
		used += s.Len
		a.Free(s)
	}
	if got := a.Used(); got != 0 {
		t.Fatalf("used %d after freeing everything", got)
	}
	if s, ok := a.Alloc(pages * Align); !ok || s.Off != 0 {
		t.Fatalf("the whole arena after freeing everything: %+v %v (free spans did not coalesce)", s, ok)
	}
	if _, ok := a.Alloc(0); ok {
		t.Fatal("Alloc(0) succeeded")
	}
}
