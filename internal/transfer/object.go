package transfer

import (
	"context"
	"fmt"

	"github.com/pdcgo/pdc/internal/batch"
	"github.com/pdcgo/pdc/internal/wire"
)

// track lists t among o's pending transfers (started), or takes it off.
func (o *Object) track(t *Transfer, started bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := &t.pend
	switch {
	case started && !p.in:
		p.in, p.prev, p.next = true, nil, o.mu.pending
		if p.next != nil {
			p.next.pend.prev = t
		}
		o.mu.pending = t
		o.mu.npending++
	case !started && p.in:
		if p.prev != nil {
			p.prev.pend.next = p.next
		} else {
			o.mu.pending = p.next
		}
		if p.next != nil {
			p.next.pend.prev = p.prev
		}
		*p = pendLink{}
		o.mu.npending--
	}
}

func (o *Object) wroteTo(parts []part) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.wrote == nil {
		o.mu.wrote = map[int]bool{}
	}
	for _, p := range parts {
		o.mu.wrote[p.server] = true
	}
}

// Flush fsyncs the object's data on the data servers written since the
// last flush (PDCobj_flush_start), after waiting for transfers under way.
// A data server whose flush fails is asked again by the next Flush.
func (o *Object) Flush(ctx context.Context) error {
	if err := o.waitPending(ctx); err != nil {
		return err
	}
	o.mu.Lock()
	servers := make([]int, 0, len(o.mu.wrote))
	for s := range o.mu.wrote {
		servers = append(servers, s)
	}
	o.mu.wrote = nil
	o.mu.Unlock()
	return batch.FanOut(servers, func(server int) error {
		if err := o.e.calls().DataFlush(ctx, server, &wire.IDArg{ID: o.Meta().ID}); err != nil {
			// Still to flush: the next Flush asks it again, rather
			// than succeed without it.
			o.wroteTo([]part{{server: server}})
			return fmt.Errorf("object %q: flush on %s: %w", o.Meta().Name, o.e.cl.Label(server), err)
		}
		return nil
	})
}

// waitPending waits for the object's started, unwaited transfers.
func (o *Object) waitPending(ctx context.Context) error {
	o.mu.Lock()
	ts := make([]*Transfer, 0, o.mu.npending)
	for t := o.mu.pending; t != nil; t = t.pend.next {
		ts = append(ts, t)
	}
	o.mu.Unlock()
	if len(ts) == 0 {
		return nil
	}
	return o.e.WaitAll(ctx, ts)
}

// WaitReadsOutside waits for the object's started, unwaited reads of
// regions that do not fit in dims, so that they read the rows as they are
// before a set dims to dims cuts them (as a write started before it is
// stored first): a read is served at its wait, and one waited after the
// cut, no longer fitting the object's dims, would fail as stale. Their
// own errors are theirs, reported by their waits; only ctx's is
// returned.
func (o *Object) WaitReadsOutside(ctx context.Context, dims []uint64) error {
	o.mu.Lock()
	var ts []*Transfer
	for t := o.mu.pending; t != nil; t = t.pend.next {
		if t.access == Read && t.remote.Within(dims) != nil {
			ts = append(ts, t)
		}
	}
	o.mu.Unlock()
	if len(ts) == 0 {
		return nil
	}
	err := o.e.WaitAll(ctx, ts)
	if ctx.Err() != nil {
		return err
	}
	return nil
}
