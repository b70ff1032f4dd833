package rpc

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/wire"
)

// track takes a new connection into the server, within its connection
// bounds, and starts serving it; false once the server is closed.
func (s *Server) track(nc net.Conn) bool {
	c := &serverConn{s: s, nc: nc, peer: netio.PeerKey(nc.RemoteAddr()), remote: nc.RemoteAddr().String(), local: nc.LocalAddr().String(),
		inflight: make(map[uint64]*reqCtx)}
	// Made before the connection is in s.mu.conns, where Stats reads its
	// counters.
	c.w = newFrameWriter(nc, s.cfg.StallTimeout)
	s.mu.Lock()
	select {
	case <-s.closing:
		s.mu.Unlock()
		_ = nc.Close()
		return false
	default:
	}
	refusal, evicted := s.admitLocked(c)
	if refusal != "" {
		s.mu.Unlock()
		s.refuse(nc, refusal)
		return true
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	s.mu.conns[c] = struct{}{}
	s.wg.Add(1) // released by the connection's last reader, in finish
	s.mu.Unlock()
	if evicted != nil {
		s.evicted.Add(1)
		s.refusals.Warn("closed a connection still in its handshake to make room for a new one",
			"remote", evicted.nc.RemoteAddr().String(), "new", nc.RemoteAddr().String())
	}
	go c.serve()
	return true
}

// admitLocked counts c against the connection bounds, closing the
// connection longest in its handshake if one must go to make room
// (returned), or says why c is refused. s.mu is held.
func (s *Server) admitLocked(c *serverConn) (refusal string, evicted *serverConn) {
	cfg := &s.cfg
	switch {
	case s.mu.peers[c.peer] >= cfg.MaxConnsPerPeer:
		if evicted = s.oldestShakingLocked(c.peer); evicted == nil {
			return fmt.Sprintf("too many connections from %s: %d open, the server's limit per peer (--max-conns-per-peer); close some, or retry later",
				c.peer, cfg.MaxConnsPerPeer), nil
		}
	case s.mu.open >= cfg.MaxConns:
		if evicted = s.oldestShakingLocked(""); evicted == nil {
			return fmt.Sprintf("too many connections: %d open, the server's limit (--max-conns); retry later", cfg.MaxConns), nil
		}
	case s.mu.shaking.Len() >= cfg.MaxHandshakes:
		evicted = s.oldestShakingLocked("")
	}
	if evicted != nil {
		s.evictLocked(evicted)
	}
	s.mu.open++
	s.mu.peers[c.peer]++
	c.counted = true
	c.shaking = s.mu.shaking.PushBack(c)
	return "", evicted
}

// oldestShakingLocked returns the connection of peer ("": any) longest in
// its handshake, or nil. s.mu is held.
func (s *Server) oldestShakingLocked(peer string) *serverConn {
	for e := s.mu.shaking.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*serverConn); peer == "" || c.peer == peer {
			return c
		}
	}
	return nil
}

// evictLocked closes c, which is in its handshake, and stops counting it.
// s.mu is held.
func (s *Server) evictLocked(c *serverConn) {
	s.uncountLocked(c)
	c.cancel()
	_ = c.nc.Close()
}

// uncountLocked stops counting c against the bounds. s.mu is held.
func (s *Server) uncountLocked(c *serverConn) {
	if c.shaking != nil {
		s.mu.shaking.Remove(c.shaking)
		c.shaking = nil
	}
	if !c.counted {
		return
	}
	c.counted = false
	s.mu.open--
	if s.mu.peers[c.peer]--; s.mu.peers[c.peer] <= 0 {
		delete(s.mu.peers, c.peer)
	}
}

// refuse tells a connection over a bound why in an error frame, in place
// of the hello its client waits for, and closes it. The frame fits in a
// fresh socket's buffer: the write does not wait on the peer.
func (s *Server) refuse(nc net.Conn, why string) {
	s.refused.Add(1)
	s.refusals.Warn("refused connection: "+why, "remote", nc.RemoteAddr().String())
	body := wire.ErrorBody{Code: wire.CodeUnavailable, Message: why}
	hdr := body.Marshal(nil)
	f := wire.Frame{Flags: wire.FlagResponse | wire.FlagError, Method: wire.MethodHello, HeaderLen: uint32(len(hdr))}
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write(append(f.Append(nil), hdr...))
	_ = nc.Close()
}

// Logs of what peers can make happen at will come at most logBurst lines
// per logInterval each.
const (
	logBurst    = 10
	logInterval = 10 * time.Second
)
