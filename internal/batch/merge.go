package batch

import (
	"context"
	"fmt"
	"iter"
	"sync"

	"github.com/pdcgo/pdc"
)

// Merge walks a listing that several servers hand out a page at a time,
// in one order: it holds at most one page per server, whatever the
// listing holds, and takes the smallest head of the servers' pages next.
// It is the engine of the client's cursors (client.Cursor). Not safe for
// concurrent use.
type Merge[T any] struct {
	cmp     func(a, b T) int
	streams []*stream[T]
	err     error
}

// stream is one server's part of a listing.
type stream[T any] struct {
	buf   []T
	done  bool
	fetch func(ctx context.Context) (items []T, done bool, err error)
}

// NewMerge returns a Merge ordering items by cmp.
func NewMerge[T any](cmp func(a, b T) int) *Merge[T] { return &Merge[T]{cmp: cmp} }

// Add adds one server's part of the listing: fetch gets its next page,
// keeping its own place, and says when the server has no more. A page
// may come back empty and not last.
func (m *Merge[T]) Add(fetch func(ctx context.Context) (items []T, done bool, err error)) {
	m.streams = append(m.streams, &stream[T]{fetch: fetch})
}

// AddByName adds each server's part of a listing paged by name: page asks
// the server of rank for the page after a name, at most limit items (0:
// the server's bound), and returns it with the name it ends at ("" at the
// end). A page that does not move past after is the server's protocol
// error. what and method name the listing in errors, label the server.
func (m *Merge[T]) AddByName(ranks []int, label func(rank int) string, limit uint32, what, method string,
	page func(ctx context.Context, rank int, after string, limit uint32) ([]T, string, error)) {
	for _, rank := range ranks {
		after := ""
		m.Add(func(ctx context.Context) ([]T, bool, error) {
			items, next, err := page(ctx, rank, after, limit)
			if err != nil {
				return nil, false, fmt.Errorf("%s: %w", what, err)
			}
			if next != "" && next <= after {
				return nil, false, fmt.Errorf("%s: %s: the page after %q ends at %q: %w", label(rank), method, after, next, pdc.ErrProtocol)
			}
			after = next
			return items, next == "", nil
		})
	}
}

// Fail makes every call of Next return err.
func (m *Merge[T]) Fail(err error) { m.err = err }

// Next returns the next item; false at the end. After an error every call
// returns it again.
func (m *Merge[T]) Next(ctx context.Context) (T, bool, error) {
	var zero T
	if m.err != nil {
		return zero, false, m.err
	}
	// Each server with an empty page gets its next one.
	for {
		var need []*stream[T]
		for _, s := range m.streams {
			if len(s.buf) == 0 && !s.done {
				need = append(need, s)
			}
		}
		if len(need) == 0 {
			break
		}
		if err := fetchAll(ctx, need); err != nil {
			m.err = err
			return zero, false, err
		}
	}
	var best *stream[T]
	for _, s := range m.streams {
		if len(s.buf) > 0 && (best == nil || m.cmp(s.buf[0], best.buf[0]) < 0) {
			best = s
		}
	}
	if best == nil {
		return zero, false, nil
	}
	v := best.buf[0]
	best.buf[0] = zero // the page is not kept alive by what it held
	best.buf = best.buf[1:]
	return v, true, nil
}

// fetchAll refills the streams, concurrently when there are several.
func fetchAll[T any](ctx context.Context, ss []*stream[T]) error {
	errs := make([]error, len(ss))
	fill := func(i int) {
		s := ss[i]
		s.buf, s.done, errs[i] = s.fetch(ctx)
	}
	if len(ss) == 1 {
		fill(0)
		return errs[0]
	}
	var wg sync.WaitGroup
	for i := range ss {
		wg.Go(func() { fill(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// All returns an iterator over the rest of the listing. An error is the
// last pair it yields.
func (m *Merge[T]) All(ctx context.Context) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			v, ok, err := m.Next(ctx)
			if err != nil {
				yield(v, err)
				return
			}
			if !ok || !yield(v, nil) {
				return
			}
		}
	}
}
