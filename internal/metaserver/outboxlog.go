package metaserver

import (
	"bytes"
	"context"
	"fmt"

	"github.com/pdcgo/pdc/internal/outbox"
	"github.com/pdcgo/pdc/internal/postings"
	"github.com/pdcgo/pdc/internal/wire"
)

// outboxLog keeps the tag index outbox in the server's store
// (outbox.Log).
type outboxLog struct{ s *core }

func (l outboxLog) Scan(p []byte, fn func(k, v []byte) error) error { return l.s.scan(p, fn) }

func (l outboxLog) Write(dels, sets [][]byte, val []byte) (wait func() error, err error) {
	b := l.s.st.NewBatch()
	defer b.Close()
	for _, k := range dels {
		b.Delete(k)
	}
	for _, k := range sets {
		b.Set(k, val)
	}
	return l.s.st.CommitApply(b)
}

func (l outboxLog) ApplyOwn(ops *postings.Ops, key, val []byte) (wait func() error, err error) {
	b := l.s.st.NewBatch()
	defer b.Close()
	staged := l.s.ix.post.Stage(b.Pebble(), ops)
	b.Set(key, val)
	if wait, err = l.s.st.CommitApply(b); err != nil {
		l.s.ix.post.Abandon(staged)
		return nil, err
	}
	l.s.ix.post.Publish(staged)
	return wait, nil
}

// outboxPeers delivers the outbox's index changes (outbox.Peers): to this
// server's own postings, or to another server's indexApply.
type outboxPeers struct {
	s     *core
	peers Peers // nil: no route to other servers
}

func (p outboxPeers) Apply(ctx context.Context, dest int, ops *postings.Ops) error {
	if dest == int(p.s.index.Load()) {
		// This server made these entries, for its own partition.
		return p.s.ix.post.Apply(ops)
	}
	if p.peers == nil {
		return fmt.Errorf("no route to metadata server %d", dest)
	}
	m := wire.IndexOps{Version: wire.IndexOpsPacked, Packed: ops.Bytes()}
	return p.peers.Call(ctx, dest, wire.MethodIndexApply, m.Marshal(nil))
}

// recordOps returns the index changes of a stored outbox record, of any
// version, in memory of their own.
func recordOps(v []byte) (postings.Ops, error) {
	var m wire.IndexOps
	// Packed aliases what it decodes: the changes get memory of their own.
	if err := m.Unmarshal(bytes.Clone(v)); err != nil {
		return postings.Ops{}, err
	}
	if m.Version == wire.IndexOpsChanges {
		return changeRecordOps(&m)
	}
	return opsOfRecord(&m, nil)
}

// ensure the adapters meet the outbox's interfaces.
var (
	_ outbox.Log   = outboxLog{}
	_ outbox.Peers = outboxPeers{}
)
