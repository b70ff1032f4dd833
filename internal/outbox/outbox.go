package outbox

import (
	"context"
	"encoding/binary"
	"log/slog"
	"sync"

	"github.com/pdcgo/pdc/internal/postings"
	"github.com/pdcgo/pdc/internal/tagindex"
)

// Outbox delivers index operations to the servers that hold their
// entries, in the order they were committed, until each server
// acknowledges them. See the package documentation. Safe for concurrent
// use.
type Outbox struct {
	store  Log
	log    *slog.Logger
	decode func(v []byte) (postings.Ops, error)

	mu struct {
		sync.Mutex
		next    uint64             // next sequence number
		pending []*Record          // committed or being committed, not yet queued, in sequence order
		queues  map[int]*destQueue // by destination index
		count   int                // metadata servers; 0 until start
		self    int                // this server's index; set by start
		peers   Peers
		// open holds the records not yet tried everywhere, in sequence
		// order (with some tried ones behind the first untried): what a
		// fence waits for. backlog is their size in bytes.
		open    []*Record
		backlog int
		// waiters counts fences and writers waiting for deliveries: while
		// there are any, deliverers do not linger.
		waiters int
		// idle holds the records queued with nothing to deliver, for start
		// to delete.
		idle []*Record
	}

	// doneMu makes each acknowledgement's commit and what it changes in
	// memory one step (done).
	doneMu sync.Mutex

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // deliverers
}

// Record is one outbox record in memory.
type Record struct {
	seq, obj uint64
	// skip holds the destinations that applied their part before a
	// restart (their marks, loaded at start); acked those whose part was
	// applied since, marked in the store.
	skip   map[int]bool
	acked  []int        // guarded by outbox.mu
	loaded bool         // by start, from the store
	ops    postings.Ops // until queued
	// split, if set, holds the record's index changes in place of ops,
	// by destination among len(split) servers, as the commit built them.
	split []postings.Ops
	size  int // bytes of ops or split, counted in the backlog until tried
	// Guarded by outbox.mu:
	ready, dropped bool
	held           bool // committed, its sync failed: ready once a later one is
	done           bool // tried everywhere: tried is closed
	unacked        int  // items not yet acknowledged
	untried        int  // items not yet tried
	tried          chan struct{}
}

// Seq is the record's sequence number: its key is RecordKey(Seq(), 0).
func (r *Record) Seq() uint64 { return r.seq }

// Split returns the changes of a record made by AddSplit, by destination,
// until it is queued for delivery (at Release, or Start); nil for others.
// The caller must not change them.
func (r *Record) Split() []postings.Ops { return r.split }

// item is the part of a record for one destination.
type item struct {
	rec   *Record
	dest  int
	last  bool // the record's last item for dest
	ops   postings.Ops
	size  int
	tried bool // guarded by outbox.mu
}

type destQueue struct {
	items []*item       // guarded by outbox.mu, in sequence order
	size  int           // bytes of items; guarded by outbox.mu
	wake  chan struct{} // capacity 1
	hurry chan struct{} // capacity 1: a fence or a writer waits
	// failing: the last delivery failed. Items queued meanwhile count as
	// tried at once, so that writers do not wait for the next retry.
	failing bool // guarded by outbox.mu
	// unrecorded: the last delivery was applied at the destination, and
	// recording that in the store failed (a full disk). Items queued
	// meanwhile count as tried at once too. Guarded by outbox.mu.
	unrecorded error
	// applied counts the items at the head of items that the destination
	// applied and that acknowledge has yet to record: delivered, for a
	// fence, though still queued; the deliverer sends what is behind
	// them, and records them all, in order, once the store records
	// again (done). Set while recording fails, cleared once it worked.
	// Guarded by outbox.mu.
	applied int
	// attempts counts the deliveries tried, done or failed; tick is
	// closed and replaced after each, and sending is set during one:
	// a fence waits for an attempt begun after it (see fence). Guarded
	// by outbox.mu.
	attempts uint64
	tick     chan struct{}
	sending  bool
}

// MaxDelivery bounds the header bytes of one delivery, well under the
// frame header limit.
const MaxDelivery = 512 << 10

// MaxBacklog bounds the bytes of index operations committed and not yet
// tried at their destinations. Writers are acknowledged without waiting
// for delivery while the backlog is below it; above it, each waits for its
// own records, so a sustained stream of tag writes runs at the speed the
// index servers apply it and the outbox never grows without bound.
const MaxBacklog = 16 << 20

// Open makes the outbox of the records in cfg.Log. It delivers nothing
// until Start.
func Open(cfg Config) (*Outbox, error) {
	ob := &Outbox{store: cfg.Log, log: cfg.Logger, decode: cfg.Decode}
	if ob.log == nil {
		ob.log = slog.Default()
	}
	ob.mu.queues = map[int]*destQueue{}
	// Sequence numbers continue after the records left in the store, and
	// after their marks: a mark must never name a later record.
	var last uint64
	for _, p := range []byte{RecordPrefix, MarkPrefix} {
		err := ob.store.Scan([]byte{p}, func(k, _ []byte) error {
			if len(k) >= 9 {
				last = max(last, binary.BigEndian.Uint64(k[1:9]))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	ob.mu.next = last + 1
	ob.ctx, ob.cancel = context.WithCancel(context.Background())
	return ob, nil
}

// Add takes the next sequence number for a record about to be committed.
// The caller holds ix.mu, so sequence order is commit order.
func (ob *Outbox) Add(ops *postings.Ops) *Record {
	return ob.addRecord(&Record{ops: *ops, size: len(ops.Bytes())})
}

// AddSplit is add for a record of the changes split, by destination among
// len(split) servers.
func (ob *Outbox) AddSplit(split []postings.Ops) *Record {
	size := 0
	for i := range split {
		size += len(split[i].Bytes())
	}
	return ob.addRecord(&Record{split: split, size: size})
}

func (ob *Outbox) addRecord(r *Record) *Record {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	r.seq, r.tried = ob.mu.next, make(chan struct{})
	ob.mu.next++
	ob.mu.pending = append(ob.mu.pending, r)
	ob.openLocked(r)
	return r
}

// openLocked counts r in the backlog until it is tried, and drops the
// tried records at the head of the open list.
func (ob *Outbox) openLocked(r *Record) {
	i := 0
	for i < len(ob.mu.open) && ob.mu.open[i].done {
		i++
	}
	ob.mu.open = append(ob.mu.open[i:], r)
	ob.mu.backlog += r.size
}

// triedLocked records that r has been tried at every destination.
func (ob *Outbox) triedLocked(r *Record) {
	if r.done {
		return
	}
	r.done = true
	close(r.tried)
	ob.mu.backlog = max(ob.mu.backlog-r.size, 0)
}

// Overloaded reports whether the backlog is over MaxBacklog.
func (ob *Outbox) Overloaded() bool {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	return ob.mu.backlog > MaxBacklog
}

// NextSeq takes a sequence number for a record imported with its object.
func (ob *Outbox) NextSeq() uint64 {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.mu.next++
	return ob.mu.next - 1
}

// Release makes committed records deliverable.
func (ob *Outbox) Release(recs []*Record) {
	if len(recs) == 0 {
		return
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	var last uint64
	for _, r := range recs {
		r.ready = true
		last = max(last, r.seq)
	}
	// Records held before these are durable now: the store syncs in
	// order (see Hold).
	ob.readyHeldLocked(last)
	ob.queueLocked()
}

// Next returns the sequence number the next record will take. Taken
// where records are added (under ix.mu, so that sequence order is commit
// order), it bounds the records committed before what the caller commits:
// for ReleaseHeld.
func (ob *Outbox) Next() uint64 {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	return ob.mu.next
}

// ReleaseHeld makes the held records before seq (Next, taken when a
// change without records of its own was committed) deliverable, once
// that change is durable: they are durable too (see Hold). Release does
// this for the records before those it releases; a commit without index
// changes calls ReleaseHeld. A tag put sent again after one whose sync
// failed is such a commit (the first one's change is applied, so it
// changes nothing for the index), and it is acknowledged: the first one's
// record, held, must be delivered before a fence counts everything
// delivered, or a query misses the tag.
func (ob *Outbox) ReleaseHeld(seq uint64) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if ob.readyHeldLocked(seq) {
		ob.queueLocked()
	}
}

// Holds reports whether records are held (see Hold) and not yet
// deliverable.
func (ob *Outbox) Holds() bool {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	for _, r := range ob.mu.pending {
		if r.held && !r.ready {
			return true
		}
	}
	return false
}

// readyHeldLocked makes the held records before seq ready, and reports
// whether there were any.
func (ob *Outbox) readyHeldLocked(seq uint64) (any bool) {
	for _, r := range ob.mu.pending {
		if r.seq >= seq {
			break
		}
		if r.held && !r.ready {
			r.ready, any = true, true
		}
	}
	return any
}

// Hold keeps records whose commit was applied but whose sync failed. They
// are in the store, and durable once a record committed after them is:
// the store syncs its log in order, and recovers from a failed sync only
// by making everything applied durable. They count as tried at once, so
// that no fence waits for them, and they are delivered in their place with
// the next records released, or once a later commit without records is
// durable (ReleaseHeld), or else at the next start. Dropped,
// such a record would stay in the store and be delivered at the next start
// after newer changes of the same entries, undoing them: the index would
// name a tag deleted since.
func (ob *Outbox) Hold(recs []*Record) {
	if len(recs) == 0 {
		return
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	for _, r := range recs {
		r.held = true
		ob.triedLocked(r)
	}
	// A later record released already (its committer's sync succeeded
	// first, once the log moved past the failed one) is durable, so
	// these are too: left unready, they would keep it queued behind
	// them, untried, and every fence would wait for it.
	var last uint64
	for _, r := range ob.mu.pending {
		if r.ready && !r.held && !r.dropped {
			last = r.seq
		}
	}
	if ob.readyHeldLocked(last) {
		ob.queueLocked()
	}
}

// Drop forgets records whose commit failed.
func (ob *Outbox) Drop(recs []*Record) {
	if len(recs) == 0 {
		return
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	for _, r := range recs {
		r.ready, r.dropped = true, true
		ob.triedLocked(r)
	}
	ob.queueLocked()
}

// queueLocked moves the ready records at the head of pending to the queues
// of their destinations (none before start: the count is unknown).
func (ob *Outbox) queueLocked() {
	if ob.mu.count == 0 {
		return
	}
	part := tagindex.For(ob.mu.count)
	i := 0
	for ; i < len(ob.mu.pending); i++ {
		r := ob.mu.pending[i]
		if !r.ready {
			break
		}
		if r.dropped {
			continue
		}
		order, items := ob.splitLocked(r, part)
		r.ops, r.split = postings.Ops{}, nil
		r.unacked, r.untried = len(order), len(order)
		if len(order) == 0 {
			ob.triedLocked(r)
			if r.loaded {
				ob.mu.idle = append(ob.mu.idle, r)
			}
			continue
		}
		for j, d := range order {
			q := ob.mu.queues[d]
			if q == nil {
				q = &destQueue{wake: make(chan struct{}, 1), hurry: make(chan struct{}, 1), tick: make(chan struct{})}
				ob.mu.queues[d] = q
				ob.wg.Add(1)
				go ob.run(d, q)
			}
			q.items = append(q.items, items[j])
			q.size += items[j].size
			if q.failing || q.unrecorded != nil {
				ob.markTriedLocked(items[j])
			}
			select {
			case q.wake <- struct{}{}:
			default:
			}
		}
	}
	ob.mu.pending = ob.mu.pending[i:]
}

// splitLocked divides r by destination, in deliveries of at most half of
// MaxDelivery each.
func (ob *Outbox) splitLocked(r *Record, part *tagindex.Partition) (order []int, items []*item) {
	defer func() {
		// The last item of each destination completes its part.
		seen := map[int]bool{}
		for i := len(items) - 1; i >= 0; i-- {
			if d := items[i].dest; !seen[d] {
				seen[d], items[i].last = true, true
			}
		}
	}()
	if len(r.split) == ob.mu.count {
		for d := range r.split {
			if r.skip[d] {
				continue
			}
			for _, piece := range Chunks(&r.split[d], MaxDelivery/2) {
				order = append(order, d)
				items = append(items, &item{rec: r, dest: d, ops: piece, size: len(piece.Bytes())})
			}
		}
		return order, items
	}
	// Split under another count (cannot happen: the count is fixed once
	// the outbox starts): split again.
	for i := range r.split {
		r.ops.Append(&r.split[i])
	}
	cur := make([]*item, ob.mu.count)
	_ = r.ops.Each(func(k, _ []byte, _ bool, rec []byte) error {
		d, err := part.EntryOwnerOf(k)
		if err != nil {
			ob.log.Error("dropping a malformed index operation from the outbox", "record", r.seq, "err", err)
			return nil
		}
		if r.skip[d] {
			return nil
		}
		it := cur[d]
		if it == nil || it.size >= MaxDelivery/2 {
			it = &item{rec: r, dest: d}
			cur[d] = it
			order = append(order, d)
			items = append(items, it)
		}
		it.ops.AppendRecord(rec)
		it.size += len(rec)
		return nil
	})
	return order, items
}

// Close stops the deliverers and waits for them.
func (ob *Outbox) Close() {
	ob.cancel()
	ob.wg.Wait()
}
