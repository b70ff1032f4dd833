package bench

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/dtl/dtlpeer"
)

// DTLConfig says what the transport benchmark runs against.
type DTLConfig struct {
	// Peer is a dtlpeer process's RPC address and secret.
	Peer   string
	Secret []byte
	// RawTCP and RawUnix are a SourceServer's addresses (Unix: a path).
	RawTCP, RawUnix string
	// Sizes and Modes to measure. Default: 4 KiB, 1 MiB, 64 MiB, 1 GiB and
	// every mode.
	Sizes []int64
	Modes []dtl.Mode
	// Budget is the time spent per size and mode (at least 3 transfers).
	// Default 1s.
	Budget time.Duration
	// Big, if set, adds one checked transfer of this size per mode (the
	// conformance suite's 5 GiB case, which -short skips), next to one raw
	// TCP transfer of the same size.
	Big int64
	// Source is the peer's kind of payload: "file" (a sealed memory
	// file, sent from the page cache) or "buffer". Default: a buffer for
	// stream, pull and push (as the raw ceiling sends), the file for shm
	// (its natural form: handed over as it is).
	Source string
	// Want, if set, skips the cases it rules out.
	Want Want
}

// DTL measures fetches of each size by each mode next to the raw ceiling
// of the same bytes measured in alternation with it: a raw TCP (or Unix
// socket, for shm's view) request and read, and memcpy for shm. 4 KiB is
// reported as latency (p50), larger sizes as throughput.
func DTL(ctx context.Context, cfg DTLConfig) ([]Result, error) {
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = []int64{4 << 10, 1 << 20, 64 << 20, 1 << 30}
	}
	if len(cfg.Modes) == 0 {
		cfg.Modes = dtl.Modes
	}
	if cfg.Budget == 0 {
		cfg.Budget = time.Second
	}
	r, err := dtl.NewReceiver(dtl.ReceiverConfig{Mode: dtl.ModeStream, Secret: cfg.Secret, ClientName: "bench-dtl"})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	tcp, err := dialRaw(ctx, cfg.RawTCP)
	if err != nil {
		return nil, fmt.Errorf("raw tcp: %w", err)
	}
	defer tcp.Close()
	var d net.Dialer
	unix, err := d.DialContext(ctx, "unix", cfg.RawUnix)
	if err != nil {
		return nil, fmt.Errorf("raw unix: %w", err)
	}
	defer unix.Close()

	b := &dtlBench{cfg: cfg, r: r, tcp: tcp}
	var out []Result
	for _, size := range cfg.Sizes {
		buf := make([]byte, size)
		src := make([]byte, size)
		dtlpeer.Fill(src, 0)
		for _, m := range cfg.Modes {
			if name := b.name(m, size); !cfg.Want.Any("dtl", name, name+" p50") {
				continue
			}
			res, err := b.fetches(ctx, m, size, buf, src)
			if err != nil {
				return nil, err
			}
			out = append(out, res)
		}
		if size >= 64<<20 && slices.Contains(cfg.Modes, dtl.ModeShm) && cfg.Want.Any("dtl", "shm view (mapped, no copy) "+sizeName(size)) {
			res, err := b.shmView(ctx, size, buf, src)
			if err != nil {
				return nil, err
			}
			out = append(out, res)
		}
	}
	if cfg.Big > 0 {
		big, err := bigTransfers(ctx, cfg, r, tcp)
		if err != nil {
			return nil, err
		}
		out = append(out, big...)
	}
	return out, nil
}

// dtlBench is one run of the DTL benchmark.
type dtlBench struct {
	cfg DTLConfig
	r   *dtl.Receiver
	tcp net.Conn // the raw ceiling's
}

// srcOf is the peer's kind of payload mode m fetches (cfg.Source).
func (b *dtlBench) srcOf(m dtl.Mode) string {
	switch {
	case b.cfg.Source == "file" || b.cfg.Source == "" && m == dtl.ModeShm:
		return "file"
	}
	return "buffer"
}

func (b *dtlBench) name(m dtl.Mode, size int64) string {
	return fmt.Sprintf("%s %s from %s", m, sizeName(size), b.srcOf(m))
}

// fetches measures fetches of size bytes into buf by mode m, in
// alternation with the raw ceiling (memcpy from src for shm above 64 KiB),
// after one of each untimed.
func (b *dtlBench) fetches(ctx context.Context, m dtl.Mode, size int64, buf, src []byte) (Result, error) {
	keyOf := map[string]string{"file": "pattern", "buffer": "buf"}
	key := fmt.Appendf(nil, "%s:%d", keyOf[b.srcOf(m)], size)
	ours := func() error {
		_, err := b.r.Fetch(ctx, b.cfg.Peer, key, dtl.IntoBuffer(buf), dtl.WithMode(m))
		return err
	}
	ceiling, raw := "raw tcp", func() error { return rawFetch(ctx, b.tcp, buf) }
	if m == dtl.ModeShm && size > 64<<10 {
		ceiling, raw = "memcpy, one core", func() error { copy(buf, src); return nil }
	}
	// Warm up: connections, the peer's pattern file, page faults.
	if err := ours(); err != nil {
		return Result{}, fmt.Errorf("%s %s: %w", m, sizeName(size), err)
	}
	if err := dtlpeer.Check(buf, 0); err != nil {
		return Result{}, fmt.Errorf("%s %s: received bytes are wrong: %w", m, sizeName(size), err)
	}
	if err := raw(); err != nil {
		return Result{}, fmt.Errorf("%s %s: %w", ceiling, sizeName(size), err)
	}
	ourT, rawT, err := alternateOps(ctx, b.cfg.Budget, ours, raw)
	if err != nil {
		return Result{}, fmt.Errorf("%s %s: %w", m, sizeName(size), err)
	}
	name := b.name(m, size)
	if size <= 64<<10 {
		res := latency("dtl", name+" p50", us(median(ourT)), "us", ceiling+" request p50", us(median(rawT)))
		res.Target = "ratio >= 0.50 (<= 2x raw)"
		return res, nil
	}
	res := rate("dtl", name, gbps(size, ourT), "GB/s", ceiling, gbps(size, rawT))
	switch {
	case (m == dtl.ModePull || m == dtl.ModePush) && size >= 1<<20:
		res.Target = "ratio >= 0.85"
	case m == dtl.ModeShm && size >= 64<<20:
		res.Target = "ratio >= 0.50"
	}
	return res, nil
}

// shmView measures reading size bytes in place, mapped and not copied,
// next to a memcpy of them.
func (b *dtlBench) shmView(ctx context.Context, size int64, buf, src []byte) (Result, error) {
	key := fmt.Appendf(nil, "pattern:%d", size)
	var sum byte
	view := func() error {
		v, err := b.r.FetchView(ctx, b.cfg.Peer, key, dtl.WithMode(dtl.ModeShm))
		if err != nil {
			return err
		}
		p := v.Bytes()
		for i := 0; i < len(p); i += 4096 {
			sum += p[i] // touch every page, as a reader would
		}
		return v.Close()
	}
	raw := func() error { copy(buf, src); return nil }
	ourT, rawT, err := alternateOps(ctx, b.cfg.Budget, view, raw)
	if err != nil {
		return Result{}, fmt.Errorf("shm view %s: %w", sizeName(size), err)
	}
	_ = sum
	return rate("dtl", "shm view (mapped, no copy) "+sizeName(size), gbps(size, ourT), "GB/s",
		"memcpy, one core", gbps(size, rawT)), nil
}

// bigTransfers fetches cfg.Big bytes once per mode, checks every byte and
// reports the throughput next to one raw TCP transfer of the same size.
func bigTransfers(ctx context.Context, cfg DTLConfig, r *dtl.Receiver, tcp net.Conn) ([]Result, error) {
	buf := make([]byte, cfg.Big)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1 // fault the buffer in before anything is timed
	}
	key := fmt.Appendf(nil, "pattern:%d", cfg.Big)
	// The peer makes its pattern file on first use: not part of a figure.
	if _, err := r.Fetch(ctx, cfg.Peer, key, dtl.IntoBuffer(buf[:1]), dtl.WithSection(0, 1), dtl.WithMode(dtl.ModeStream)); err != nil {
		return nil, fmt.Errorf("%s: %w", sizeName(cfg.Big), err)
	}
	t0 := time.Now()
	if err := rawFetch(ctx, tcp, buf); err != nil {
		return nil, fmt.Errorf("raw tcp %s: %w", sizeName(cfg.Big), err)
	}
	raw := []time.Duration{time.Since(t0)}
	var out []Result
	for _, m := range cfg.Modes {
		clear(buf)
		t0 := time.Now()
		n, err := r.Fetch(ctx, cfg.Peer, key, dtl.IntoBuffer(buf), dtl.WithMode(m))
		d := time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", m, sizeName(cfg.Big), err)
		}
		if n != cfg.Big {
			return nil, fmt.Errorf("%s %s: got %d bytes", m, sizeName(cfg.Big), n)
		}
		if err := dtlpeer.Check(buf, 0); err != nil {
			return nil, fmt.Errorf("%s %s: received bytes are wrong: %w", m, sizeName(cfg.Big), err)
		}
		res := rate("dtl", fmt.Sprintf("%s %s, every byte checked", m, sizeName(cfg.Big)), gbps(cfg.Big, []time.Duration{d}), "GB/s",
			"raw tcp, once", gbps(cfg.Big, raw))
		res.Target = "works past 4 GiB"
		out = append(out, res)
	}
	return out, nil
}

// alternateOps runs ours and raw in turns until budget is spent (at least
// three each) and returns their durations.
func alternateOps(ctx context.Context, budget time.Duration, ours, raw func() error) (ourT, rawT []time.Duration, err error) {
	start := time.Now()
	for len(ourT) < 3 || time.Since(start) < budget {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		t0 := time.Now()
		if err := ours(); err != nil {
			return nil, nil, err
		}
		t1 := time.Now()
		if err := raw(); err != nil {
			return nil, nil, fmt.Errorf("ceiling: %w", err)
		}
		ourT = append(ourT, t1.Sub(t0))
		rawT = append(rawT, time.Since(t1))
	}
	return ourT, rawT, nil
}

// Median is the middle of ts.
func Median(ts []time.Duration) time.Duration { return median(ts) }

func median(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}

// gbps is the throughput of the median transfer.
func gbps(size int64, ts []time.Duration) float64 {
	return float64(size) / median(ts).Seconds() / 1e9
}

func sizeName(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
