package metaserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"sync"
	"testing"

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
