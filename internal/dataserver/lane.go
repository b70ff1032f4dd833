package dataserver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl/lane"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Lanes carry a client's region payloads through shared memory when it
// runs on this host (package lane). A client has at most one: asking for
// another drops the one before. A lane is mapped here from its creation
// until its client's session ends (or it is replaced) and no transfer
// still uses it.

// MaxLane bounds a lane's size.
const MaxLane = 1 << 30

// serverLane is a lane as the data server holds it.
type serverLane struct {
	id     uint64
	client string
	mem    []byte
	refs   atomic.Int32 // 1 while registered, plus one per user
	warm   lane.Warm
	token  [lane.TokenSize]byte
	file   *os.File // until handed over; guarded by Service.lanes.mu
}

func (l *serverLane) ref() { l.refs.Add(1) }

func (l *serverLane) unref() {
	if l.refs.Add(-1) == 0 {
		_ = lane.Unmap(l.mem)
	}
}

// span is the part [off-1, off-1+n) of l's memory, off being a wire
// offset plus one, or an error naming what was wrong.
func (l *serverLane) span(off uint64, n int64) ([]byte, error) {
	if off == 0 || off-1 > uint64(len(l.mem)) || uint64(n) > uint64(len(l.mem))-(off-1) {
		return nil, fmt.Errorf("lane %d: [%d, +%d) is outside its %d bytes: %w", l.id, off-1, n, len(l.mem), pdc.ErrInvalid)
	}
	end := off - 1 + uint64(n)
	l.warm.Ensure(l.mem, int(end))
	return l.mem[off-1 : end : end], nil
}

// laneOf returns client's lane id with a reference the caller drops.
func (s *Service) laneOf(client string, id uint64) (*serverLane, error) {
	s.lanes.mu.Lock()
	defer s.lanes.mu.Unlock()
	l := s.lanes.byID[id]
	if l == nil || l.client != client {
		return nil, fmt.Errorf("lane %d: not found for client %s (ask for a new one): %w", id, client, pdc.ErrNotFound)
	}
	l.ref()
	return l, nil
}

// makeLane answers MethodDataLane: it makes a lane, keeps it, and says
// where the client fetches it.
func (s *Service) makeLane(_ context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.DataLaneReq
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	if m.Size < lane.Align || m.Size > MaxLane || m.Size%lane.Align != 0 {
		return nil, fmt.Errorf("lane of %d bytes: want a multiple of %d from %d to %d: %w", m.Size, lane.Align, lane.Align, MaxLane, pdc.ErrInvalid)
	}
	path, err := s.laneListener()
	if err != nil {
		return nil, err
	}
	f, mem, err := lane.Create("pdc-lane", int(m.Size))
	if err != nil {
		return nil, err
	}
	l := &serverLane{client: req.Client, mem: mem, file: f}
	l.refs.Store(1)
	_, _ = rand.Read(l.token[:])
	s.lanes.mu.Lock()
	if s.lanes.closed {
		s.lanes.mu.Unlock()
		f.Close()
		l.unref()
		return nil, errClosing
	}
	s.lanes.next++
	l.id = s.lanes.next
	old := s.lanes.byClient[req.Client]
	if old != nil {
		s.dropLaneLocked(old)
	}
	s.lanes.byID[l.id] = l
	s.lanes.byClient[req.Client] = l
	s.lanes.mu.Unlock()
	return rpc.Respond(&wire.DataLane{ID: l.id, Path: path, Token: l.token[:], Size: m.Size}), nil
}

// dropLaneLocked unregisters l; its memory goes once its last user is
// done. s.lanes.mu is held.
func (s *Service) dropLaneLocked(l *serverLane) {
	delete(s.lanes.byID, l.id)
	if s.lanes.byClient[l.client] == l {
		delete(s.lanes.byClient, l.client)
	}
	if l.file != nil {
		l.file.Close()
		l.file = nil
	}
	l.unref()
}

// laneListener returns the path of the lane socket, listening on it first
// if nobody has asked for a lane yet.
func (s *Service) laneListener() (string, error) {
	s.lanes.mu.Lock()
	defer s.lanes.mu.Unlock()
	if s.lanes.closed {
		return "", errClosing
	}
	if s.lanes.ln != nil {
		return s.lanes.path, nil
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	// In the abstract namespace: it goes with the process, killed or not.
	// Anyone on the host may connect; only the token gets a lane.
	path := fmt.Sprintf("@pdc-lane-%d-%x", os.Getpid(), rnd)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return "", fmt.Errorf("lane socket %s: %w", path, err)
	}
	s.lanes.ln, s.lanes.path = ln, path
	s.lanes.wg.Add(1)
	go s.acceptLanes(ln)
	return path, nil
}

// acceptLanes hands lanes over to the clients that show their tokens.
func (s *Service) acceptLanes(ln net.Listener) {
	defer s.lanes.wg.Done()
	pause := 5 * time.Millisecond
	for {
		nc, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors, say: try again, as the RPC listener
			// does, rather than leave clients connecting to nobody.
			s.log.Warn("lane socket: accept failed", "err", err)
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-s.quit.Done():
				t.Stop()
				return
			}
			pause = min(2*pause, time.Second)
			continue
		}
		pause = 5 * time.Millisecond
		s.lanes.mu.Lock()
		if s.lanes.closed {
			s.lanes.mu.Unlock()
			nc.Close()
			return
		}
		if len(s.lanes.conns) >= maxLaneConns {
			// Hand-overs take a round trip: this many at once is a peer
			// opening connections to hold them. Its client, if any,
			// sees the close and asks again.
			s.lanes.mu.Unlock()
			s.lanes.refusals.Warn("lane socket: refused a connection: too many waiting to be answered", "limit", maxLaneConns)
			nc.Close()
			continue
		}
		s.lanes.conns[nc] = struct{}{}
		s.lanes.wg.Add(1)
		s.lanes.mu.Unlock()
		go func() {
			defer s.lanes.wg.Done()
			s.handOver(nc.(*net.UnixConn))
			s.lanes.mu.Lock()
			delete(s.lanes.conns, nc)
			s.lanes.mu.Unlock()
			nc.Close()
		}()
	}
}

// maxLaneConns bounds the connections to the lane socket being answered
// at once.
const maxLaneConns = 256

// laneHelloTimeout bounds how long a connection to the lane socket may
// take to say what it wants.
const laneHelloTimeout = 10 * time.Second

func (s *Service) handOver(uc *net.UnixConn) {
	hello := laneHelloTimeout
	if s.cfg.laneHello > 0 {
		hello = s.cfg.laneHello
	}
	_ = uc.SetDeadline(time.Now().Add(hello))
	msg := make([]byte, lane.HelloSize)
	if _, err := io.ReadFull(uc, msg); err != nil || string(msg[:len(lane.Magic)]) != lane.Magic {
		return
	}
	tok := msg[len(lane.Magic):]
	s.lanes.mu.Lock()
	var f *os.File
	for _, l := range s.lanes.byClient {
		if l.file != nil && subtle.ConstantTimeCompare(l.token[:], tok) == 1 {
			f, l.file = l.file, nil // handed over once
			break
		}
	}
	s.lanes.mu.Unlock()
	if f == nil {
		_, _ = uc.Write([]byte{lane.AnswerUnknown})
		return
	}
	defer f.Close()
	if err := lane.Send(uc, f); err != nil {
		s.log.Warn("handing over a lane failed", "err", err)
	}
}

// dropLanes drops client's lane, if it has one.
func (s *Service) dropLanes(client string) {
	s.lanes.mu.Lock()
	defer s.lanes.mu.Unlock()
	if l := s.lanes.byClient[client]; l != nil {
		s.dropLaneLocked(l)
	}
}

// closeLanes stops handing out lanes and drops every one; each is unmapped
// once its last user is done.
func (s *Service) closeLanes() {
	s.lanes.mu.Lock()
	s.lanes.closed = true
	for _, l := range s.lanes.byClient {
		s.dropLaneLocked(l)
	}
	ln := s.lanes.ln
	// A connection that says nothing would hold Close for the hello
	// timeout.
	for nc := range s.lanes.conns {
		nc.Close()
	}
	s.lanes.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	s.lanes.wg.Wait()
}
