package transfer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/dtl/lane"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Region payloads to a data server on this host may travel through a lane
// (package lane): shared memory that the server made and this client
// maps. A write's bytes are copied into the lane and the request names
// where; the server stores them from there before it answers the start,
// so the space is free again once the answer is in. A read's bytes are
// copied there by the server when its wait is answered, and out of it
// into the caller's buffer. Parts smaller than laneMin, and parts for
// which the lane has no room, go on the connection as before.

const (
	// DefaultLaneSize is the bytes of a lane unless configured.
	DefaultLaneSize = 128 << 20
	// laneMin: smaller parts gain nothing from the lane (their cost is
	// the request, not the bytes) and would crowd it.
	laneMin = 16 << 10
	// laneRetry: after a lane could not be made, the socket is used for
	// this long before trying again.
	laneRetry = 10 * time.Second
	// laneAfter: in auto mode a client moves this much to a server on the
	// connection before it makes a lane. A lane's memory is fresh: on this
	// machine 64 MiB of it took 36-39 ms to allocate and 18 ms more to map
	// in the other process, where copying it takes 3; a lane gains back
	// about 0.1 ms per MiB moved. A process that moves a few hundred MiB
	// and exits (VPIC-IO's ranks) ran half as fast through lanes as on
	// the connection.
	laneAfter = 256 << 20
)

// clientLane is this client's lane to one data server. It stays mapped
// while anything holds a reference: the slot's, and one per request whose
// bytes are in it.
type clientLane struct {
	id    uint64
	conn  *rpc.Conn // the start connection it was made on
	mem   []byte
	arena *lane.Arena
	warm  lane.Warm
	refs  atomic.Int32
}

func (l *clientLane) unref() {
	if l.refs.Add(-1) == 0 {
		_ = lane.Unmap(l.mem)
	}
}

// laneSlot is the lane to one server, or why there is none.
type laneSlot struct {
	mu      sync.Mutex
	l       *clientLane
	err     error
	retryAt time.Time
	moved   int64 // auto: lane-sized bytes moved on the connection so far

	// Whether the server at addr is on this host: asked once per
	// address, since for a remote address it lists this host's
	// interfaces.
	hostMu sync.Mutex
	addr   string
	local  bool
}

// onThisHost reports whether server (slot's) runs on this host.
func (slot *laneSlot) onThisHost(e *Engine, server int) bool {
	addr, _, err := e.cl.Addr(server)
	if err != nil {
		return false
	}
	slot.hostMu.Lock()
	defer slot.hostMu.Unlock()
	if slot.addr != addr {
		slot.addr, slot.local = addr, dtl.SameHost(addr)
	}
	return slot.local
}

// lanes holds a client's lanes by server rank.
type lanes struct {
	mode dtl.Mode
	size int
	mu   sync.Mutex
	by   map[int]*laneSlot

	written, read atomic.Int64 // bytes moved through lanes
}

// lane returns the lane to server with a reference the caller drops, or
// nil if payloads to it go on the connection: always when n, the lane
// bytes the caller's parts would take (laneSized), is 0. An error only in
// shm mode, where there must be a lane.
func (e *Engine) lane(ctx context.Context, server int, n int) (*clientLane, error) {
	if e.lanes.mode == dtl.ModeStream || n == 0 {
		return nil, nil
	}
	e.lanes.mu.Lock()
	if e.lanes.by == nil {
		e.lanes.by = map[int]*laneSlot{}
	}
	slot := e.lanes.by[server]
	if slot == nil {
		slot = &laneSlot{}
		e.lanes.by[server] = slot
	}
	e.lanes.mu.Unlock()
	if e.lanes.mode == dtl.ModeAuto && !slot.onThisHost(e, server) {
		return nil, nil
	}

	conn, err := e.cl.StartConn(ctx, server)
	if err != nil {
		if e.lanes.mode == dtl.ModeShm {
			return nil, err
		}
		return nil, nil // the caller meets the error on its own connection, if it is one
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.l == nil && e.lanes.mode == dtl.ModeAuto && slot.moved < laneAfter {
		slot.moved += int64(n)
		return nil, nil
	}
	if l := slot.l; l != nil {
		if l.conn == conn && !conn.Broken() {
			l.refs.Add(1)
			return l, nil
		}
		// A new connection: the server may have restarted and forgotten
		// the lane. Make another.
		slot.l = nil
		l.unref()
	}
	if slot.err != nil && time.Now().Before(slot.retryAt) {
		return e.noLane(server, slot.err)
	}
	l, err := e.makeLane(ctx, server, conn)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		slot.err, slot.retryAt = err, time.Now().Add(laneRetry)
		return e.noLane(server, err)
	}
	slot.err = nil
	slot.l = l
	l.refs.Add(1)
	return l, nil
}

// noLane is what lane returns when it could not make one.
func (e *Engine) noLane(server int, err error) (*clientLane, error) {
	if e.lanes.mode == dtl.ModeShm {
		return nil, fmt.Errorf("shared-memory lane to %s: %w", e.cl.Label(server), err)
	}
	return nil, nil // auto: the connection will do
}

// makeLane asks server for a lane and maps it.
func (e *Engine) makeLane(ctx context.Context, server int, conn *rpc.Conn) (*clientLane, error) {
	if addr, host, err := e.cl.Addr(server); err == nil && !dtl.SameHost(addr) {
		return nil, fmt.Errorf("%s is not on this host (%s): shared memory needs both on one: %w", e.cl.Label(server), host, pdc.ErrInvalid)
	}
	size := e.lanes.size - e.lanes.size%lane.Align
	rep, err := conn.Call(ctx, wire.MethodDataLane, (&wire.DataLaneReq{Size: uint64(size)}).Marshal(nil), nil, nil)
	if err != nil {
		return nil, err
	}
	var m wire.DataLane
	if err := m.Unmarshal(rep.Header); err != nil {
		return nil, err
	}
	if m.Size != uint64(size) || len(m.Token) != lane.TokenSize || m.ID == 0 {
		return nil, fmt.Errorf("%s answered a lane of %d bytes (asked %d), token of %d bytes: %w", e.cl.Label(server), m.Size, size, len(m.Token), pdc.ErrProtocol)
	}
	f, err := lane.Fetch(ctx, m.Path, m.Token)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mem, err := lane.Map(f, size)
	if err != nil {
		return nil, err
	}
	l := &clientLane{id: m.ID, conn: conn, mem: mem, arena: lane.NewArena(size)}
	l.refs.Store(1) // the slot's
	return l, nil
}

// closeLanes drops every lane; each is unmapped once its last request is
// done with it.
func (ls *lanes) close() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, slot := range ls.by {
		slot.mu.Lock()
		if slot.l != nil {
			slot.l.unref()
			slot.l = nil
		}
		slot.mu.Unlock()
	}
}

// laneUse is a request's part of a lane: the spans it took, freed once the
// server has answered it.
type laneUse struct {
	l     *clientLane
	spans []lane.Span
	offs  []uint64 // a wait's: per item, its offset in the lane plus one, 0 for none
}

// has reports whether item i of a wait goes through the lane.
func (u *laneUse) has(i int) bool { return u != nil && i < len(u.offs) && u.offs[i] != 0 }

// waitInLane places the reads of refs of laneMin bytes or more in one span
// of ln; nil if there are none (full false) or the lane has no room for
// them (full true). The use takes its own reference to ln.
func waitInLane(ln *clientLane, refs []partRef) (use *laneUse, full bool) {
	total := laneSized(refs, Read)
	if total == 0 {
		return nil, false
	}
	sp, ok := ln.arena.Alloc(total)
	if !ok {
		return nil, true
	}
	ln.warm.Ensure(ln.mem, sp.End())
	ln.refs.Add(1)
	u := &laneUse{l: ln, spans: []lane.Span{sp}, offs: make([]uint64, len(refs))}
	pos := sp.Off
	for i, r := range refs {
		if n := len(r.part().data); r.t.access == Read && n >= laneMin {
			u.offs[i] = uint64(pos) + 1
			pos += (n + 63) &^ 63
		}
	}
	return u, false
}

// alloc takes n bytes of the lane, false if it has no room.
func (u *laneUse) alloc(n int) (lane.Span, bool) {
	s, ok := u.l.arena.Alloc(n)
	if ok {
		u.spans = append(u.spans, s)
	}
	return s, ok
}

// done gives the spans back and drops the reference: the server has
// answered, so it no longer touches them.
func (u *laneUse) done() {
	if u == nil || u.l == nil {
		return
	}
	for _, s := range u.spans {
		u.l.arena.Free(s)
	}
	u.spans = nil
	u.l.unref()
	u.l = nil
}

// settled frees u if err says the server answered; otherwise (a deadline,
// a broken connection) the server may still touch the spans, and they stay
// taken: leaked rather than reused under it, until the lane is replaced.
func (u *laneUse) settled(err error) {
	var se *pdc.ServerError
	// A server that gave up on its own deadline, or is going, may still
	// have writes from the lane queued: only its other refusals say that
	// it is done with the spans.
	if err == nil || errors.As(err, &se) && !errors.Is(err, pdc.ErrTimeout) && !errors.Is(err, pdc.ErrCanceled) && !errors.Is(err, pdc.ErrUnavailable) {
		u.done()
		return
	}
	if u != nil && u.l != nil {
		u.l.unref()
		u.l = nil
	}
}

// laneSized is the bytes of the parts of refs moving the way a that are
// large enough for a lane, each rounded up to a cache line (as a wait lays
// them out in its span).
func laneSized(refs []partRef, a Access) int {
	n := 0
	for _, r := range refs {
		if d := len(r.part().data); r.t.access == a && d >= laneMin {
			n += (d + 63) &^ 63
		}
	}
	return n
}
