package metaserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/pdcgo/pdc/internal/outbox"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/postings"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/region"

	"github.com/pdcgo/pdc/internal/wire"
)

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
	b := s.st.NewBatch()
	b.Set(outbox.MarkKey(1, 1), binary.BigEndian.AppendUint32(nil, 2))
	if err := s.st.Commit(b); err != nil {
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
	imp := &wire.KVBatch{Keys: [][]byte{outbox.RecordKey(42, id)}, Values: [][]byte{(&wire.IndexOps{Version: wire.IndexOpsPacked, Packed: ops.Bytes()}).Marshal(nil)}}
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
	v, ok, err := s.st.Get(key)
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
	return s.st.FailSyncs(errors.New("injected fsync failure"))
}

// failCommits makes every store commit fail (as a log that cannot rotate
// would) until the returned function is called.
func failCommits(t *testing.T, s *Service) (restore func()) {
	t.Helper()
	return s.st.FailCommits()
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
	seq := s.ix.ob.NextSeq()
	b := s.st.NewBatch()
	b.Set(keyTag(kindObject, id, "key2"), (&wire.TagValue{Type: int32(region.String), Value: []byte("zzzz")}).Marshal(nil))
	b.Set(outbox.RecordKey(seq, 0), (&wire.IndexOps{Version: wire.IndexOpsPacked, Packed: ops.Bytes()}).Marshal(nil))
	if err := s.st.Commit(b); err != nil {
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
	if slices.Contains(s.ix.ob.Stats().Dests, 0) {
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

// TestUnsyncedChangeIsNotDeliveredAfterNewerOnes: a tag change whose sync
// failed is applied all the same, and once the store recovers (its log
// rotates, which flushes everything applied) its outbox record is as
// durable as the rest. The tag is then deleted, and the delete's record
// delivered. The next start must not deliver the first change's record
// after it: the index would name a tag that no longer exists.
func TestUnsyncedChangeIsNotDeliveredAfterNewerOnes(t *testing.T) {
	c := newTestCluster(t, 2)
	id, key := c.createWithRemoteKey(0)
	restore := failSyncs(c.svcs[0])
	if err := c.tryPut(id, key, "value"); err == nil {
		t.Fatal("a put whose sync failed was acknowledged")
	}
	restore()
	// The put was applied: the tag is there, and the delete finds it.
	c.del(id, key)
	q := key + "=value"
	if got := c.query(q, false); len(got) != 0 {
		t.Fatalf("after the delete the index finds %v", got)
	}
	c.close()
	c.open()
	if got := c.query(q, true); len(got) != 0 {
		t.Fatalf("after a restart a scan finds %v for a deleted tag", got)
	}
	if got := c.query(q, false); len(got) != 0 {
		t.Fatalf("after a restart the index finds %v for a deleted tag", got)
	}
}
