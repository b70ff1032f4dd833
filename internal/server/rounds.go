package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// rounds are the steps of a cluster's start that every server takes
// together (wire.StartRound), coordinated by rank 0: each server reports
// its step, and rank 0 answers them all once every server has, with what
// finish computes from the reports. A server that dies before it reports
// fails the round for all: their starts end with an error naming it, and
// the next start plans again from what is on disk.
type rounds struct {
	size   int
	finish func(round uint32, reports map[int]*wire.StartRound) (map[int]*wire.StartRound, error)
	// rejoin answers a server that restarted after the round was done
	// (the cluster already serves).
	rejoin  func(round uint32, rank int) *wire.StartRound
	members func() *cluster.List
	// patience is how long a server that has not reported may be
	// unreachable (no answer at all, as across a partition) before the
	// round fails for it; one that answers as gone fails it at once.
	// Zero: no patience.
	patience time.Duration

	mu struct {
		sync.Mutex
		r map[uint32]*round
	}
	// unreachable holds when each server waited for was first found
	// unreachable, while it stays so; only checkAlive (rank 0's report)
	// uses it.
	unreachable map[int]time.Time
}

type round struct {
	reports map[int]*wire.StartRound
	done    chan struct{} // closed once replies or err is set
	replies map[int]*wire.StartRound
	err     error
}

// livenessEvery is how often rank 0, waiting for a round, checks that the
// servers that have not reported are still there.
const livenessEvery = time.Second

func newRounds(size int, members func() *cluster.List) *rounds {
	rs := &rounds{size: size, members: members, unreachable: map[int]time.Time{}}
	rs.mu.r = map[uint32]*round{}
	return rs
}

func (rs *rounds) get(n uint32) *round {
	r := rs.mu.r[n]
	if r == nil {
		r = &round{reports: map[int]*wire.StartRound{}, done: make(chan struct{})}
		rs.mu.r[n] = r
	}
	return r
}

// report records m and waits for the round's answer to m's rank. With
// watch (rank 0's own report), it checks while it waits that the servers
// yet to report are alive.
func (rs *rounds) report(ctx context.Context, m *wire.StartRound, watch bool) (*wire.StartRound, error) {
	rank := int(m.Rank)
	if rank < 0 || rank >= rs.size {
		return nil, fmt.Errorf("start round %d: rank %d out of range 0..%d: %w", m.Round, rank, rs.size-1, pdc.ErrInvalid)
	}
	rs.mu.Lock()
	r := rs.get(m.Round)
	select {
	case <-r.done:
		prev := r.reports[rank]
		rs.mu.Unlock()
		if r.err == nil && prev != nil && prev.Instance != m.Instance && rs.rejoin != nil {
			return rs.rejoin(m.Round, rank), nil
		}
		return r.answer(rank)
	default:
	}
	r.reports[rank] = m
	if len(r.reports) == rs.size {
		replies, err := rs.finish(m.Round, r.reports)
		r.replies, r.err = replies, err
		close(r.done)
	}
	rs.mu.Unlock()

	var tick <-chan time.Time
	if watch {
		t := time.NewTicker(livenessEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-r.done:
			return r.answer(rank)
		case <-ctx.Done():
			return nil, fmt.Errorf("start round %d: waiting for the other servers: %w", m.Round, pdc.CtxErr(ctx))
		case <-tick:
			if err := rs.checkAlive(ctx, m.Round, r); err != nil {
				rs.fail(r, err)
			}
		}
	}
}

// checkAlive returns an error naming a server that has not reported the
// round and is gone: its host answers that nothing listens there, or
// another instance does, or it has not answered at all for patience. A
// server cut off by a partition is waited for meanwhile: it may be
// sending its data slots, and goes on when the partition heals.
func (rs *rounds) checkAlive(ctx context.Context, n uint32, r *round) error {
	list := rs.members()
	if list == nil {
		return nil
	}
	rs.mu.Lock()
	var waiting []cluster.Server
	for _, s := range list.Servers {
		if r.reports[s.Rank] == nil {
			waiting = append(waiting, s)
		}
	}
	rs.mu.Unlock()
	for _, s := range waiting {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		h, err := rpc.Probe(pctx, s.Addr)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err == nil && h.Instance == s.Instance {
			delete(rs.unreachable, s.Rank)
			continue
		}
		if err != nil && !answered(err) {
			first, ok := rs.unreachable[s.Rank]
			if !ok {
				rs.unreachable[s.Rank] = time.Now()
				continue
			}
			if waited := time.Since(first); waited >= rs.patience {
				return fmt.Errorf("%s (pid %d) has not answered for %v before start round %d: the start cannot complete; start the cluster again once it is reachable (nothing moved so far is lost): %w: %w",
					s.Label(), s.PID, waited.Round(time.Second), n, pdc.ErrUnavailable, err)
			}
			continue
		}
		return fmt.Errorf("%s (pid %d) is gone before start round %d: the start cannot complete; start the cluster again (nothing moved so far is lost): %w",
			s.Label(), s.PID, n, pdc.ErrUnavailable)
	}
	return nil
}

// answered reports whether a failed probe heard from the server's host:
// it refused the connection or closed it, rather than said nothing (a
// partition, a host down) or that there is no way there.
func answered(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pdc.ErrProtocol) || errors.Is(err, pdc.ErrVersion)
}

func (rs *rounds) fail(r *round, err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	select {
	case <-r.done:
	default:
		r.err = err
		close(r.done)
	}
}

// reply returns round n's answer to rank, nil if it has none (the round
// is not done, failed, or answered rank nothing).
func (rs *rounds) reply(n uint32, rank int) *wire.StartRound {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.mu.r[n]
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
	default:
		return nil
	}
	if r.err != nil {
		return nil
	}
	return r.replies[rank]
}

func (r *round) answer(rank int) (*wire.StartRound, error) {
	if r.err != nil {
		return nil, r.err
	}
	if a := r.replies[rank]; a != nil {
		return a, nil
	}
	return &wire.StartRound{}, nil
}

// rpc serves MethodStartRound on rank 0.
func (rs *rounds) rpc(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.StartRound
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	a, err := rs.report(ctx, &m, false)
	if err != nil {
		return nil, err
	}
	return rpc.Respond(a), nil
}

// preset records every round of the start as done, each rank answered
// with replies[round][rank] (or nothing): rank 0 restarted into a cluster
// whose start is long over. A server that restarts later gets those
// answers.
func (rs *rounds) preset(replies map[uint32]map[int]*wire.StartRound) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, n := range []uint32{wire.RoundInventory, wire.RoundPlan, wire.RoundMoved, wire.RoundOpened} {
		r := rs.get(n)
		r.replies = replies[n]
		close(r.done)
	}
}
