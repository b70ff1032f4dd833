package transfer

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/pdcgo/pdc/internal/batch"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Cluster is what the engine asks of the cluster it moves regions to and
// from: the data servers, one-shot calls (to metadata servers: where
// regions go; to data servers: a status, a flush, a lane), and the
// connections its pipelined requests go on. Servers are named by rank.
type Cluster interface {
	// DataServers returns the ranks of the data servers, in order: data
	// slot i is held by DataServers()[placement.SlotHost(i, n)].
	DataServers() []int
	// Caller makes one call to the server of rank (the engine's calls
	// go through wire.Stub).
	wire.Caller
	// Conn returns a connection to the server of rank from its pool.
	Conn(ctx context.Context, rank int) (*rpc.Conn, error)
	// StartConn returns the connection that starts to rank go on: always
	// the same one, so that the server registers them in the order sent.
	StartConn(ctx context.Context, rank int) (*rpc.Conn, error)
	// Label names the server of rank in errors: "rank 2 (127.0.0.1:4000)".
	Label(rank int) string
	// Addr returns the address of the server of rank and the host it
	// runs on.
	Addr(rank int) (addr, host string, err error)
}

// Config configures an engine.
type Config struct {
	// Mode is how region payloads travel to data servers (WithRegionTransport).
	Mode dtl.Mode
	// LaneSize is the bytes of each shared-memory lane; 0: DefaultLaneSize.
	LaneSize int
}

// Engine moves regions between a client's buffers and the data servers.
// One per client; safe for concurrent use.
type Engine struct {
	cl      Cluster
	starts  startQueue // starts sent and not yet answered
	placing placer     // placements of region-dynamic and region-local Starts
	lanes   lanes      // shared memory to data servers on this host
}

// calls makes the typed calls of the wire table on the engine's cluster.
func (e *Engine) calls() wire.Stub { return wire.Stub{Caller: e.cl} }

// NewEngine returns an engine moving regions on cl.
func NewEngine(cl Cluster, cfg Config) *Engine {
	if cfg.LaneSize <= 0 {
		cfg.LaneSize = DefaultLaneSize
	}
	return &Engine{cl: cl, lanes: lanes{mode: cfg.Mode, size: cfg.LaneSize}}
}

// StopPlacer stops the goroutine that places region-dynamic and
// region-local transfers and waits for it; those it has not started end
// with pdc.ErrClosed. Idempotent. The client stops it before it closes
// its connections.
func (e *Engine) StopPlacer() { e.closePlacer() }

// Close collects the starts never waited (whose connections the client
// has closed, so that they fail at once) until ctx ends, and drops the
// lanes: each is unmapped once no request uses it. Call it after
// StopPlacer and after closing the connections.
func (e *Engine) Close(ctx context.Context) {
	_ = e.starts.collectAll(ctx)
	e.lanes.close()
}

// Settle waits until every transfer queued before the call is started on
// its data servers (or has failed). Only ctx's end is an error.
func (e *Engine) Settle(ctx context.Context) error { return e.settle(ctx) }

// CollectStarts collects the answers of every start sent and not yet
// answered, so that the data servers have registered them. A start that
// failed has ended its transfers; only ctx's end is an error.
func (e *Engine) CollectStarts(ctx context.Context) error { return e.starts.collectAll(ctx) }

// LaneBytes reports the region bytes written and read through
// shared-memory lanes.
func (e *Engine) LaneBytes() (written, read int64) {
	return e.lanes.written.Load(), e.lanes.read.Load()
}

// Partition is an object's partition strategy (pdc_region_partition_t,
// as on the wire).
type Partition uint32

// Partition strategies.
const (
	ObjectStatic  Partition = 0
	RegionStatic  Partition = 1
	RegionDynamic Partition = 2
	RegionLocal   Partition = 3
)

// Meta is what the engine knows of an object: its metadata as last
// looked up.
type Meta struct {
	ID          uint64
	Name        string
	Dims        []uint64
	DimsVersion uint64
	Elem        int // bytes per element, at least 1
	Storage     uint32
	Partition   Partition
	POSIX       bool // POSIX consistency: a Start returns once done
	Server      int  // rank of its metadata server
	Spread      placement.Spread
}

// Source looks an object up again; it gives the object its new Meta
// (Object.SetMeta) before it returns.
type Source interface {
	Refresh(ctx context.Context) error
}

// Object is the engine's part of an open object: its metadata, the
// transfers started and not yet waited, and the data servers written
// since its last flush. The client's object handle holds one by value;
// Init it before use.
type Object struct {
	e    *Engine
	src  Source
	meta atomic.Pointer[Meta]

	mu struct {
		sync.Mutex
		// pending lists the transfers started and not yet waited,
		// linked through Transfer.pend: a list rather than a set, since
		// 65536 regions started at once spent 7% of the client's CPU
		// hashing them in and out of a map.
		pending  *Transfer
		npending int
		wrote    map[int]bool // data servers written since their last flush that worked
	}
}

// Init makes o an object of engine e, looked up again by src.
func (o *Object) Init(e *Engine, src Source, m *Meta) {
	o.e, o.src = e, src
	o.meta.Store(m)
}

// SetMeta replaces the object's metadata; m must not be modified after.
func (o *Object) SetMeta(m *Meta) { o.meta.Store(m) }

// Meta is the object's metadata as last known; it must not be modified.
func (o *Object) Meta() *Meta { return o.meta.Load() }

func (o *Object) elem() int { return o.Meta().Elem }

// refresh looks the object up again.
func (o *Object) refresh(ctx context.Context) (*Meta, error) {
	if err := o.src.Refresh(ctx); err != nil {
		return nil, err
	}
	return o.Meta(), nil
}

// MaxBatch is the most regions the engine puts in one request to a
// metadata server (the client's MaxBatch).
const MaxBatch = batch.MaxItems
