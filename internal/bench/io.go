package bench

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// IOConfig says what the region I/O benchmark runs against.
type IOConfig struct {
	// TmpDir is the cluster's tmpdir.
	TmpDir string
	// RawTCP is a SourceServer's address, for the ceiling.
	RawTCP string
	// RawUnix, if set, is the SourceServer's Unix socket: the ceiling of a
	// cluster on Unix sockets.
	RawUnix string
	// Label tells clusters apart (e.g. "2 servers").
	Label string
	// Transport, if "shm", moves the payloads through shared memory
	// (client.WithRegionTransport), measured against a raw transfer
	// through shared memory from the ShmSourceServer at RawShm.
	Transport string
	RawShm    string
	// ObjectSize is the bytes of the object moved per case. Default 1 GiB.
	ObjectSize int64
	// Regions are the region sizes. Default 64 KiB, 1 MiB, 16 MiB.
	Regions []int64
	// Partitions and Storages to measure. Default: every one.
	Partitions []client.Partition
	Storages   []client.Storage
	// Rounds per case: each is one Result per case, measured next to
	// its own ceiling, after one untimed pass. Default 3.
	Rounds int
	// Small and SmallSize are the start_all case: Small regions of
	// SmallSize bytes in one StartAll and one WaitAll. Default 65536 of
	// 4 KiB; Small < 0 skips it.
	Small     int
	SmallSize int64
	// FloorDir, if set, is a directory on the data servers' file system
	// where the store floor is measured after the cases (storeFloor).
	FloorDir string
	// Progress, if set, sees each result as soon as it is measured.
	Progress func(Result)
	// Want, if set, skips the cases it rules out.
	Want Want
}

// Partitions lists every partition strategy, in order.
var Partitions = []client.Partition{client.ObjectStatic, client.RegionStatic, client.RegionDynamic, client.RegionLocal}

// Storages lists both storage modes.
var Storages = []client.Storage{client.StorageByOffset, client.StorageByRegion}

func (cfg *IOConfig) defaults() {
	if cfg.ObjectSize == 0 {
		cfg.ObjectSize = 1 << 30
	}
	if len(cfg.Regions) == 0 {
		cfg.Regions = []int64{64 << 10, 1 << 20, 16 << 20}
	}
	if len(cfg.Partitions) == 0 {
		cfg.Partitions = Partitions
	}
	if len(cfg.Storages) == 0 {
		cfg.Storages = Storages
	}
	if cfg.Rounds == 0 {
		cfg.Rounds = 3
	}
	if cfg.Small == 0 {
		cfg.Small = 65536
	}
	if cfg.SmallSize == 0 {
		cfg.SmallSize = 4 << 10
	}
}

// IO writes and reads a 1-D byte object in regions of each size, every
// region's transfer started at once and all waited together (PDC's
// region_transfer_start per region, then wait_all), for each partition
// and storage mode. Each write and each read is followed by the raw
// ceiling: one raw TCP transfer of the same bytes, from memory, into the
// buffer the reads land in, with nothing in between. Both sides run warm:
// a case's object, its buffers and the connections are used once,
// untimed, before its rounds, and every round rewrites the same object
// from the same buffers, as an application reuses its arrays every time
// step. Reads are checked against what was written. It returns one
// Result per case and round.
func IO(ctx context.Context, cfg IOConfig) ([]Result, error) {
	cfg.defaults()
	opts := []client.Option{client.WithTmpDir(cfg.TmpDir)}
	if cfg.Transport != "" {
		opts = append(opts, client.WithRegionTransport(cfg.Transport))
	}
	c, err := client.Connect(ctx, opts...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	b := &ioBench{cfg: cfg, c: c, bench: "io", size: cfg.ObjectSize}
	closeRaw, err := b.dialCeiling(ctx)
	if err != nil {
		return nil, err
	}
	defer closeRaw()
	b.run = time.Now().UnixNano()
	b.ct, _, err = c.CreateContainer(ctx, fmt.Sprintf("bench-io-%d", b.run), client.Persistent)
	if err != nil {
		return nil, err
	}
	if cfg.Label != "" {
		b.bench += " (" + cfg.Label + ")"
	}
	if err := b.cases(ctx); err != nil {
		return nil, err
	}
	if cfg.FloorDir != "" && cfg.Want.Any(b.bench, storeFloorNames(b.size)...) {
		rs, err := storeFloor(ctx, cfg.FloorDir, b.size, cfg.Rounds, b.src, b.dst, b.rawOnce, b.bench, b.ceiling)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			b.emit(r)
		}
	}
	if cfg.Small > 0 && cfg.Want.Any(b.bench, smallNames(cfg)...) {
		rs, err := smallRegions(ctx, c, b.ct, cfg, b.bench, b.run)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			b.emit(r)
		}
	}
	return b.out, nil
}

// ioBench is one run of the region I/O benchmark.
type ioBench struct {
	cfg   IOConfig
	c     *client.Client
	ct    *client.Container
	run   int64 // names this run's container and objects
	bench string
	size  int64
	// src is what is written; dst is where reads and the raw ceiling
	// land: both sides write into the same, already touched, memory.
	src, dst []byte
	// ceiling names the raw transfer rawOnce times; fetch moves buf's
	// bytes that way.
	ceiling string
	fetch   func(buf []byte) error
	out     []Result
}

// rawOnce times the raw transfer of the object's bytes in one request.
func (b *ioBench) rawOnce() (time.Duration, error) { return b.rawEach(int64(len(b.dst))) }

// rawEach times the raw transfer of the object's bytes in one request
// per region of rs bytes, each waited before the next.
func (b *ioBench) rawEach(rs int64) (time.Duration, error) {
	t0 := time.Now()
	for off := int64(0); off < int64(len(b.dst)); off += rs {
		if err := b.fetch(b.dst[off:min(off+rs, int64(len(b.dst)))]); err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}

// dialCeiling connects the raw ceiling (TCP, a Unix socket or shared
// memory, as the cluster's clients move data) and makes the buffers it
// moves. It returns how to close it.
func (b *ioBench) dialCeiling(ctx context.Context) (func(), error) {
	cfg := b.cfg
	b.ceiling = "raw tcp"
	var raw net.Conn
	var err error
	if cfg.RawUnix != "" {
		b.ceiling = "raw unix socket"
		var d net.Dialer
		raw, err = d.DialContext(ctx, "unix", cfg.RawUnix)
	} else {
		raw, err = dialRaw(ctx, cfg.RawTCP)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.ceiling, err)
	}
	b.src = make([]byte, b.size)
	for i := range b.src {
		b.src[i] = byte(i*31 + i>>12)
	}
	b.dst = make([]byte, b.size)
	b.fetch = func(buf []byte) error { return rawFetch(ctx, raw, buf) }
	if cfg.Transport != "shm" {
		return func() { raw.Close() }, nil
	}
	b.ceiling = "raw shm"
	rs, err := dialRawShm(ctx, cfg.RawShm)
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("raw shm: %w", err)
	}
	b.fetch = func(buf []byte) error { return rs.fetch(ctx, buf) }
	return func() { rs.Close(); raw.Close() }, nil
}

func (b *ioBench) emit(r Result) {
	b.out = append(b.out, r)
	if b.cfg.Progress != nil {
		b.cfg.Progress(r)
	}
}

// cases runs every wanted case of partition, storage and region size,
// each on an object of its own.
func (b *ioBench) cases(ctx context.Context) error {
	n := 0
	for _, part := range b.cfg.Partitions {
		for _, st := range b.cfg.Storages {
			for _, rs := range b.cfg.Regions {
				n++
				name := fmt.Sprintf("%s, %s, %s regions", part, st, sizeName(rs))
				if !b.cfg.Want.Any(b.bench, "write "+sizeName(b.size)+", "+name, "read "+sizeName(b.size)+", "+name) {
					continue
				}
				o, err := b.ct.CreateObject(ctx, fmt.Sprintf("io-%d-%d", b.run, n),
					client.ObjectProps{Dims: []uint64{uint64(b.size)}, Type: region.Uint8, Partition: part, Storage: st})
				if err != nil {
					return err
				}
				if err := b.oneCase(ctx, o, name, rs); err != nil {
					return err
				}
				// Regions moved one at a time (Object.Write, Read), as a
				// program that waits for each does: in the first
				// partition and storage only, at 1 MiB and up.
				if part == b.cfg.Partitions[0] && st == b.cfg.Storages[0] && rs >= 1<<20 {
					if err := b.eachCase(ctx, o, name, rs); err != nil {
						return err
					}
				}
				if err := o.Delete(ctx); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// oneCase measures Rounds writes and reads of object o in regions of rs
// bytes, after one untimed pass.
func (b *ioBench) oneCase(ctx context.Context, o *client.Object, name string, rs int64) error {
	// One untimed pass first, as an application's first time step: the
	// object's storage, both processes' buffers and the raw connection's
	// exist from then on, and every round pays for the same things.
	if _, err := moveAll(ctx, b.c, o, client.Write, b.src, rs); err != nil {
		return fmt.Errorf("%s: write: %w", name, err)
	}
	if _, err := moveAll(ctx, b.c, o, client.Read, b.dst, rs); err != nil {
		return fmt.Errorf("%s: read: %w", name, err)
	}
	if _, err := b.rawOnce(); err != nil {
		return fmt.Errorf("%s: %w", b.ceiling, err)
	}
	for range b.cfg.Rounds {
		if err := b.round(ctx, o, name, rs); err != nil {
			return err
		}
	}
	return nil
}

// round overwrites the object and reads it back, each step next to the
// raw ceiling measured right after it, and checks what it read.
func (b *ioBench) round(ctx context.Context, o *client.Object, name string, rs int64) error {
	src, dst, size := b.src, b.dst, b.size
	w, err := moveAll(ctx, b.c, o, client.Write, src, rs)
	if err != nil {
		return fmt.Errorf("%s: write: %w", name, err)
	}
	wRaw, err := b.rawOnce()
	if err != nil {
		return fmt.Errorf("%s: %w", b.ceiling, err)
	}
	clear(dst)
	r, err := moveAll(ctx, b.c, o, client.Read, dst, rs)
	if err != nil {
		return fmt.Errorf("%s: read: %w", name, err)
	}
	if i := firstDiff(src, dst); i >= 0 {
		return fmt.Errorf("%s: read back byte %d as %d, wrote %d", name, i, dst[i], src[i])
	}
	rRaw, err := b.rawOnce()
	if err != nil {
		return fmt.Errorf("%s: %w", b.ceiling, err)
	}
	for _, c := range []struct {
		what   string
		d, raw time.Duration
	}{{"write", w, wRaw}, {"read", r, rRaw}} {
		r := rate(b.bench, c.what+" "+sizeName(size)+", "+name, gbps(size, []time.Duration{c.d}), "GB/s", b.ceiling, gbps(size, []time.Duration{c.raw}))
		if rs >= 1<<20 {
			r.Target = "ratio >= 0.85"
		}
		b.emit(r)
	}
	return nil
}

// eachCase measures Rounds writes and reads of o one region of rs bytes
// at a time, each waited before the next (Object.Write, Object.Read),
// next to the raw transfer of the same regions one request each.
func (b *ioBench) eachCase(ctx context.Context, o *client.Object, name string, rs int64) error {
	each := func(a client.Access) string {
		return fmt.Sprintf("%s %s one region at a time, %s", a, sizeName(b.size), name)
	}
	if !b.cfg.Want.Any(b.bench, each(client.Write), each(client.Read)) {
		return nil
	}
	for range b.cfg.Rounds {
		w, err := moveEach(ctx, o, client.Write, b.src, rs)
		if err != nil {
			return fmt.Errorf("%s: %w", each(client.Write), err)
		}
		wRaw, err := b.rawEach(rs)
		if err != nil {
			return fmt.Errorf("%s: %w", b.ceiling, err)
		}
		clear(b.dst)
		r, err := moveEach(ctx, o, client.Read, b.dst, rs)
		if err != nil {
			return fmt.Errorf("%s: %w", each(client.Read), err)
		}
		if i := firstDiff(b.src, b.dst); i >= 0 {
			return fmt.Errorf("%s: read back byte %d as %d, wrote %d", each(client.Read), i, b.dst[i], b.src[i])
		}
		rRaw, err := b.rawEach(rs)
		if err != nil {
			return fmt.Errorf("%s: %w", b.ceiling, err)
		}
		for _, c := range []struct {
			a      client.Access
			d, raw time.Duration
		}{{client.Write, w, wRaw}, {client.Read, r, rRaw}} {
			b.emit(rate(b.bench, each(c.a), gbps(b.size, []time.Duration{c.d}), "GB/s", b.ceiling+", a request per region", gbps(b.size, []time.Duration{c.raw})))
		}
	}
	return nil
}

// moveEach moves buf to or from o one region of rs bytes at a time.
func moveEach(ctx context.Context, o *client.Object, a client.Access, buf []byte, rs int64) (time.Duration, error) {
	t0 := time.Now()
	for off := int64(0); off < int64(len(buf)); off += rs {
		end := min(off+rs, int64(len(buf)))
		box := region.Box{Off: []uint64{uint64(off)}, Size: []uint64{uint64(end - off)}}
		var err error
		if a == client.Write {
			err = o.Write(ctx, box, buf[off:end])
		} else {
			err = o.Read(ctx, box, buf[off:end])
		}
		if err != nil {
			return 0, fmt.Errorf("region %v: %w", box, err)
		}
	}
	return time.Since(t0), nil
}

// moveAll starts one transfer per region of buf and waits for all of them.
func moveAll(ctx context.Context, c *client.Client, o *client.Object, a client.Access, buf []byte, rs int64) (time.Duration, error) {
	t0 := time.Now()
	ts := make([]*client.Transfer, 0, (int64(len(buf))+rs-1)/rs)
	defer func() {
		for _, t := range ts {
			_ = t.Close(ctx)
		}
	}()
	for off := int64(0); off < int64(len(buf)); off += rs {
		end := min(off+rs, int64(len(buf)))
		box := region.Box{Off: []uint64{uint64(off)}, Size: []uint64{uint64(end - off)}}
		t, err := o.NewTransfer(ctx, buf[off:end], a, region.Box{Off: []uint64{0}, Size: box.Size}, box)
		if err != nil {
			return 0, err
		}
		ts = append(ts, t)
		if err := t.Start(ctx); err != nil {
			return 0, err
		}
	}
	if err := c.WaitAll(ctx, ts); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// smallRegions measures many small regions through one StartAll and one
// WaitAll, next to as many raw round trips of the same bytes pipelined on
// one connection.
func smallRegions(ctx context.Context, c *client.Client, ct *client.Container, cfg IOConfig, bench string, run int64) ([]Result, error) {
	size := int64(cfg.Small) * cfg.SmallSize
	o, err := ct.CreateObject(ctx, fmt.Sprintf("io-small-%d", run),
		client.ObjectProps{Dims: []uint64{uint64(size)}, Type: region.Uint8})
	if err != nil {
		return nil, err
	}
	defer o.Delete(ctx)
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i * 13)
	}
	var out []Result
	for _, a := range []client.Access{client.Write, client.Read} {
		// The first pass is untimed, as in IO.
		for i := range cfg.Rounds + 1 {
			ts := make([]*client.Transfer, cfg.Small)
			t0 := time.Now()
			for i := range ts {
				off := uint64(i) * uint64(cfg.SmallSize)
				box := region.Box{Off: []uint64{off}, Size: []uint64{uint64(cfg.SmallSize)}}
				t, err := o.NewTransfer(ctx, buf[off:off+uint64(cfg.SmallSize)], a, region.Box{Off: []uint64{0}, Size: box.Size}, box)
				if err != nil {
					return nil, err
				}
				ts[i] = t
			}
			if err := c.StartAll(ctx, ts); err != nil {
				return nil, err
			}
			if err := c.WaitAll(ctx, ts); err != nil {
				return nil, err
			}
			d := time.Since(t0)
			for _, t := range ts {
				_ = t.Close(ctx)
			}
			if i == 0 {
				continue
			}
			// Issue 28's target (an earlier issue's was 200k).
			r := rate(bench, smallName(cfg, a), float64(cfg.Small)/d.Seconds(), "regions/s", "target", 300000)
			r.Target = ">= 300000 regions/s"
			out = append(out, r)
		}
	}
	return out, nil
}

func firstDiff(a, b []byte) int {
	const chunk = 1 << 16
	for off := 0; off < len(a); off += chunk {
		end := min(off+chunk, len(a))
		if string(a[off:end]) != string(b[off:end]) {
			for i := off; i < end; i++ {
				if a[i] != b[i] {
					return i
				}
			}
		}
	}
	return -1
}

func smallName(cfg IOConfig, a client.Access) string {
	return fmt.Sprintf("%s %d regions of %s, start_all/wait_all", a, cfg.Small, sizeName(cfg.SmallSize))
}

func smallNames(cfg IOConfig) []string {
	return []string{smallName(cfg, client.Write), smallName(cfg, client.Read)}
}
