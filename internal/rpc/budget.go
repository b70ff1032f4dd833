package rpc

import (
	"fmt"
	"sync/atomic"

	"github.com/pdcgo/pdc/internal/bufpool"
	"github.com/pdcgo/pdc/internal/wire"
)

// payload reads f's payload, which follows its header, into a buffer from
// bufpool, taken from the server's payload budget: grant bytes of it,
// which putPayload gives back with the buffer. (From bufpool rather than
// the heap: a buffer given back is the next one's at once, where the
// collector would leave it in memory, garbage, until its next cycle.)
//
// Nothing is taken before the payload's first bytes (a bufferful, or all
// of a smaller one) have arrived: a frame prefix alone holds no memory.
// Then, if the budget has no room, the connection waits for it, unread.
// The wait cannot deadlock: what holds the budget is payloads being read
// (their bytes come, or the frame's bounds end their connection), answers
// being written (bounded by the stall timeout), and payloads their owners
// give back once stored, which waits on nothing another connection reads
// (the data server takes none of its own budget for them).
func (c *serverConn) payload(f wire.Frame) (payload []byte, grant int64, err error) {
	if f.PayloadLen == 0 {
		return nil, 0, nil
	}
	if err := c.r.more(int(min(f.PayloadLen, uint64(c.r.br.Size())))); err != nil {
		return nil, 0, fmt.Errorf("reading a request's payload: %w", err)
	}
	s := c.s
	n := int(f.PayloadLen)
	grant = min(int64(bufpool.SizeOf(n)), s.cfg.PayloadBudget)
	if !s.payloads.TryAcquire(grant) {
		s.waits.Add(1)
		// Answers queued for earlier requests go out before the wait.
		if err := c.w.flush(c.ctx); err != nil {
			return nil, 0, err
		}
		if err := s.payloads.Acquire(c.ctx, grant); err != nil {
			return nil, 0, fmt.Errorf("waiting for room for a payload of %d bytes: %w", n, ctxErr(c.ctx))
		}
	}
	s.held.Add(grant)
	payload = bufpool.Get(n)
	if err := c.r.readPayload(payload); err != nil {
		s.putPayload(payload, grant)
		return nil, 0, err
	}
	return payload, grant, nil
}

// putPayload gives back a payload and its grant of the budget. Nothing
// refers to the payload any more.
func (s *Server) putPayload(payload []byte, grant int64) {
	if grant == 0 {
		return
	}
	bufpool.Put(payload)
	s.held.Add(-grant)
	s.payloads.Release(grant)
}

// releaser returns a Request.Release for payload: putPayload, once.
func (s *Server) releaser(payload []byte, grant int64) func() {
	if grant == 0 {
		return func() {}
	}
	var done atomic.Bool
	return func() {
		if !done.Swap(true) {
			s.putPayload(payload, grant)
		}
	}
}
