package outbox

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/pdcgo/pdc/internal/postings"
	"github.com/pdcgo/pdc/internal/tagindex"
)

// Start loads the records in the store and begins delivering them, and
// the records released from now on, to peers: self is this server's index
// among count metadata servers. It returns the records loaded, to wait
// for (WaitTried). Call it once.
func (ob *Outbox) Start(self, count int, peers Peers) ([]*Record, error) {
	recs, err := ob.load(count)
	if err != nil {
		return nil, err
	}
	if err := ob.applyOwnParts(recs, self, count); err != nil {
		return nil, err
	}
	ob.mu.Lock()
	// Everything queued before start (by a rebuild) is committed, so the
	// store's records replace it.
	ob.mu.pending = recs
	ob.mu.open, ob.mu.backlog = nil, 0
	for _, r := range recs {
		ob.openLocked(r)
	}
	ob.mu.count, ob.mu.self, ob.mu.peers = count, self, peers
	ob.queueLocked()
	idle := ob.mu.idle
	ob.mu.idle = nil
	ob.mu.Unlock()
	// Records with nothing left to deliver: every part was applied before
	// the restart (its last acknowledgement did not get to delete it), or
	// it holds no change at all.
	if len(idle) > 0 {
		var dels [][]byte
		for _, r := range idle {
			dels = append(dels, RecordKey(r.seq, r.obj))
			for d := range r.skip {
				dels = append(dels, MarkKey(r.seq, d))
			}
		}
		if err := ob.write(dels, nil, nil); err != nil {
			return nil, fmt.Errorf("delete delivered outbox records: %w", err)
		}
	}
	return recs, nil
}

// load reads the records in the store with their marks among count
// servers, and deletes the marks whose record is gone and those no build
// wrote.
func (ob *Outbox) load(count int) ([]*Record, error) {
	marks, bad, err := ob.loadMarks(count)
	if err != nil {
		return nil, err
	}
	var recs []*Record
	err = ob.store.Scan([]byte{RecordPrefix}, func(k, v []byte) error {
		if len(k) != 17 {
			return nil
		}
		ops, err := ob.decode(v)
		if err != nil {
			return fmt.Errorf("outbox record %x: %w", k, err)
		}
		seq := binary.BigEndian.Uint64(k[1:9])
		recs = append(recs, &Record{seq: seq, obj: binary.BigEndian.Uint64(k[9:]), skip: marks[seq], loaded: true,
			ops: ops, size: len(ops.Bytes()), ready: true, tried: make(chan struct{})})
		delete(marks, seq)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(marks) > 0 || len(bad) > 0 {
		dels := bad
		for seq, ds := range marks {
			for d := range ds {
				dels = append(dels, MarkKey(seq, d))
			}
		}
		if err := ob.write(dels, nil, nil); err != nil {
			return nil, fmt.Errorf("delete the marks of gone outbox records: %w", err)
		}
	}
	return recs, nil
}

// write commits dels and sets, and waits until the change is durable.
func (ob *Outbox) write(dels, sets [][]byte, val []byte) error {
	wait, err := ob.store.Write(dels, sets, val)
	if err != nil {
		return err
	}
	return wait()
}

// applyOwnParts applies, in sequence order, the entries of loaded records
// that belong to this server's own partition (a record written before the
// server knew its place, by a rebuild or under another count holds some),
// each with its mark in one change, and leaves the records the other
// servers' parts. Start does this before the server serves: once it
// serves, tag writes change its own entries directly, and an old part
// applied after one of them would bring back what it deleted. A failure
// fails the start rather than leaving the part to a deliverer's retry.
func (ob *Outbox) applyOwnParts(recs []*Record, self, count int) error {
	part := tagindex.For(count)
	n := MarkValue(count)
	for _, r := range recs {
		if r.skip[self] {
			continue
		}
		var own, rest postings.Ops
		_ = r.ops.Each(func(k, _ []byte, _ bool, rec []byte) error {
			if d, err := part.EntryOwnerOf(k); err == nil && d == self {
				own.AppendRecord(rec)
			} else {
				rest.AppendRecord(rec) // a malformed one is dropped with a log line when split
			}
			return nil
		})
		if own.Len() == 0 {
			continue
		}
		wait, err := ob.store.ApplyOwn(&own, MarkKey(r.seq, self), n)
		if err == nil {
			err = wait()
		}
		if err != nil {
			return fmt.Errorf("apply this server's part of outbox record %d: %w", r.seq, err)
		}
		r.ops, r.size = rest, len(rest.Bytes())
		if r.skip == nil {
			r.skip = map[int]bool{}
		}
		r.skip[self] = true
	}
	return nil
}

// loadMarks returns the destinations that applied their part of each
// outbox record, by sequence number, as far as they are indexes among
// count servers: marks made under another count name other servers' parts
// and are not followed (a move drops the parts they mark).
func (ob *Outbox) loadMarks(count int) (marks map[uint64]map[int]bool, bad [][]byte, err error) {
	marks = map[uint64]map[int]bool{}
	err = ob.store.Scan([]byte{MarkPrefix}, func(k, v []byte) error {
		seq, d, n, ok := DecodeMark(k, v)
		if !ok {
			bad = append(bad, bytes.Clone(k))
			return nil
		}
		if marks[seq] == nil {
			marks[seq] = map[int]bool{}
		}
		// A mark of another count only awaits deletion with its record.
		marks[seq][d] = n == count
		return nil
	})
	return marks, bad, err
}
