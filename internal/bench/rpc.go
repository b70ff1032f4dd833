package bench

import (
	"context"
	"fmt"
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
}

// RPC measures 64-byte round trips: sequential, 64 in flight on one
// connection, and 16 concurrent clients, each next to the same pattern on a
// raw socket.
func RPC(ctx context.Context, cfg RPCConfig) ([]Result, error) {
	if cfg.Duration == 0 {
		cfg.Duration = 2 * time.Second
	}
	if cfg.Size == 0 {
		cfg.Size = 64
	}
	size := cfg.Size
	var out []Result

	// Sequential round trips: p50 and p99 latency.
	rawLat, err := timed(ctx, cfg.Duration, func(ctx context.Context, loop func(func() error) error) error {
		return rawPingPong(ctx, cfg.RawAddr, size, loop)
	})
	if err != nil {
		return nil, fmt.Errorf("raw ping-pong: %w", err)
	}
	rpcLat, err := timed(ctx, cfg.Duration, func(ctx context.Context, loop func(func() error) error) error {
		c, err := rpc.Dial(ctx, cfg.RPCAddr, rpc.DialOptions{Secret: cfg.Secret})
		if err != nil {
			return err
		}
		defer c.Close()
		msg, into := make([]byte, size), make([]byte, size)
		callCtx := context.Background()
		return loop(func() error {
			_, err := c.Call(callCtx, wire.MethodPing, nil, [][]byte{msg}, into)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("rpc sequential: %w", err)
	}
	name := fmt.Sprintf("%dB sequential", size)
	r := latency("rpc", name+" p50", us(pct(rpcLat, 50)), "us", "raw tcp ping-pong p50", us(pct(rawLat, 50)))
	r.Target = "ratio >= 0.67 (p50 <= 1.5x raw)"
	out = append(out, r)
	out = append(out, latency("rpc", name+" p99", us(pct(rpcLat, 99)), "us", "raw tcp ping-pong p99", us(pct(rawLat, 99))))
	out = append(out, rate("rpc", name+" rate", float64(len(rpcLat))/cfg.Duration.Seconds(), "ops/s", "raw tcp ping-pong rate", float64(len(rawLat))/cfg.Duration.Seconds()))

	// 64 in flight on one connection.
	const window = 64
	rawN, err := during(ctx, cfg.Duration, func(ctx context.Context) (int64, error) {
		return rawPipelined(ctx, cfg.RawAddr, size, window)
	})
	if err != nil {
		return nil, fmt.Errorf("raw pipelined: %w", err)
	}
	rpcN, err := during(ctx, cfg.Duration, func(ctx context.Context) (int64, error) {
		c, err := rpc.Dial(ctx, cfg.RPCAddr, rpc.DialOptions{Secret: cfg.Secret})
		if err != nil {
			return 0, err
		}
		defer c.Close()
		return callers(ctx, window, func() func() error {
			msg, into := make([]byte, size), make([]byte, size)
			return func() error {
				_, err := c.Call(context.Background(), wire.MethodPing, nil, [][]byte{msg}, into)
				return err
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("rpc pipelined: %w", err)
	}
	r = rate("rpc", fmt.Sprintf("%dB, %d in flight, 1 conn", size, window), perSec(rpcN, cfg.Duration), "ops/s",
		fmt.Sprintf("raw pipelined, %d in flight", window), perSec(rawN, cfg.Duration))
	r.Target = "ratio >= 0.50"
	out = append(out, r)

	// 16 concurrent clients, each with its own connection.
	const clients = 16
	rawM, err := during(ctx, cfg.Duration, func(ctx context.Context) (int64, error) {
		var total atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for range clients {
			wg.Go(func() {
				err := rawPingPong(ctx, cfg.RawAddr, size, func(op func() error) error {
					for ctx.Err() == nil {
						if err := op(); err != nil {
							return err
						}
						total.Add(1)
					}
					return nil
				})
				if err != nil && ctx.Err() == nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		return total.Load(), <-errs
	})
	if err != nil {
		return nil, fmt.Errorf("raw 16 clients: %w", err)
	}
	rpcM, err := during(ctx, cfg.Duration, func(ctx context.Context) (int64, error) {
		conns := make([]*rpc.Conn, clients)
		for i := range conns {
			c, err := rpc.Dial(ctx, cfg.RPCAddr, rpc.DialOptions{Secret: cfg.Secret})
			if err != nil {
				return 0, err
			}
			defer c.Close()
			conns[i] = c
		}
		var next atomic.Int32
		return callers(ctx, clients, func() func() error {
			c := conns[next.Add(1)-1]
			msg, into := make([]byte, size), make([]byte, size)
			return func() error {
				_, err := c.Call(context.Background(), wire.MethodPing, nil, [][]byte{msg}, into)
				return err
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("rpc 16 clients: %w", err)
	}
	r = rate("rpc", fmt.Sprintf("%dB, %d clients", size, clients), perSec(rpcM, cfg.Duration), "ops/s",
		fmt.Sprintf("raw ping-pong, %d clients", clients), perSec(rawM, cfg.Duration))
	r.Target = ">= 100000 ops/s"
	out = append(out, r)
	return out, nil
}

// timed runs body for d and collects the duration of every op it runs.
func timed(ctx context.Context, d time.Duration, body func(ctx context.Context, loop func(func() error) error) error) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	lat := make([]time.Duration, 0, 1<<16)
	err := body(ctx, func(op func() error) error {
		// Warm up: connection set up, caches, goroutines.
		for range 100 {
			if err := op(); err != nil {
				return err
			}
		}
		for ctx.Err() == nil {
			t0 := time.Now()
			if err := op(); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			lat = append(lat, time.Since(t0))
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
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
