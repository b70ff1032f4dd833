package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/postings"
)

// memLog is an in-memory Log: changes apply at once and are durable when
// applied; fail makes every change fail until it is cleared.
type memLog struct {
	mu   sync.Mutex
	kv   map[string][]byte
	fail error
	own  postings.Ops // what ApplyOwn applied
}

func newMemLog() *memLog { return &memLog{kv: map[string][]byte{}} }

func (l *memLog) Scan(p []byte, fn func(k, v []byte) error) error {
	l.mu.Lock()
	var keys []string
	for k := range l.kv {
		if strings.HasPrefix(k, string(p)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		vals[i] = l.kv[k]
	}
	l.mu.Unlock()
	for i, k := range keys {
		if err := fn([]byte(k), vals[i]); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) Write(dels, sets [][]byte, val []byte) (func() error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return nil, l.fail
	}
	for _, k := range dels {
		delete(l.kv, string(k))
	}
	for _, k := range sets {
		l.kv[string(k)] = slices.Clone(val)
	}
	return noWait, nil
}

func (l *memLog) ApplyOwn(ops *postings.Ops, key, val []byte) (func() error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return nil, l.fail
	}
	l.own.Append(ops)
	l.kv[string(key)] = slices.Clone(val)
	return noWait, nil
}

func (l *memLog) set(k []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kv[string(k)] = []byte{}
}

func (l *memLog) has(k []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.kv[string(k)]
	return ok
}

func (l *memLog) setFail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail = err
}

// countPeers counts the deliveries to each destination and applies
// nothing.
type countPeers struct {
	mu    sync.Mutex
	calls map[int]int
}

func (p *countPeers) Apply(_ context.Context, dest int, _ *postings.Ops) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls == nil {
		p.calls = map[int]int{}
	}
	p.calls[dest]++
	return nil
}

func decodeNone([]byte) (postings.Ops, error) { return postings.Ops{}, nil }

// openStarted opens an outbox on log, started as server self of count.
func openStarted(t *testing.T, log Log, self, count int, peers Peers) *Outbox {
	t.Helper()
	ob, err := Open(Config{Log: log, Decode: decodeNone, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ob.Close)
	if _, err := ob.Start(self, count, peers); err != nil {
		t.Fatal(err)
	}
	return ob
}

var errInjected = errors.New("injected store failure")

// TestConcurrentAcksLeaveNoMark drives done directly, as two deliverers
// (one goroutine per destination, run) do: one record with one item (its
// last) for each of destinations 1 and 2, acknowledged at about the same
// time. Whatever the interleaving, once both calls have returned, the
// record and every mark of it are gone. When done decided under ob.mu but
// committed after unlocking, the second acknowledger's deletion could
// reach the store before the first one's mark, which then outlived its
// record; the loop met that within a few thousand iterations.
func TestConcurrentAcksLeaveNoMark(t *testing.T) {
	log := newMemLog()
	ob := openStarted(t, log, 0, 3, &countPeers{}) // empty outbox: count 3
	for seq := uint64(1); seq <= 20000; seq++ {
		r := &Record{seq: seq, tried: make(chan struct{}), unacked: 2, untried: 2}
		q1 := &destQueue{items: []*item{{rec: r, dest: 1, last: true}}}
		q2 := &destQueue{items: []*item{{rec: r, dest: 2, last: true}}}
		log.set(RecordKey(seq, 0))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, q := range []*destQueue{q1, q2} {
			wg.Go(func() {
				<-start
				if err := ob.done(q, q.items); err != nil {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		for _, k := range [][]byte{RecordKey(seq, 0), MarkKey(seq, 1), MarkKey(seq, 2)} {
			if log.has(k) {
				t.Fatalf("iteration %d: both destinations acknowledged the record, yet %x is left in the store", seq, k)
			}
		}
	}
}

// TestFailedAckIsNotSentAgain: once a destination has applied a part, an
// acknowledgement that cannot be recorded is retried alone: the part is
// not sent again. For this server's own part (a record loaded at start can
// hold one), sending it again would apply the old change after a tag write
// that changed the same entries meanwhile, directly (not through the
// outbox), and bring back the entries it deleted.
func TestFailedAckIsNotSentAgain(t *testing.T) {
	log := newMemLog()
	peers := &countPeers{}
	ob := openStarted(t, log, 0, 1, peers)
	seq := ob.NextSeq()
	log.set(RecordKey(seq, 0))
	var ops postings.Ops
	ops.Set([]byte("entry"), []byte("value"))
	r := &Record{seq: seq, tried: make(chan struct{}), unacked: 1, untried: 1}
	q := &destQueue{items: []*item{{rec: r, dest: 0, last: true, ops: ops, size: len(ops.Bytes())}}, tick: make(chan struct{})}
	items, o := ob.take(q)
	if err := ob.send(0, o); err != nil {
		t.Fatal(err)
	}
	log.setFail(errInjected)
	acked := make(chan bool)
	go func() { acked <- ob.acknowledge(0, q, len(items)) }()
	<-r.tried // the failed try counts: the changes are in place
	log.setFail(nil)
	if !<-acked {
		t.Fatal("acknowledge gave up")
	}
	peers.mu.Lock()
	calls := peers.calls[0]
	peers.mu.Unlock()
	if calls != 1 {
		t.Fatalf("the part went to its destination %d times, want once", calls)
	}
	if log.has(RecordKey(seq, 0)) {
		t.Fatal("the acknowledged record is still stored")
	}
}

// TestDoneSeveralItemsAndAFailedCommit: one delivery carrying several
// items of one record and items of several records deletes each fully
// acknowledged record once and marks the others' parts once, with the
// marks a record was loaded with; a failed commit changes nothing in
// memory and the retry counts once.
func TestDoneSeveralItemsAndAFailedCommit(t *testing.T) {
	log := newMemLog()
	ob := openStarted(t, log, 0, 3, &countPeers{})
	s1, s2 := ob.NextSeq(), ob.NextSeq()
	log.set(RecordKey(s1, 0))
	log.set(RecordKey(s2, 0))
	// A loaded record's skip marks: dest 0 under count 3 (followed) and
	// dest 5 under count 9 (not followed); both go with the record.
	if _, err := log.Write(nil, [][]byte{MarkKey(s1, 0)}, MarkValue(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Write(nil, [][]byte{MarkKey(s1, 5)}, MarkValue(9)); err != nil {
		t.Fatal(err)
	}
	// r1: dest 1 has two items (a, b), dest 2 one (c). r2: dest 1 only (x).
	r1 := &Record{seq: s1, skip: map[int]bool{0: true, 5: false}, tried: make(chan struct{}), unacked: 3, untried: 3}
	r2 := &Record{seq: s2, tried: make(chan struct{}), unacked: 1, untried: 1}
	a := &item{rec: r1, dest: 1}
	bb := &item{rec: r1, dest: 1, last: true}
	x := &item{rec: r2, dest: 1, last: true}
	cc := &item{rec: r1, dest: 2, last: true}
	q1 := &destQueue{items: []*item{a, bb, x}}
	q2 := &destQueue{items: []*item{cc}}

	// First try of q1's delivery: the commit fails; nothing changes.
	log.setFail(errInjected)
	err := ob.done(q1, q1.items)
	log.setFail(nil)
	if err == nil {
		t.Fatal("done succeeded with the store failing")
	}
	if r1.unacked != 3 || r2.unacked != 1 || len(q1.items) != 3 || len(r1.acked) != 0 {
		t.Fatalf("a failed done changed memory: r1.unacked %d r2.unacked %d q1 %d acked %v", r1.unacked, r2.unacked, len(q1.items), r1.acked)
	}
	ob.failed(q1)
	// The retry.
	if err := ob.done(q1, q1.items); err != nil {
		t.Fatal(err)
	}
	if r1.unacked != 1 || r2.unacked != 0 || !slices.Equal(r1.acked, []int{1}) || len(q1.items) != 0 {
		t.Fatalf("after the retry: r1.unacked %d r2.unacked %d acked %v q1 %d", r1.unacked, r2.unacked, r1.acked, len(q1.items))
	}
	if log.has(RecordKey(s2, 0)) || !log.has(RecordKey(s1, 0)) || !log.has(MarkKey(s1, 1)) {
		t.Fatalf("after q1: r2 kept %v, r1 kept %v, r1 marked for 1 %v", log.has(RecordKey(s2, 0)), log.has(RecordKey(s1, 0)), log.has(MarkKey(s1, 1)))
	}
	if err := ob.done(q2, q2.items); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][]byte{RecordKey(s1, 0), MarkKey(s1, 0), MarkKey(s1, 1), MarkKey(s1, 2), MarkKey(s1, 5)} {
		if log.has(k) {
			t.Fatalf("%x left after every destination acknowledged", k)
		}
	}
	if r1.unacked != 0 || len(r1.acked) != 1 {
		t.Fatalf("r1.unacked %d acked %v", r1.unacked, r1.acked)
	}
}

// TestChunks: a delivery is cut at record boundaries into pieces of at
// most the limit (a record longer than it alone), keeping every record in
// order.
func TestChunks(t *testing.T) {
	var ops postings.Ops
	for i := range 1000 {
		ops.Set(fmt.Appendf(nil, "key%04d", i), bytes.Repeat([]byte{'v'}, i%50))
	}
	ops.Set([]byte("big"), bytes.Repeat([]byte{'b'}, 5000))
	var again postings.Ops
	for _, limit := range []int{1 << 20, 4096, 100} {
		pieces := Chunks(&ops, limit)
		again.Reset()
		for i := range pieces {
			if pieces[i].Len() == 0 || (len(pieces[i].Bytes()) > limit && pieces[i].Len() > 1) {
				t.Fatalf("limit %d: piece %d has %d records, %d bytes", limit, i, pieces[i].Len(), len(pieces[i].Bytes()))
			}
			again.Append(&pieces[i])
		}
		if !bytes.Equal(again.Bytes(), ops.Bytes()) {
			t.Fatalf("limit %d: the pieces do not add up to the records", limit)
		}
	}
	if got := Chunks(&postings.Ops{}, 100); len(got) != 0 {
		t.Fatalf("an empty delivery in %d pieces", len(got))
	}
}

// gatePeers fails every delivery while down, and otherwise keeps the
// keys it was given, each delivery a little after it came (so that a
// fence that does not wait for all of a backlog returns before it is
// all delivered).
type gatePeers struct {
	mu      sync.Mutex
	down    bool
	applied map[string]bool
}

func (p *gatePeers) Apply(_ context.Context, _ int, ops *postings.Ops) error {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		return errors.New("dial: connection refused")
	}
	time.Sleep(20 * time.Millisecond)
	p.mu.Lock()
	defer p.mu.Unlock()
	return ops.Each(func(k, _ []byte, _ bool, _ []byte) error {
		p.applied[string(k)] = true
		return nil
	})
}

func (p *gatePeers) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// TestFenceNamesWhatItCouldNotDeliver: a fence returns once everything
// committed before it is delivered, or names the destination it could
// not be delivered to. It used to count a failed try as done: a query
// then looked at a destination the client reached but this server had
// not (the crash loop: a search as a restarted server rejoined missed
// tags and found a deleted object), and after the first delivery of a
// backlog that took several it returned with the rest still queued.
func TestFenceNamesWhatItCouldNotDeliver(t *testing.T) {
	log := newMemLog()
	peers := &gatePeers{down: true, applied: map[string]bool{}}
	ob := openStarted(t, log, 0, 2, peers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A backlog of several deliveries for server 1, committed while it
	// is down.
	var keys []string
	for r := range 6 {
		split := make([]postings.Ops, 2)
		for e := range 64 {
			k := fmt.Sprintf("entry-%d-%d", r, e)
			split[1].Set([]byte(k), bytes.Repeat([]byte{'v'}, 4096))
			keys = append(keys, k)
		}
		rec := ob.AddSplit(split)
		log.set(RecordKey(rec.Seq(), 0))
		ob.Release([]*Record{rec})
	}
	undelivered, err := ob.Fence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(undelivered, []int{1}) {
		t.Fatalf("with server 1 down, the fence names %v as undelivered, want [1]", undelivered)
	}

	peers.setDown(false)
	undelivered, err = ob.Fence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(undelivered) != 0 {
		t.Fatalf("with server 1 up, the fence names %v as undelivered", undelivered)
	}
	peers.mu.Lock()
	defer peers.mu.Unlock()
	for _, k := range keys {
		if !peers.applied[k] {
			t.Fatalf("the fence returned with nothing undelivered, yet %s (of %d entries, %d applied) was not delivered", k, len(keys), len(peers.applied))
		}
	}
}

// TestReleaseHeld: a record held (its commit applied, its sync failed) is
// delivered once a later commit without records of its own is durable,
// before a fence counts everything delivered. The put sent again after
// one whose sync failed is such a commit; its record used to stay held
// until some later record was released, and a query missed the tag.
func TestReleaseHeld(t *testing.T) {
	log := newMemLog()
	peers := &gatePeers{applied: map[string]bool{}}
	ob := openStarted(t, log, 0, 2, peers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	split := make([]postings.Ops, 2)
	split[1].Set([]byte("entry"), []byte{'v'})
	rec := ob.AddSplit(split)
	log.set(RecordKey(rec.Seq(), 0))
	ob.Hold([]*Record{rec})
	bound := ob.Next() // a commit after it, without records
	ob.ReleaseHeld(bound)
	undelivered, err := ob.Fence(ctx)
	if err != nil || len(undelivered) != 0 {
		t.Fatalf("fence: %v, %v", undelivered, err)
	}
	peers.mu.Lock()
	defer peers.mu.Unlock()
	if !peers.applied["entry"] {
		t.Fatal("the fence counted everything delivered with the held record not")
	}
}

// TestHoldAfterALaterRelease: a record held after a later one was
// released (their committers raced: the later commit's sync, after the
// log moved past the failed one, succeeded before the earlier committer
// held its record) is durable, and goes with it. The later record used
// to stay queued behind the held one, untried, until some other record
// was released: every fence waited for it until its deadline, and every
// indexed query through this server failed.
func TestHoldAfterALaterRelease(t *testing.T) {
	log := newMemLog()
	peers := &gatePeers{applied: map[string]bool{}}
	ob := openStarted(t, log, 0, 2, peers)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	add := func(k string) *Record {
		split := make([]postings.Ops, 2)
		split[1].Set([]byte(k), []byte{'v'})
		rec := ob.AddSplit(split)
		log.set(RecordKey(rec.Seq(), 0))
		return rec
	}
	held, later := add("held"), add("later")
	ob.Release([]*Record{later})
	ob.Hold([]*Record{held})
	undelivered, err := ob.Fence(ctx)
	if err != nil || len(undelivered) != 0 {
		t.Fatalf("fence: %v, %v", undelivered, err)
	}
	peers.mu.Lock()
	defer peers.mu.Unlock()
	if !peers.applied["held"] || !peers.applied["later"] {
		t.Fatalf("the fence counted everything delivered, yet applied: %v", peers.applied)
	}
}

// TestFenceWhileDeliveriesCannotBeRecorded: a delivery applied at its
// destination whose acknowledgement this server's store cannot record (a
// full disk) is delivered: a fence that needs only it returns at once.
// What is queued behind it is sent meanwhile, so a fence that needs that
// returns too, once it is applied, and a query answers while the disk
// stays full. Such a fence used to fail at once with the store's error
// (pdc.ErrNoSpace), and every indexed query through this server with it,
// until the disk had room: the deliverer sent nothing more until it could
// record what was applied. The records stay in the store until it can.
func TestFenceWhileDeliveriesCannotBeRecorded(t *testing.T) {
	log := newMemLog()
	peers := &gatePeers{applied: map[string]bool{}}
	ob := openStarted(t, log, 0, 2, peers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	full := &fs.PathError{Op: "write", Path: "meta/pdc.wal", Err: syscall.ENOSPC}
	log.setFail(full)
	var keys []string
	var seqs []uint64
	for r := range 3 {
		split := make([]postings.Ops, 2)
		k := fmt.Sprint("entry-", r)
		split[1].Set([]byte(k), []byte{'v'})
		keys = append(keys, k)
		rec := ob.AddSplit(split)
		seqs = append(seqs, rec.Seq())
		log.set(RecordKey(rec.Seq(), 0))
		ob.Release([]*Record{rec})
		undelivered, err := ob.Fence(ctx)
		if ctx.Err() != nil {
			t.Fatalf("record %d: the fence waited until its deadline: %v, %v", r, undelivered, err)
		}
		peers.mu.Lock()
		applied := peers.applied[k]
		peers.mu.Unlock()
		if err != nil || len(undelivered) != 0 || !applied {
			t.Fatalf("record %d, behind %d applied and not recorded: the fence answered %v, %v, applied at its destination: %v; want it delivered",
				r, r, undelivered, err, applied)
		}
	}
	for _, s := range seqs {
		if !log.has(RecordKey(s, 0)) {
			t.Fatalf("record %d is gone from the store that could not record its delivery", s)
		}
	}

	log.setFail(nil)
	undelivered, err := ob.Fence(ctx)
	if err != nil || len(undelivered) != 0 {
		t.Fatalf("once the store records again, the fence answered %v, %v", undelivered, err)
	}
	// A record after them is delivered too.
	split := make([]postings.Ops, 2)
	split[1].Set([]byte("after"), []byte{'v'})
	rec := ob.AddSplit(split)
	log.set(RecordKey(rec.Seq(), 0))
	ob.Release([]*Record{rec})
	if err := ob.WaitTried(ctx, []*Record{rec}); err != nil {
		t.Fatal(err)
	}
	if undelivered, err := ob.Fence(ctx); err != nil || len(undelivered) != 0 {
		t.Fatalf("fence: %v, %v", undelivered, err)
	}
	peers.mu.Lock()
	defer peers.mu.Unlock()
	for _, k := range append(keys, "after") {
		if !peers.applied[k] {
			t.Fatalf("the fence returned with nothing undelivered, yet %s was not delivered", k)
		}
	}
}
