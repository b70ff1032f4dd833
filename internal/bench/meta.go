package bench

import (
	"context"
	"fmt"
	"io"
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
	run := time.Now().UnixNano()
	ct, _, err := c.CreateContainer(ctx, fmt.Sprintf("bench-%d", run), client.Persistent)
	if err != nil {
		return nil, err
	}
	props := client.ObjectProps{Dims: []uint64{1024, 1024}, Type: region.Float}
	name := func(kind string, i int) string { return fmt.Sprintf("%s-%d-%08d", kind, run, i) }
	bench := "meta"
	if cfg.Label != "" {
		bench += " (" + cfg.Label + ")"
	}
	var out []Result
	parallelName := fmt.Sprintf("create, %d client processes, one at a time", cfg.Procs)
	// The creates run for any case of one at a time (the others work on
	// their objects) and for the parallel case's target (3x one client).
	oneAtATime := cfg.Want.Any(bench, "create, 1 client, one at a time", "open, 1 client, one at a time", "tag put, 1 client, one at a time",
		"tag get, 1 client, one at a time", parallelName)

	// The raw ceiling's connection is dialed and warmed once, as the
	// client's are before the first create: a turn of the ceiling times
	// round trips, not a dial and a cold start.
	echo, err := dialRaw(ctx, cfg.RawAddr)
	if err != nil {
		return nil, fmt.Errorf("raw ceiling: %w", err)
	}
	defer echo.Close()
	msg, in := make([]byte, 64), make([]byte, 64)
	roundTrip := func() error {
		if _, err := echo.Write(msg); err != nil {
			return err
		}
		_, err := io.ReadFull(echo, in)
		return err
	}
	for range 100 {
		if err := roundTrip(); err != nil {
			return nil, fmt.Errorf("raw ceiling: %w", err)
		}
	}
	// rawFor runs raw sequential round trips for d and returns how many.
	rawFor := func(d time.Duration) (int64, error) {
		var n int64
		for end := time.Now().Add(d); time.Now().Before(end); n++ {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			if err := roundTrip(); err != nil {
				return n, err
			}
		}
		return n, nil
	}
	rawRate := func() (float64, error) {
		n, err := rawFor(time.Second)
		return float64(n), err
	}
	// seq runs op N times in rounds, each after a turn of the raw ceiling
	// as long as the round before took: the shared machine's speed drifts,
	// and both sides see the same drift.
	seq := func(what, target string, op func(i int) error) error {
		if !cfg.Want.Any(bench, what+", 1 client, one at a time") && !(what == "create" && oneAtATime) {
			return nil
		}
		var ours, raw time.Duration
		var rawN int64
		turn := 100 * time.Millisecond
		per := max(cfg.N/rounds, 1)
		for start := 0; start < cfg.N; start += per {
			n, err := rawFor(turn)
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
		out = append(out, r)
		return nil
	}

	objs := make([]*client.Object, cfg.N)
	err = seq("create", "ratio >= 0.85", func(i int) error {
		o, err := ct.CreateObject(ctx, name("seq", i), props)
		objs[i] = o
		return err
	})
	if err != nil {
		return nil, err
	}
	err = seq("open", "ratio >= 0.85", func(i int) error {
		o, err := c.OpenObject(ctx, name("seq", i))
		if err == nil {
			objs[i] = o
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if cfg.Want.Any(bench, "tag get, 1 client, one at a time") && !cfg.Want.Any(bench, "tag put, 1 client, one at a time") {
		// The gets need the puts: run them, wanted or not.
		want := cfg.Want
		cfg.Want = func(k string) bool { return k == bench+": tag put, 1 client, one at a time" || want(k) }
	}
	err = seq("tag put", "ratio >= 0.85", func(i int) error {
		return objs[i].PutTag(ctx, "step", client.Int64(int64(i)))
	})
	if err != nil {
		return nil, err
	}
	err = seq("tag get", "ratio >= 0.85", func(i int) error {
		_, err := objs[i].GetTag(ctx, "step")
		return err
	})
	if err != nil {
		return nil, err
	}
	oneClient := 0.0
	if len(out) > 0 {
		oneClient = out[0].Value
	}
	batchName := fmt.Sprintf("create, 1 client, batches of %d", client.MaxBatch)
	if !cfg.Want.Any(bench, batchName, parallelName) {
		return out, nil
	}

	// Batched creates.
	ceil, err := rawRate()
	if err != nil {
		return nil, err
	}
	specs := make([]client.ObjectSpec, cfg.N)
	for i := range specs {
		specs[i] = client.ObjectSpec{Name: name("batch", i), Props: props}
	}
	// One call: the client sends them in requests of client.MaxBatch
	// objects, two in flight.
	t0 := time.Now()
	if _, err := ct.CreateObjects(ctx, specs); err != nil {
		return nil, fmt.Errorf("batched create: %w", err)
	}
	r := rate(bench, batchName, float64(cfg.N)/time.Since(t0).Seconds(), "ops/s",
		"raw tcp ping-pong rate", ceil)
	r.Target = ">= 300000 ops/s"
	out = append(out, r)

	if cfg.Parallel != nil && cfg.Want.Any(bench, parallelName) {
		each := cfg.N / cfg.Procs
		ceilName, ceil := "raw tcp ping-pong rate", 0.0
		if cfg.RawParallel != nil {
			took, err := cfg.RawParallel(ctx, cfg.Procs, each)
			if err != nil {
				return nil, fmt.Errorf("raw ceiling: %w", err)
			}
			ceilName, ceil = fmt.Sprintf("raw ping-pong, %d processes", cfg.Procs), float64(each*cfg.Procs)/took.Seconds()
		} else if ceil, err = rawRate(); err != nil {
			return nil, err
		}
		took, err := cfg.Parallel(ctx, cfg.Procs, each)
		if err != nil {
			return nil, fmt.Errorf("parallel create: %w", err)
		}
		v := float64(each*cfg.Procs) / took.Seconds()
		r := rate(bench, parallelName, v, "ops/s",
			ceilName, ceil)
		r.Target = fmt.Sprintf(">= 3x one client (%.0f ops/s): %.1fx", oneClient, v/max(oneClient, 1))
		out = append(out, r)
	}
	return out, nil
}
