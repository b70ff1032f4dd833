package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// MetaConfig says what the metadata benchmark runs against.
type MetaConfig struct {
	// TmpDir is the cluster's tmpdir.
	TmpDir string
	// RawAddr is an echo server (EchoServer) for the ceiling.
	RawAddr string
	// N objects per case. Default 100000.
	N int
	// Label tells results of different runs apart (e.g. the durability).
	Label string
	// Parallel, if set, runs the multi-process case: it starts procs client
	// processes that each create n objects named with their prefix one at a
	// time, and returns when all are done, with the time from the moment
	// all were released (started and connected) to the last one's end.
	Parallel func(ctx context.Context, procs, n int) (time.Duration, error)
	// RawParallel, if set, is the parallel case's ceiling: it runs procs
	// processes that each make n raw round trips to RawAddr, one at a time,
	// and returns as Parallel does.
	RawParallel func(ctx context.Context, procs, n int) (time.Duration, error)
	// Procs for the parallel case. Default 8.
	Procs int
	// Want, if set, skips the cases it rules out (those others need, such
	// as the creates before the opens, still run).
	Want Want
}

// Meta measures metadata operations one at a time from one client (create,
// open, tag put, tag get), batched creates, and creates from several client
// processes, each next to the raw sequential round-trip rate measured just
// before it.
func Meta(ctx context.Context, cfg MetaConfig) ([]Result, error) {
	if cfg.N == 0 {
		cfg.N = 100000
	}
	if cfg.Procs == 0 {
		cfg.Procs = 8
	}
	c, err := client.Connect(ctx, client.WithTmpDir(cfg.TmpDir))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	m := &metaBench{cfg: cfg, c: c, run: time.Now().UnixNano(), bench: "meta",
		props: client.ObjectProps{Dims: []uint64{1024, 1024}, Type: region.Float}}
	m.ct, _, err = c.CreateContainer(ctx, fmt.Sprintf("bench-%d", m.run), client.Persistent)
	if err != nil {
		return nil, err
	}
	if cfg.Label != "" {
		m.bench += " (" + cfg.Label + ")"
	}
	m.parallelName = fmt.Sprintf("create, %d client processes, one at a time", cfg.Procs)
	m.raw, err = dialRawCeiling(ctx, cfg.RawAddr)
	if err != nil {
		return nil, fmt.Errorf("raw ceiling: %w", err)
	}
	defer m.raw.Close()
	if err := m.oneAtATime(ctx); err != nil {
		return nil, err
	}
	oneClient := 0.0
	if len(m.out) > 0 {
		oneClient = m.out[0].Value
	}
	if !m.cfg.Want.Any(m.bench, m.batchName(), m.parallelName) {
		return m.out, nil
	}
	if err := m.batched(ctx); err != nil {
		return nil, err
	}
	if err := m.parallel(ctx, oneClient); err != nil {
		return nil, err
	}
	return m.out, nil
}

// metaBench is one run of the metadata benchmark.
type metaBench struct {
	cfg   MetaConfig
	c     *client.Client
	ct    *client.Container
	run   int64 // names this run's container and objects
	bench string
	props client.ObjectProps
	raw   *rawCeiling
	out   []Result
	// parallelName is the multi-process case's.
	parallelName string
}

func (m *metaBench) name(kind string, i int) string { return fmt.Sprintf("%s-%d-%08d", kind, m.run, i) }

func (m *metaBench) batchName() string {
	return fmt.Sprintf("create, 1 client, batches of %d", client.MaxBatch)
}

// oneAtATime runs the cases of one client, one operation at a time: the
// creates, then opens, tag puts and tag gets of the objects created.
func (m *metaBench) oneAtATime(ctx context.Context) error {
	objs := make([]*client.Object, m.cfg.N)
	err := m.seq(ctx, "create", "ratio >= 0.85", func(i int) error {
		o, err := m.ct.CreateObject(ctx, m.name("seq", i), m.props)
		objs[i] = o
		return err
	})
	if err != nil {
		return err
	}
	err = m.seq(ctx, "open", "ratio >= 0.85", func(i int) error {
		o, err := m.c.OpenObject(ctx, m.name("seq", i))
		if err == nil {
			objs[i] = o
		}
		return err
	})
	if err != nil {
		return err
	}
	if m.cfg.Want.Any(m.bench, "tag get, 1 client, one at a time") && !m.cfg.Want.Any(m.bench, "tag put, 1 client, one at a time") {
		// The gets need the puts: run them, wanted or not.
		want, bench := m.cfg.Want, m.bench
		m.cfg.Want = func(k string) bool { return k == bench+": tag put, 1 client, one at a time" || want(k) }
	}
	err = m.seq(ctx, "tag put", "ratio >= 0.85", func(i int) error {
		return objs[i].PutTag(ctx, "step", client.Int64(int64(i)))
	})
	if err != nil {
		return err
	}
	return m.seq(ctx, "tag get", "ratio >= 0.85", func(i int) error {
		_, err := objs[i].GetTag(ctx, "step")
		return err
	})
}

// seq runs op N times in rounds, each after a turn of the raw ceiling
// as long as the round before took: the shared machine's speed drifts,
// and both sides see the same drift.
func (m *metaBench) seq(ctx context.Context, what, target string, op func(i int) error) error {
	cfg, bench := m.cfg, m.bench
	// The creates run for any case of one at a time (the others work on
	// their objects) and for the parallel case's target (3x one client).
	creates := what == "create" && cfg.Want.Any(bench, "create, 1 client, one at a time", "open, 1 client, one at a time",
		"tag put, 1 client, one at a time", "tag get, 1 client, one at a time", m.parallelName)
	if !cfg.Want.Any(bench, what+", 1 client, one at a time") && !creates {
		return nil
	}
	var ours, raw time.Duration
	var rawN int64
	turn := 100 * time.Millisecond
	per := max(cfg.N/rounds, 1)
	for start := 0; start < cfg.N; start += per {
		n, err := m.raw.For(ctx, turn)
		if err != nil {
			return fmt.Errorf("raw ceiling: %w", err)
		}
		rawN += n
		raw += turn
		t0 := time.Now()
		for i := start; i < min(start+per, cfg.N); i++ {
			if err := op(i); err != nil {
				return fmt.Errorf("%s %d: %w", what, i, err)
			}
		}
		turn = time.Since(t0)
		ours += turn
	}
	r := rate(bench, what+", 1 client, one at a time", float64(cfg.N)/ours.Seconds(), "ops/s",
		"raw tcp ping-pong rate", float64(rawN)/raw.Seconds())
	r.Target = target
	m.out = append(m.out, r)
	return nil
}

// batched measures N creates in one call: the client sends them in
// requests of client.MaxBatch objects, two in flight.
func (m *metaBench) batched(ctx context.Context) error {
	ceil, err := m.raw.Rate(ctx)
	if err != nil {
		return err
	}
	specs := make([]client.ObjectSpec, m.cfg.N)
	for i := range specs {
		specs[i] = client.ObjectSpec{Name: m.name("batch", i), Props: m.props}
	}
	t0 := time.Now()
	if _, err := m.ct.CreateObjects(ctx, specs); err != nil {
		return fmt.Errorf("batched create: %w", err)
	}
	r := rate(m.bench, m.batchName(), float64(m.cfg.N)/time.Since(t0).Seconds(), "ops/s",
		"raw tcp ping-pong rate", ceil)
	r.Target = ">= 300000 ops/s"
	m.out = append(m.out, r)
	return nil
}

// parallel measures creates from Procs client processes, if cfg.Parallel
// is set, next to RawParallel's ceiling (or the raw rate of this
// process); its target is 3x the one client's rate.
func (m *metaBench) parallel(ctx context.Context, oneClient float64) error {
	cfg := m.cfg
	if cfg.Parallel == nil || !cfg.Want.Any(m.bench, m.parallelName) {
		return nil
	}
	each := cfg.N / cfg.Procs
	ceilName, ceil := "raw tcp ping-pong rate", 0.0
	if cfg.RawParallel != nil {
		took, err := cfg.RawParallel(ctx, cfg.Procs, each)
		if err != nil {
			return fmt.Errorf("raw ceiling: %w", err)
		}
		ceilName, ceil = fmt.Sprintf("raw ping-pong, %d processes", cfg.Procs), float64(each*cfg.Procs)/took.Seconds()
	} else {
		var err error
		if ceil, err = m.raw.Rate(ctx); err != nil {
			return err
		}
	}
	took, err := cfg.Parallel(ctx, cfg.Procs, each)
	if err != nil {
		return fmt.Errorf("parallel create: %w", err)
	}
	v := float64(each*cfg.Procs) / took.Seconds()
	r := rate(m.bench, m.parallelName, v, "ops/s", ceilName, ceil)
	r.Target = fmt.Sprintf(">= 3x one client (%.0f ops/s): %.1fx", oneClient, v/max(oneClient, 1))
	m.out = append(m.out, r)
	return nil
}

// rawCeiling is a connection to an echo server for the ceiling of
// sequential round trips. It is dialed and warmed once, as a client's
// connections are before its first operation: a turn of the ceiling times
// round trips, not a dial and a cold start.
type rawCeiling struct {
	nc      net.Conn
	msg, in []byte
}

func dialRawCeiling(ctx context.Context, addr string) (*rawCeiling, error) {
	nc, err := dialRaw(ctx, addr)
	if err != nil {
		return nil, err
	}
	r := &rawCeiling{nc: nc, msg: make([]byte, 64), in: make([]byte, 64)}
	for range 100 {
		if err := r.roundTrip(); err != nil {
			nc.Close()
			return nil, err
		}
	}
	return r, nil
}

func (r *rawCeiling) roundTrip() error {
	if _, err := r.nc.Write(r.msg); err != nil {
		return err
	}
	_, err := io.ReadFull(r.nc, r.in)
	return err
}

// For runs raw sequential round trips for d and returns how many.
func (r *rawCeiling) For(ctx context.Context, d time.Duration) (int64, error) {
	var n int64
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if err := r.roundTrip(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// Rate is the round trips of one second.
func (r *rawCeiling) Rate(ctx context.Context) (float64, error) {
	n, err := r.For(ctx, time.Second)
	return float64(n), err
}

func (r *rawCeiling) Close() error { return r.nc.Close() }
