package batch

import (
	"errors"
	"fmt"
	"sync"

	"github.com/pdcgo/pdc"
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

// ByOwner groups the distinct ids by the rank owner gives each, as
// indices into ids (each id's first), for InChunks. An id of 0 names
// nothing and is refused.
func ByOwner(ids []uint64, owner func(id uint64) (int, error)) (map[int][]int, error) {
	groups := map[int][]int{}
	seen := make(map[uint64]struct{}, len(ids))
	for i, id := range ids {
		if id == 0 {
			return nil, fmt.Errorf("object id 0 names no object: %w", pdc.ErrInvalid)
		}
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		rank, err := owner(id)
		if err != nil {
			return nil, err
		}
		groups[rank] = append(groups[rank], i)
	}
	return groups, nil
}

// Requests is how many requests InChunks makes for groups of items too
// small to count their bytes.
func Requests(groups map[int][]int) int {
	n := 0
	for _, g := range groups {
		n += (len(g) + MaxItems - 1) / MaxItems
	}
	return n
}
