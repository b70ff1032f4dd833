package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// RPCConfig says where the servers of the RPC benchmark are.
type RPCConfig struct {
	// RawAddr is an echo server (EchoServer) for the ceilings.
	RawAddr string
	// RPCAddr is a pdc RPC server whose MethodPing echoes its payload.
	RPCAddr string
	// Secret is the RPC server's cluster secret, if any.
	Secret []byte
	// Duration of each case. Default 2s.
	Duration time.Duration
	// Size of each message. Default 64 bytes.
	Size int
	// Want, if set, skips the cases it rules out.
	Want Want
	// Base, if set, is another pdc RPC server (its secret BaseSecret) that
	// every case's ceiling runs against instead of the raw echo server:
	// the same calls, alternated with RPCAddr's in the same turns, so that
	// the ratio is what RPCAddr's server costs over Base's (metrics, say).
	// Label and BaseLabel name the two ("with metrics", "without"), and
	// BaseTarget is every case's target.
	Base                         string
	BaseSecret                   []byte
	Label, BaseLabel, BaseTarget string
}

// rounds is how many alternating turns the ceiling and pdc each get. The
// machines this runs on are shared and their scheduling has modes (the same
// raw ping-pong runs at 25 or 90 us depending on where threads land), so
// both sides are measured in alternation, on fresh connections, and pooled.
const rounds = 6

// RPC measures round trips of Size bytes: sequential, 64 in flight on one
// connection, and 16 concurrent clients, each next to the same pattern on a
// raw socket, measured alternately in the same run.
func RPC(ctx context.Context, cfg RPCConfig) ([]Result, error) {
	if cfg.Duration == 0 {
		cfg.Duration = 2 * time.Second
	}
	if cfg.Size == 0 {
		cfg.Size = 64
	}
	b := &rpcBench{cfg: cfg, size: cfg.Size, turn: cfg.Duration / rounds, bench: "rpc",
		ours: rpcSide{cfg.RPCAddr, cfg.Secret}}
	if cfg.Base != "" {
		b.base = &rpcSide{cfg.Base, cfg.BaseSecret}
		b.bench = "rpc (" + cfg.Label + ")"
	}
	var out []Result
	// In this order: the pool's case reuses the ceiling the clients' case
	// measured.
	for _, c := range []func(context.Context) ([]Result, error){b.sequential, b.pipelined, b.clients, b.pool} {
		rs, err := c(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	if b.base != nil {
		for i := range out {
			out[i].Ceiling, out[i].Target = "the same, "+cfg.BaseLabel, cfg.BaseTarget
		}
	}
	return out, nil
}

// rpcBench is one run of the RPC benchmark; each of its cases is a method
// that returns nothing when cfg.Want rules it out.
type rpcBench struct {
	cfg   RPCConfig
	bench string // "rpc", and the label with a Base
	size  int
	// ours is the server measured; base, if set, the one measured as the
	// ceiling (RPCConfig.Base), else the raw echo server is.
	ours rpcSide
	base *rpcSide
	// turn is the length of one of the rounds of each side.
	turn time.Duration
	// rawM is the ceiling of the 16 clients' case, which the pool's case
	// shares (measured once, by clients).
	rawM int64
}

// The cases with several clients.
const (
	rpcWindow  = 64
	rpcClients = 16
)

func (b *rpcBench) clientsName() string {
	return fmt.Sprintf("%dB, %d clients, a connection each", b.size, rpcClients)
}

func (b *rpcBench) poolName() string {
	return fmt.Sprintf("%dB, %d goroutines, one client (pool of 2)", b.size, rpcClients)
}

// rpcSide is a pdc RPC server a case runs against.
type rpcSide struct {
	addr   string
	secret []byte
}

// dial connects to side's server. Dials are not bounded by the measuring
// window: setting up is not what is measured.
func (b *rpcBench) dial(ctx context.Context, side rpcSide) (*rpc.Conn, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return rpc.Dial(ctx, side.addr, rpc.DialOptions{Secret: side.secret})
}

// sequential measures sequential round trips: p50 and p99 latency, and
// their rate.
func (b *rpcBench) sequential(ctx context.Context) ([]Result, error) {
	size := b.size
	name := fmt.Sprintf("%dB sequential", size)
	if !b.cfg.Want.Any(b.bench, name+" p50", name+" p99", name+" rate") {
		return nil, nil
	}
	ceiling := func(ctx context.Context, loop func(func() error) error) error {
		return rawPingPong(ctx, b.cfg.RawAddr, size, loop)
	}
	if b.base != nil {
		ceiling = b.sequentialAt(*b.base)
	}
	var rawLat, rpcLat []time.Duration
	for i := range rounds {
		for _, ours := range turnOrder(i) {
			if !ours {
				lat, err := timed(ctx, b.turn, ceiling)
				if err != nil {
					return nil, fmt.Errorf("ceiling: %w", err)
				}
				rawLat = append(rawLat, lat...)
				continue
			}
			lat, err := timed(ctx, b.turn, b.sequentialAt(b.ours))
			if err != nil {
				return nil, fmt.Errorf("rpc sequential: %w", err)
			}
			rpcLat = append(rpcLat, lat...)
		}
	}
	d := b.cfg.Duration
	r := latency(b.bench, name+" p50", us(pct(rpcLat, 50)), "us", "raw tcp ping-pong p50", us(pct(rawLat, 50)))
	r.Target = "ratio >= 0.67 (p50 <= 1.5x raw)"
	return []Result{r,
		latency(b.bench, name+" p99", us(pct(rpcLat, 99)), "us", "raw tcp ping-pong p99", us(pct(rawLat, 99))),
		rate(b.bench, name+" rate", float64(len(rpcLat))/d.Seconds(), "ops/s",
			"raw tcp ping-pong rate", float64(len(rawLat))/d.Seconds()),
	}, nil
}

// sequentialAt is one turn of the sequential case against side's server.
func (b *rpcBench) sequentialAt(side rpcSide) func(ctx context.Context, loop func(func() error) error) error {
	return func(ctx context.Context, loop func(func() error) error) error {
		c, err := b.dial(ctx, side)
		if err != nil {
			return err
		}
		defer c.Close()
		msg, into := make([]byte, b.size), make([]byte, b.size)
		return loop(func() error {
			_, err := c.Call(context.Background(), wire.MethodPing, nil, [][]byte{msg}, into)
			return err
		})
	}
}

// pipelined measures 64 calls in flight on one connection.
func (b *rpcBench) pipelined(ctx context.Context) ([]Result, error) {
	size, window := b.size, rpcWindow
	name := fmt.Sprintf("%dB, %d in flight, 1 conn", size, window)
	if !b.cfg.Want.Any(b.bench, name) {
		return nil, nil
	}
	ceiling := func(ctx context.Context) (func(ctx context.Context) (int64, error), func(), error) {
		nc, err := dialRaw(ctx, b.cfg.RawAddr)
		if err != nil {
			return nil, nil, err
		}
		if err := echoOnce(nc, size); err != nil {
			nc.Close()
			return nil, nil, err
		}
		return func(ctx context.Context) (int64, error) { return rawPipelined(ctx, nc, size, window) }, func() { nc.Close() }, nil
	}
	if b.base != nil {
		ceiling = b.pipelinedAt(*b.base)
	}
	rawN, rpcN, err := alternate(ctx, b.turn, ceiling, b.pipelinedAt(b.ours))
	if err != nil {
		return nil, fmt.Errorf("pipelined: %w", err)
	}
	r := rate(b.bench, name, perSec(rpcN, b.cfg.Duration), "ops/s",
		fmt.Sprintf("raw pipelined, %d in flight", window), perSec(rawN, b.cfg.Duration))
	r.Target = "ratio >= 0.50"
	return []Result{r}, nil
}

// pipelinedAt sets up the pipelined case on one connection to side's
// server.
func (b *rpcBench) pipelinedAt(side rpcSide) measured {
	return func(ctx context.Context) (func(ctx context.Context) (int64, error), func(), error) {
		c, err := b.dial(ctx, side)
		if err != nil {
			return nil, nil, err
		}
		msg, into := make([]byte, b.size), make([]byte, b.size)
		if _, err := c.Call(ctx, wire.MethodPing, nil, [][]byte{msg}, into); err != nil {
			c.Close()
			return nil, nil, err
		}
		return func(ctx context.Context) (int64, error) {
			return pingers(ctx, c, rpcWindow, b.size)
		}, func() { c.Close() }, nil
	}
}

// clients measures 16 concurrent clients, each with its own connection,
// whose ceiling the pool's case shares: it runs (and is reported) when
// either is wanted.
func (b *rpcBench) clients(ctx context.Context) ([]Result, error) {
	if !b.cfg.Want.Any(b.bench, b.clientsName(), b.poolName()) {
		return nil, nil
	}
	ceiling := b.rawClients
	if b.base != nil {
		ceiling = b.clientsAt(*b.base)
	}
	rawM, rpcM, err := alternate(ctx, b.turn, ceiling, b.clientsAt(b.ours))
	if err != nil {
		return nil, fmt.Errorf("16 clients: %w", err)
	}
	b.rawM = rawM
	r := rate(b.bench, b.clientsName(), perSec(rpcM, b.cfg.Duration), "ops/s",
		fmt.Sprintf("raw ping-pong, %d clients", rpcClients), perSec(rawM, b.cfg.Duration))
	r.Target = ">= 100000 ops/s"
	return []Result{r}, nil
}

// rawClients sets up the ceiling of clients: 16 raw echo connections.
func (b *rpcBench) rawClients(ctx context.Context) (func(ctx context.Context) (int64, error), func(), error) {
	size := b.size
	ncs := make([]net.Conn, 0, rpcClients)
	done := func() {
		for _, nc := range ncs {
			nc.Close()
		}
	}
	for range rpcClients {
		nc, err := dialRaw(ctx, b.cfg.RawAddr)
		if err == nil {
			ncs = append(ncs, nc)
			err = echoOnce(nc, size)
		}
		if err != nil {
			done()
			return nil, nil, err
		}
	}
	return func(ctx context.Context) (int64, error) {
		var next atomic.Int32
		return callers(ctx, rpcClients, func() func() error {
			nc := ncs[next.Add(1)-1]
			msg, in := make([]byte, size), make([]byte, size)
			return func() error {
				if _, err := nc.Write(msg); err != nil {
					return err
				}
				_, err := io.ReadFull(nc, in)
				return err
			}
		})
	}, done, nil
}

// clientsAt sets up pdc's side of clients: 16 RPC connections to side's
// server.
func (b *rpcBench) clientsAt(side rpcSide) measured {
	return func(ctx context.Context) (func(ctx context.Context) (int64, error), func(), error) {
		return b.rpcClients(ctx, side)
	}
}

func (b *rpcBench) rpcClients(ctx context.Context, side rpcSide) (func(ctx context.Context) (int64, error), func(), error) {
	size := b.size
	conns := make([]*rpc.Conn, 0, rpcClients)
	done := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	msg, into := make([]byte, size), make([]byte, size)
	for range rpcClients {
		c, err := b.dial(ctx, side)
		if err == nil {
			conns = append(conns, c)
			_, err = c.Call(ctx, wire.MethodPing, nil, [][]byte{msg}, into)
		}
		if err != nil {
			done()
			return nil, nil, err
		}
	}
	return func(ctx context.Context) (int64, error) {
		var next atomic.Int32
		return callers(ctx, rpcClients, func() func() error {
			c := conns[next.Add(1)-1]
			msg, into := make([]byte, size), make([]byte, size)
			return func() error {
				_, err := c.Call(context.Background(), wire.MethodPing, nil, [][]byte{msg}, into)
				return err
			}
		})
	}, done, nil
}

// pool measures 16 goroutines sharing one client's pool, as the threads
// of one process would: the pool's connections carry several calls each.
// Its ceiling is that of clients, which measured it.
func (b *rpcBench) pool(ctx context.Context) ([]Result, error) {
	if !b.cfg.Want.Any(b.bench, b.poolName()) {
		return nil, nil
	}
	var ceiling measured // the clients' case's, measured there
	if b.base != nil {
		ceiling = b.poolAt(*b.base)
	}
	baseP, rpcP, err := alternate(ctx, b.turn, ceiling, b.poolAt(b.ours))
	if err != nil {
		return nil, fmt.Errorf("16 goroutines, one client: %w", err)
	}
	if b.base == nil {
		baseP = b.rawM
	}
	r := rate(b.bench, b.poolName(), perSec(rpcP, b.cfg.Duration), "ops/s",
		fmt.Sprintf("raw ping-pong, %d clients", rpcClients), perSec(baseP, b.cfg.Duration))
	r.Target = ">= 100000 ops/s"
	return []Result{r}, nil
}

// poolAt sets up the pool's case: a pool of 2 connections to side's
// server, warmed.
func (b *rpcBench) poolAt(side rpcSide) measured {
	size := b.size
	return func(ctx context.Context) (func(ctx context.Context) (int64, error), func(), error) {
		p := rpc.NewPool(side.addr, 2, rpc.DialOptions{Secret: side.secret})
		// Warm: the pool's connections dialed before the window.
		if _, err := callers(ctx, 2, func() func() error {
			msg, into := make([]byte, size), make([]byte, size)
			n := 0
			return func() error {
				if n++; n > 16 {
					return errEnough
				}
				_, err := p.Call(ctx, wire.MethodPing, nil, [][]byte{msg}, into)
				return err
			}
		}); err != nil && !errors.Is(err, errEnough) {
			p.Close()
			return nil, nil, err
		}
		return func(ctx context.Context) (int64, error) {
			return pingers(ctx, p, rpcClients, size)
		}, func() { p.Close() }, nil
	}
}

// measured sets up one side of a comparison (connections dialed and used
// once) and returns what to run in the timed window, and how to tear it
// down after: set-up is not what is measured, on either side.
type measured func(ctx context.Context) (window func(ctx context.Context) (int64, error), done func(), err error)

// alternate runs ceiling (if any) and ours in turns of d, rounds times
// each, each set up afresh before its window, and returns the totals.
func alternate(ctx context.Context, d time.Duration, ceiling, ours measured) (int64, int64, error) {
	var a, b int64
	turn := func(m measured) (int64, error) {
		w, done, err := m(ctx)
		if err != nil {
			return 0, err
		}
		defer done()
		return during(ctx, d, w)
	}
	for i := range rounds {
		for _, isOurs := range turnOrder(i) {
			if !isOurs {
				if ceiling == nil {
					continue
				}
				n, err := turn(ceiling)
				if err != nil {
					return 0, 0, fmt.Errorf("ceiling: %w", err)
				}
				a += n
				continue
			}
			n, err := turn(ours)
			if err != nil {
				return 0, 0, err
			}
			b += n
		}
	}
	return a, b, nil
}

// turnOrder is the order of round i's two turns (true: ours): the
// ceiling first in even rounds, ours first in odd ones. The second turn
// of a pair runs measurably slower on sequential round trips (a server
// woken from idle, threads placed anew), which a fixed order would
// charge to one side.
func turnOrder(i int) [2]bool {
	if i%2 == 0 {
		return [2]bool{false, true}
	}
	return [2]bool{true, false}
}

// errEnough ends a warm-up of callers.
var errEnough = errors.New("enough")

// echoOnce makes one round trip of size bytes on an echo connection.
func echoOnce(nc net.Conn, size int) error {
	if _, err := nc.Write(make([]byte, size)); err != nil {
		return err
	}
	_, err := io.ReadFull(nc, make([]byte, size))
	return err
}

// timed runs body's ops, after a warm-up, for d (at least one op) and
// collects the duration of every op it times. The window starts after the
// warm-up, so that a slow start on a busy machine cannot leave it empty.
func timed(ctx context.Context, d time.Duration, body func(ctx context.Context, loop func(func() error) error) error) ([]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lat := make([]time.Duration, 0, 1<<16)
	err := body(ctx, func(op func() error) error {
		// Warm up: connection set up, caches, goroutines.
		for range 100 {
			if err := op(); err != nil {
				return err
			}
		}
		end := time.Now().Add(d)
		for {
			t0 := time.Now()
			if err := op(); err != nil {
				return err
			}
			lat = append(lat, time.Since(t0))
			if !t0.Before(end) {
				return nil
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if len(lat) == 0 {
		return nil, fmt.Errorf("no operation completed in %v", d)
	}
	return lat, nil
}

// during runs body with a context that ends after d.
func during(ctx context.Context, d time.Duration, body func(ctx context.Context) (int64, error)) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return body(ctx)
}

// callers runs n goroutines, each repeating the op newOp gives it, until
// ctx ends, and counts the ops.
// pinger is a connection or a pool: what pingers calls.
type pinger interface {
	Call(ctx context.Context, m wire.Method, hdr []byte, payload [][]byte, into []byte) (rpc.Reply, error)
}

// pingers runs n callers of size-byte pings on c, each with buffers of
// its own, as callers does.
func pingers(ctx context.Context, c pinger, n, size int) (int64, error) {
	return callers(ctx, n, func() func() error {
		msg, into := make([]byte, size), make([]byte, size)
		return func() error {
			_, err := c.Call(context.Background(), wire.MethodPing, nil, [][]byte{msg}, into)
			return err
		}
	})
}

func callers(ctx context.Context, n int, newOp func() func() error) (int64, error) {
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		op := newOp()
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := op(); err != nil {
					errs <- err
					return
				}
				total.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	return total.Load(), <-errs
}

func pct(lat []time.Duration, p int) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func perSec(n int64, d time.Duration) float64 { return float64(n) / d.Seconds() }
