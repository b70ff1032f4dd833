package metaserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pdcgo/pdc"
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
	hdr := (&wire.IndexOps{Version: wire.IndexOpsPacked, Packed: ops.Bytes()}).Marshal(nil)
	for pause := startingPause; ; pause = min(2*pause, startingPauseMax) {
		err := p.peers.Call(ctx, dest, wire.MethodIndexApply, hdr)
		if !starting(err) {
			return err
		}
		// The server is back but still starting (indexApply): this try
		// is not over until it takes the changes. It answers queries as
		// soon as it has started, so a fence waiting for this try would
		// otherwise name it undelivered and have the query wait a pause
		// longer; before fences named them, a query fenced by such a
		// refusal looked there before the changes arrived (found by the
		// crash loop).
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// The pauses between the tries of a delivery to a server that is still
// starting.
const (
	startingPause    = 5 * time.Millisecond
	startingPauseMax = 100 * time.Millisecond
)

// starting reports whether err is a server's refusal of a call while it
// starts: it answered (a *pdc.ServerError), and unavailable. A server
// that could not be reached (down, or at an address that changed) is not
// waited for.
func starting(err error) bool {
	var se *pdc.ServerError
	return errors.As(err, &se) && errors.Is(se.Err, pdc.ErrUnavailable)
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
