package batch

import (
	"errors"
	"sync"

	"github.com/pdcgo/pdc/internal/limits"
)

// MaxItems is the most items one request carries
// (limits.ClientBatchItems; a server accepts up to limits.MaxBatchItems).
const MaxItems = limits.ClientBatchItems

// MaxBytes bounds the bytes of the items of one request, well under the
// 1 MiB header a server accepts, so that its answer, which names each
// item at most once more, fits what the client accepts too.
const MaxBytes = 256 << 10

// FanOut calls fn for each rank, concurrently, and joins the errors. A
// single rank runs on the caller's goroutine: handing a small request to
// another goroutine costs more than the request.
func FanOut(ranks []int, fn func(rank int) error) error {
	if len(ranks) == 1 {
		return fn(ranks[0])
	}
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for i, rank := range ranks {
		wg.Go(func() { errs[i] = fn(rank) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// InChunks calls fn for each server's items, grouped by rank, in chunks
// (see Chunks; size may be nil for items of a few dozen bytes), one
// request per chunk, in order; servers run concurrently.
func InChunks(groups map[int][]int, size func(i int) int, fn func(rank int, part []int) error) error {
	ranks := make([]int, 0, len(groups))
	for rank := range groups {
		ranks = append(ranks, rank)
	}
	return FanOut(ranks, func(rank int) error {
		for _, part := range Chunks(groups[rank], size) {
			if err := fn(rank, part); err != nil {
				return err
			}
		}
		return nil
	})
}

// Chunks divides idx into chunks of at most MaxItems items and, past their
// first item, MaxBytes bytes by size (nil: items too small to count). An
// item larger than MaxBytes goes alone.
func Chunks(idx []int, size func(i int) int) [][]int {
	var out [][]int
	start, n := 0, 0
	for j, i := range idx {
		b := 0
		if size != nil {
			b = size(i)
		}
		if j > start && (j-start == MaxItems || n+b > MaxBytes) {
			out = append(out, idx[start:j])
			start, n = j, 0
		}
		n += b
	}
	return append(out, idx[start:])
}
