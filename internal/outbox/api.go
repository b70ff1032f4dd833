package outbox

import (
	"context"
	"log/slog"
	"slices"

	"github.com/pdcgo/pdc/internal/postings"
)

// Log is where the outbox keeps its records and marks: the server's
// store. Changes are logged and applied in the order of the calls, and
// visible to Scan once a call returns; each returns a wait that returns
// once its change is as durable as the store promises. A store syncs its
// log in order, so a change is never durable after a later one.
type Log interface {
	// Scan calls fn for every key with prefix p, in key order. fn must
	// not retain k or v.
	Scan(p []byte, fn func(k, v []byte) error) error
	// Write deletes the keys of dels and sets each key of sets to val, in
	// one atomic change.
	Write(dels, sets [][]byte, val []byte) (wait func() error, err error)
	// ApplyOwn applies ops to this server's own index entries and sets key
	// to val, in one atomic change.
	ApplyOwn(ops *postings.Ops, key, val []byte) (wait func() error, err error)
}

// Peers applies index changes at the metadata servers by their index,
// this server's own included.
type Peers interface {
	// Apply returns once server dest has applied ops, or fails. ops is
	// not retained.
	Apply(ctx context.Context, dest int, ops *postings.Ops) error
}

// Config configures an outbox.
type Config struct {
	// Log holds the records and marks. Required.
	Log Log
	// Decode returns the index changes of a stored record (the value of a
	// RecordKey), in memory of their own. Required.
	Decode func(v []byte) (postings.Ops, error)
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Stats is a snapshot of the outbox.
type Stats struct {
	// Backlog is the bytes of index changes committed and not yet tried
	// at their destinations.
	Backlog int
	// Dests are the destinations with a deliverer, in no order.
	Dests []int
	// Queued is, by destination, the bytes of index changes waiting to
	// be delivered there: unlike Backlog, it counts changes whose try
	// failed (a destination down or cut off).
	Queued map[int]int
	// Failing are the destinations whose last delivery failed, in order.
	Failing []int
}

// Stats returns a snapshot of the outbox.
func (ob *Outbox) Stats() Stats {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	st := Stats{Backlog: ob.mu.backlog, Queued: map[int]int{}}
	for d, q := range ob.mu.queues {
		st.Dests = append(st.Dests, d)
		st.Queued[d] = q.size
		if q.failing {
			st.Failing = append(st.Failing, d)
		}
	}
	slices.Sort(st.Failing)
	return st
}
