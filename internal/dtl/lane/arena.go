package lane

import "sync"

// Align is the granularity of spans: whole pages, so that no two spans
// share a page (nor a cache line) and copies start aligned.
const Align = 4096

// Arena hands out spans of a lane. First fit from the lowest offset keeps
// the pages in use few and warm. Safe for concurrent use.
type Arena struct {
	mu   sync.Mutex
	size int
	used int
	free []Span // ascending, coalesced
}

// Span is a part of a lane: [Off, Off+Len).
type Span struct {
	Off, Len int
}

// End is the offset just past s.
func (s Span) End() int { return s.Off + s.Len }

// NewArena makes an arena over size bytes (rounded down to Align).
func NewArena(size int) *Arena {
	size -= size % Align
	a := &Arena{size: size}
	if size > 0 {
		a.free = []Span{{0, size}}
	}
	return a
}

// Alloc takes a span of at least n bytes (n > 0), or reports false if no
// free span is that large.
func (a *Arena) Alloc(n int) (Span, bool) {
	if n <= 0 {
		return Span{}, false
	}
	n = (n + Align - 1) / Align * Align
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, f := range a.free {
		if f.Len < n {
			continue
		}
		s := Span{f.Off, n}
		if f.Len == n {
			a.free = append(a.free[:i], a.free[i+1:]...)
		} else {
			a.free[i] = Span{f.Off + n, f.Len - n}
		}
		a.used += n
		return s, true
	}
	return Span{}, false
}

// Free gives back a span that Alloc returned.
func (a *Arena) Free(s Span) {
	if s.Len == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used -= s.Len
	// The first free span after s.
	i := 0
	for i < len(a.free) && a.free[i].Off < s.Off {
		i++
	}
	joinPrev := i > 0 && a.free[i-1].End() == s.Off
	joinNext := i < len(a.free) && s.End() == a.free[i].Off
	switch {
	case joinPrev && joinNext:
		a.free[i-1].Len += s.Len + a.free[i].Len
		a.free = append(a.free[:i], a.free[i+1:]...)
	case joinPrev:
		a.free[i-1].Len += s.Len
	case joinNext:
		a.free[i] = Span{s.Off, s.Len + a.free[i].Len}
	default:
		a.free = append(a.free, Span{})
		copy(a.free[i+1:], a.free[i:])
		a.free[i] = s
	}
}

// Size is the arena's size; Used the bytes of the spans out.
func (a *Arena) Size() int { return a.size }

// Used is the bytes of the spans handed out and not freed.
func (a *Arena) Used() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.used
}
