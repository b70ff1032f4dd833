package batch

import (
	"context"
	"errors"
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Cluster is what an object batch needs of the client that sends it.
type Cluster interface {
	// Caller makes one call to the server of rank.
	wire.Caller
	// Owner returns the rank of the metadata server that owns key.
	Owner(key uint32) (int, error)
	// Conn returns a connection to the server of rank from its pool, for
	// the chunks that go on it back to back.
	Conn(ctx context.Context, rank int) (*rpc.Conn, error)
	// Label names the server of rank in errors.
	Label(rank int) string
}

// Objects sends the items of an object batch (m: MethodObjCreate or
// MethodObjOpen) to the metadata servers that own them, keys[i] naming
// the owner of item i: one request per server, concurrently, or, for more
// than a chunk, chunks pipelined two deep. build makes the request for the
// items at the indexes idx (ascending); size(i) is about how many bytes
// item i takes in a request (nil: too small to count). The results are in
// item order.
func Objects(ctx context.Context, cl Cluster, m wire.Method, keys []uint32, size func(i int) int, build func(idx []int) wire.ObjBatch) ([]wire.ObjResult, error) {
	b := objects{cl: cl, m: m, build: build, out: make([]wire.ObjResult, len(keys))}
	if len(keys) == 1 {
		// One object, the common case, needs no grouping: the answer is the
		// result.
		rank, err := cl.Owner(keys[0])
		if err != nil {
			return nil, err
		}
		if err := b.all(ctx, rank, []int{0}); err != nil {
			return nil, err
		}
		return b.out, nil
	}
	err := b.spread(ctx, keys, size)
	return b.out, err
}

// objects is one object batch on its way: the results land in out, each
// server's at its own indexes.
type objects struct {
	cl    Cluster
	m     wire.Method
	build func(idx []int) wire.ObjBatch
	out   []wire.ObjResult
}

// spread groups the items by owner and sends each server its chunks,
// servers concurrently. A copy of b: the goroutines share it, which puts
// it on the heap, and the one-object path above stays off it.
func (b objects) spread(ctx context.Context, keys []uint32, size func(i int) int) error {
	groups := map[int][]int{}
	for i, k := range keys {
		rank, err := b.cl.Owner(k)
		if err != nil {
			return err
		}
		groups[rank] = append(groups[rank], i)
	}
	ranks := make([]int, 0, len(groups))
	for rank := range groups {
		ranks = append(ranks, rank)
	}
	return FanOut(ranks, func(rank int) error { return b.chunks(ctx, rank, groups[rank], size) })
}

// chunks sends the items at idx to the server of rank in chunks (see
// Chunks), with two chunks in flight, so that the server works on one
// while this client encodes the next and decodes the last.
func (b *objects) chunks(ctx context.Context, rank int, idx []int, size func(i int) int) error {
	parts := Chunks(idx, size)
	if len(parts) == 1 {
		return b.all(ctx, rank, idx)
	}
	conn, err := b.cl.Conn(ctx, rank)
	if err != nil {
		return err
	}
	type sent struct {
		p    *rpc.Pending
		part []int
	}
	var inFlight []sent
	// collect waits for the oldest chunk; every sent chunk is waited for,
	// errors or not.
	collect := func() error {
		s := inFlight[0]
		inFlight = inFlight[1:]
		rep, err := s.p.Wait(ctx)
		if err != nil {
			return err
		}
		var res wire.ObjResults
		if err := res.Unmarshal(rep.Header); err != nil {
			return fmt.Errorf("%s: %s: %w", conn.Label(), b.m, err)
		}
		items, err := b.answered(rank, &res, len(s.part))
		if err != nil {
			return err
		}
		b.put(s.part, items)
		if rest := s.part[len(items):]; len(rest) > 0 {
			return b.all(ctx, rank, rest)
		}
		return nil
	}
	var errs []error
	for _, part := range parts {
		req := b.build(part)
		p, err := conn.Send(ctx, b.m, req.Marshal(nil), nil, nil)
		if err != nil {
			errs = append(errs, err)
			break
		}
		inFlight = append(inFlight, sent{p, part})
		if len(inFlight) == 2 {
			if err := collect(); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	for len(inFlight) > 0 {
		if err := collect(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 && ctx.Err() != nil {
		return errs[0] // every chunk in flight says the same
	}
	return errors.Join(errs...)
}

// all sends the items at idx in one request, and sends again those the
// server left unanswered, until every one is answered.
func (b *objects) all(ctx context.Context, rank int, idx []int) error {
	for len(idx) > 0 {
		var res wire.ObjResults
		req := b.build(idx)
		if err := b.cl.Call(ctx, rank, b.m, &req, &res); err != nil {
			return err
		}
		items, err := b.answered(rank, &res, len(idx))
		if err != nil {
			return err
		}
		b.put(idx, items)
		idx = idx[len(items):]
	}
	return nil
}

// answered returns the items of a batch's answer to n items: all of them,
// or, for opens, the first ones: a server answers opens only as far as
// its answer fits a reply (records may be up to ~70 KiB each), and the
// client asks again for the rest.
func (b *objects) answered(rank int, res *wire.ObjResults, n int) ([]wire.ObjResult, error) {
	k := len(res.Items)
	if k == n || b.m == wire.MethodObjOpen && k > 0 && k < n {
		return res.Items, nil
	}
	return nil, fmt.Errorf("%s answered %d of %d items: %w", b.cl.Label(rank), k, n, pdc.ErrProtocol)
}

// put stores the results items of the items at the indexes part.
func (b *objects) put(part []int, items []wire.ObjResult) {
	for j := range items {
		b.out[part[j]] = items[j]
	}
}
