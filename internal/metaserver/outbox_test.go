package metaserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/postings"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/region"

	"github.com/pdcgo/pdc/internal/wire"
)

// TestConcurrentAcksLeaveNoMark drives done directly, as two deliverers
// (one goroutine per destination, outbox.run) do: one record with one
// item (its last) for each of destinations 1 and 2, acknowledged at about
// the same time. Whatever the interleaving, once both calls have returned,
// the record and every mark of it are gone. When done decided under ob.mu
// but committed after unlocking, the second acknowledger's deletion could
// reach the store before the first one's mark, which then outlived its
// record; the loop met that within a few thousand iterations.
func TestConcurrentAcksLeaveNoMark(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), CheckpointDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetPlacement(0, 3)
	if err := s.StartIndex(context.Background(), nil); err != nil { // empty outbox: count 3
		t.Fatal(err)
	}
	ob := &s.ix.ob
	for seq := uint64(1); seq <= 20000; seq++ {
		r := &obRecord{seq: seq, tried: make(chan struct{}), unacked: 2, untried: 2}
		q1 := &destQueue{items: []*obItem{{rec: r, dest: 1, last: true}}}
		q2 := &destQueue{items: []*obItem{{rec: r, dest: 2, last: true}}}
		b := s.st.db.NewBatch()
		_ = b.Set(keyOutbox(seq, 0), []byte{}, nil)
		if err := s.st.commit(b); err != nil {
			t.Fatal(err)
		}
		b.Close()
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, q := range []*destQueue{q1, q2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := ob.done(q, q.items); err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, k := range [][]byte{keyOutbox(seq, 0), keyAcked(seq, 1), keyAcked(seq, 2)} {
			if _, ok, _ := s.st.get(k); ok {
				t.Fatalf("iteration %d: both destinations acknowledged the record, yet %x is left in the store", seq, k)
			}
		}
	}
}

// TestOrphanMarkNamesNoNewRecord: a mark whose record is gone (as the
// race of TestConcurrentAcksLeaveNoMark left one) must not be taken for a
// new record's. Sequence numbers continue after the marks too: here the
// cluster grew from 2 to 3 servers and another server moves a record of an
// object here before this server's own MoveForeign scans its store; the
// imported record must not get the orphan's sequence number, or
// moveRecord would drop the entries the mark names, which nobody applied.
func TestOrphanMarkNamesNoNewRecord(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, CheckpointDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// What the race leaves: record 1 deleted, server 1's mark (count 2) set after.
	b := s.st.db.NewBatch()
	_ = b.Set(keyAcked(1, 1), binary.BigEndian.AppendUint32(nil, 2), nil)
	if err := s.st.commit(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetPlacement(0, 3)
	id := objectOf(0, 3) // server 0's under 3 servers
	ops := valueEntries(id, 200)
	want := ops.Len()
	// Another server's move: its record of the object comes here.
	imp := &wire.KVBatch{Keys: [][]byte{keyOutbox(42, id)}, Values: [][]byte{(&wire.IndexOps{Version: wire.IndexOpsPacked, Packed: ops.Bytes()}).Marshal(nil)}}
	if err := s.importKVs(imp); err != nil {
		t.Fatal(err)
	}
	var key []byte
	_ = s.scan([]byte{'Q'}, func(k, _ []byte) error {
		key = bytes.Clone(k)
		return nil
	})
	if key == nil {
		t.Fatal("the imported record is not in the outbox")
	}
	if _, err := s.MoveForeign(context.Background(), func(context.Context, int, *wire.KVBatch) error { return nil }); err != nil {
		t.Fatal(err)
	}
	v, ok, err := s.st.get(key)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	if ok {
		left, err := recordOps(v)
		if err != nil {
			t.Fatal(err)
		}
		got = left.Len()
	}
	if got != want {
		t.Fatalf("the imported record %x (never delivered anywhere) keeps %d of its %d entries", key, got, want)
	}
}

// failSyncs puts s's store under sync durability with a failed fsync,
// which fails every later wait until restore.
func failSyncs(s *Service) (restore func()) {
	w := s.st.log
	w.mu.Lock()
	w.sync = true
	w.mu.Unlock()
	w.syncMu.Lock()
	w.err = errors.New("injected fsync failure")
	w.syncMu.Unlock()
	return func() {
		w.syncMu.Lock()
		w.err = nil
		w.syncMu.Unlock()
	}
}

// failCommits makes every store commit fail (as a log that cannot rotate
// would) until the returned function is called.
func failCommits(t *testing.T, s *Service) (restore func()) {
	t.Helper()
	w := s.st.log
	w.mu.Lock()
	f := w.f
	w.f = nil
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		w.f = f
		w.mu.Unlock()
	}
}

// TestFailedAckIsNotSentAgain: a part for this server's own partition
// (a record loaded at start can hold one) is applied locally; if the
// acknowledgement then cannot be recorded, acknowledge retries the record
// alone. Sending the part again would apply the old change after a tag
// write that changed the same entries meanwhile, directly (not through the
// outbox), and bring back the entries it deleted.
func TestFailedAckIsNotSentAgain(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.svcs[0]
	id := c.create("obj")
	c.put(id, "key", "aaaa")
	ops := tagEntries(id, "key", "aaaa", s.ix.suffix)
	ob := &s.ix.ob
	seq := ob.nextSeq()
	b := s.st.db.NewBatch()
	_ = b.Set(keyOutbox(seq, 0), []byte{}, nil)
	if err := s.st.commit(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	r := &obRecord{seq: seq, tried: make(chan struct{}), unacked: 1, untried: 1}
	q := &destQueue{items: []*obItem{{rec: r, dest: 0, last: true, ops: ops, size: len(ops.Bytes())}}}
	items, o := ob.take(q)
	if err := ob.send(0, o); err != nil {
		t.Fatal(err)
	}
	restore := failCommits(t, s)
	acked := make(chan bool)
	go func() { acked <- ob.acknowledge(0, q, items) }()
	<-r.tried // the failed try counts: the changes are in place
	restore()
	c.put(id, "key", "bbbb")
	if !<-acked {
		t.Fatal("acknowledge gave up")
	}
	for _, scan := range []bool{true, false} {
		if got := c.query("key=aaaa", scan); len(got) != 0 {
			t.Fatalf("key=aaaa (scan %v) finds %v after the tag became bbbb", scan, got)
		}
	}
	if _, ok, err := s.st.get(keyOutbox(seq, 0)); err != nil || ok {
		t.Fatalf("the acknowledged record is still stored (err %v)", err)
	}
}

// TestDoneSeveralItemsAndAFailedCommit: one delivery carrying several
// items of one record and items of several records deletes each fully
// acknowledged record once and marks the others' parts once, with the
// marks a record was loaded with; a failed commit changes nothing in
// memory and the retry counts once.
func TestDoneSeveralItemsAndAFailedCommit(t *testing.T) {
	c := newTestCluster(t, 3)
	s := c.svcs[0]
	ob := &s.ix.ob
	put := func(k []byte) {
		b := s.st.db.NewBatch()
		defer b.Close()
		_ = b.Set(k, []byte{}, nil)
		if err := s.st.commit(b); err != nil {
			t.Fatal(err)
		}
	}
	has := func(k []byte) bool {
		_, ok, err := s.st.get(k)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	s1, s2 := ob.nextSeq(), ob.nextSeq()
	put(keyOutbox(s1, 0))
	put(keyOutbox(s2, 0))
	// A loaded record's skip marks: dest 0 under count 3 (followed) and
	// dest 5 under count 9 (not followed); both go with the record.
	n3 := binary.BigEndian.AppendUint32(nil, 3)
	n9 := binary.BigEndian.AppendUint32(nil, 9)
	b := s.st.db.NewBatch()
	_ = b.Set(keyAcked(s1, 0), n3, nil)
	_ = b.Set(keyAcked(s1, 5), n9, nil)
	if err := s.st.commit(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// r1: dest 1 has two items (a, b), dest 2 one (c). r2: dest 1 only (x).
	r1 := &obRecord{seq: s1, skip: map[int]bool{0: true, 5: false}, tried: make(chan struct{}), unacked: 3, untried: 3}
	r2 := &obRecord{seq: s2, tried: make(chan struct{}), unacked: 1, untried: 1}
	a := &obItem{rec: r1, dest: 1}
	bb := &obItem{rec: r1, dest: 1, last: true}
	x := &obItem{rec: r2, dest: 1, last: true}
	cc := &obItem{rec: r1, dest: 2, last: true}
	q1 := &destQueue{items: []*obItem{a, bb, x}}
	q2 := &destQueue{items: []*obItem{cc}}

	// First try of q1's delivery: the commit fails; nothing changes.
	restore := failCommits(t, s)
	err := ob.done(q1, q1.items)
	restore()
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
	if has(keyOutbox(s2, 0)) || !has(keyOutbox(s1, 0)) || !has(keyAcked(s1, 1)) {
		t.Fatalf("after q1: r2 kept %v, r1 kept %v, r1 marked for 1 %v", has(keyOutbox(s2, 0)), has(keyOutbox(s1, 0)), has(keyAcked(s1, 1)))
	}
	if err := ob.done(q2, q2.items); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][]byte{keyOutbox(s1, 0), keyAcked(s1, 0), keyAcked(s1, 1), keyAcked(s1, 2), keyAcked(s1, 5)} {
		if has(k) {
			t.Fatalf("%x left after every destination acknowledged", k)
		}
	}
	if r1.unacked != 0 || len(r1.acked) != 1 {
		t.Fatalf("r1.unacked %d acked %v", r1.unacked, r1.acked)
	}
}

// TestOwnPartsApplyAtStart: the part of a loaded record that belongs to
// this server's own partition is applied by start itself, before the
// server serves, and never goes to a deliverer: a deliverer's retry could
// apply it after a tag write that changed the same entries directly. A
// start that cannot apply it fails.
func TestOwnPartsApplyAtStart(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.svcs[0]
	id := c.create("obj")
	c.put(id, "key", "aaaa")
	// A tag and its outbox record, as a commit before the server knew its
	// place leaves them: the record holds the index entries, unapplied.
	ops := tagEntries(id, "key2", "zzzz", s.ix.suffix)
	seq := s.ix.ob.nextSeq()
	b := s.st.db.NewBatch()
	_ = b.Set(keyTag(kindObject, id, "key2"), (&wire.TagValue{Type: int32(region.String), Value: []byte("zzzz")}).Marshal(nil), nil)
	_ = b.Set(keyOutbox(seq, 0), (&wire.IndexOps{Version: wire.IndexOpsPacked, Packed: ops.Bytes()}).Marshal(nil), nil)
	if err := s.st.commit(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	c.close()

	// A start whose store fails cannot apply the part: it says so.
	bad, err := Open(Config{Dir: c.dirs[0], CheckpointDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	bad.SetPlacement(0, 1)
	bad.MovesDone()
	restore := failCommits(t, bad)
	if err := bad.StartIndex(context.Background(), fakePeers{c}); err == nil {
		t.Error("the index started although this server's part of a record could not be applied")
	}
	restore()
	bad.Close()

	c.open()
	s = c.svcs[0]
	s.ix.ob.mu.Lock()
	own := s.ix.ob.mu.queues[0]
	s.ix.ob.mu.Unlock()
	if own != nil {
		t.Fatal("start queued this server's own part for a deliverer")
	}
	for _, scan := range []bool{false, true} {
		if got := c.query("key2=zzzz", scan); !slices.Equal(got, []uint64{id}) {
			t.Fatalf("key2=zzzz (scan %v) finds %v after the start, want [%d]", scan, got, id)
		}
	}
	c.put(id, "key2", "yyyy")
	for _, scan := range []bool{false, true} {
		if got := c.query("key2=zzzz", scan); len(got) != 0 {
			t.Fatalf("key2=zzzz (scan %v) finds %v after the tag became yyyy", scan, got)
		}
	}
	c.close()
	wantOutboxesEmpty(t, c.dirs)
}

// TestUnsyncedChangeIsNotDelivered: under sync durability, a tag change
// whose sync failed is refused, and its index entries for other servers
// are not delivered: if the change did not outlive a crash, they would
// name a tag that is not there.
func TestUnsyncedChangeIsNotDelivered(t *testing.T) {
	c := newTestCluster(t, 2)
	id, key := c.createWithRemoteKey(0)
	failSyncs(c.svcs[0])
	if err := c.tryPut(id, key, "value"); err == nil {
		t.Fatal("a put whose sync failed was acknowledged")
	}
	if got := c.query(key+"=value", false); len(got) != 0 {
		t.Fatalf("the index on server 1 found %v for a change whose sync failed", got)
	}
}

// TestSyncedBeforeAFailureStaysSynced: a change whose log bytes were synced
// before a later sync failed is durable, and its wait says so. Failing it
// would drop its outbox record, which the next start delivers after newer
// ones.
func TestSyncedBeforeAFailureStaysSynced(t *testing.T) {
	w, _, err := openWAL(t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.reset(0); err != nil {
		t.Fatal(err)
	}
	defer w.close()
	w.mu.Lock()
	first, err := w.append([]byte("first"))
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.waitSynced(first); err != nil {
		t.Fatal(err)
	}
	w.syncMu.Lock()
	w.err = errors.New("injected fsync failure")
	w.syncMu.Unlock()
	w.mu.Lock()
	second, err := w.append([]byte("second"))
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.waitSynced(first); err != nil {
		t.Fatalf("a change synced before the failure: %v", err)
	}
	if err := w.waitSynced(second); err == nil {
		t.Fatal("a change logged after the failure counts as synced")
	}
}

// tagEntries returns the index entries of string tag key=value of object
// id.
func tagEntries(id uint64, key, value string, suffix bool) postings.Ops {
	var ops postings.Ops
	tagindex.WriteObjectEntries(&ops, key, int32(region.String), []byte(value), tagindex.ValueOf(region.String, []byte(value)), id, suffix, false)
	return ops
}

// wantOutboxesEmpty fails unless the closed stores of dirs hold no outbox
// record and no mark.
func wantOutboxesEmpty(t *testing.T, dirs []string) {
	t.Helper()
	for _, p := range []byte{'Q', 'q'} {
		if n := storedKeys(t, dirs, p); n != 0 {
			t.Fatalf("%d %q keys left in the outboxes after every delivery", n, p)
		}
	}
}

// createWithRemoteKey creates an object on server owner of a two-server
// cluster and returns it with a tag key whose K entry lives on the other.
func (c *testCluster) createWithRemoteKey(owner int) (uint64, string) {
	for i := 0; ; i++ {
		name, key := fmt.Sprint("obj", i), fmt.Sprint("key", i)
		if placement.Owner(placement.Key(name, 0), 2) == owner && tagindex.For(2).Owner(key) == 1-owner {
			return c.create(name), key
		}
	}
}
