package dataserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/bufpool"
	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/regionstore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// Config configures a Service.
type Config struct {
	// Store holds the data, as the server's only slot. If nil, the
	// Service serves once SetSlots gives it its stores. The Service does
	// not close it.
	Store *regionstore.Store
	// Rank is the server's rank, for errors.
	Rank int
	// Workers do the I/O. Default 4.
	Workers int
	// QueueDepth bounds the transfers waiting for a worker. Default 1024.
	QueueDepth int
	// MaxBytes bounds the bytes of uncollected reads, and of queued writes
	// whose payload is not on the RPC server's payload budget. A
	// request is admitted whole: one larger than MaxBytes waits for all
	// of it and goes alone. Default 1 GiB.
	MaxBytes int64
	// MaxTransfer bounds the bytes of one transfer: a read's are
	// allocated whole, and must fit in its answer. Default
	// wire.DefaultMaxPayload (1 GiB).
	MaxTransfer int64
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Objects, if set, is asked whether an object seen here for the first
	// time still exists: operations on deleted objects are refused
	// (gone.go). Without it every object is taken to exist, until a
	// tombstone says otherwise. One that is also a Lives tells the
	// objects' dims with that question, and confirms dims that may cut
	// stored data (dimscheck.go).
	Objects Objects
	// RemoveGuard, if set, is asked before a scrub removes orphaned
	// files: an error refuses it, and the scrub fails with that error
	// before it removes anything (the server refuses while the cluster
	// records a metadata store that no metadata server serves: the data
	// of its objects would look orphaned).
	RemoveGuard func() error

	// beforeIO, if set, runs in a worker before each transfer's I/O: a
	// testing knob.
	beforeIO func(wire.DataItem)
	// buffered makes every read go through the workers into a buffer, as
	// a read that cannot be viewed does: a testing knob.
	buffered bool
	// queryChunk, if set, replaces the bytes a query reads at a time: a
	// testing knob.
	queryChunk int64
	// laneHello, if set, replaces laneHelloTimeout: a testing knob.
	laneHello time.Duration
	// lease, if set, replaces wire.DimsLease: a testing knob.
	lease time.Duration
	// beforeTurn, if set, runs in a start taken by the workers' path
	// once its dims are confirmed, before it waits for the client's
	// earlier starts: a testing knob.
	beforeTurn func()
	// beforeEnqueue, if set, runs before each transfer of a start is
	// registered (after the ones before it in the start were), on either
	// path: a testing knob.
	beforeEnqueue func(wire.DataItem)
}

func (c *Config) setDefaults() {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.QueueDepth <= 0 {
		c.QueueDepth = 1024
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 1 << 30
	}
	if c.MaxTransfer <= 0 {
		c.MaxTransfer = wire.DefaultMaxPayload
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.lease <= 0 {
		c.lease = wire.DimsLease
	}
}

// Service serves the data methods of one server.
type Service struct {
	cfg    Config
	log    *slog.Logger
	budget *budget
	// laneBytes counts the bytes of regions moved through shm lanes.
	laneBytes struct{ in, out atomic.Uint64 }
	queue     chan *transfer

	ctx      context.Context // ends when the workers have stopped
	cancel   context.CancelFunc
	quit     context.Context // ends when Close begins
	stop     context.CancelFunc
	wg       sync.WaitGroup // the workers
	bg       sync.WaitGroup // background scrubs (StartScrub)
	deferred sync.WaitGroup // reads waiting for writes before queueing
	// sendMu is held for reading while sending to queue, and for writing
	// to close it; closing refuses new sends.
	sendMu  sync.RWMutex
	closing atomic.Bool

	// slots are set once, by SetSlots, before slotsReady is closed;
	// requests wait for that and read them without a lock.
	slots      Slots
	slotsOnce  sync.Once
	slotsReady chan struct{}

	// epoch is when the service was made: leases are measured from it on
	// the monotonic clock (lease.go).
	epoch time.Time

	mu struct {
		sync.Mutex
		next      uint64
		transfers idTable                           // by id; see lookup
		writes    map[uint64]map[*transfer]struct{} // pending writes per object (leaders)
		queued    map[uint64]int                    // of those, how many the workers have
		layouts   map[uint64]layoutSeen             // newest dims seen per object
		lives     map[uint64]life                   // what is known of objects' lives (gone.go)
		checks    map[uint64]*lifeCheck             // questions about lives under way
		// confirmed: when the question that last confirmed each
		// object's dims with its metadata server was sent (lease.go).
		confirmed map[uint64]time.Duration
		// ended: ids of transfers forgotten when their client's last
		// connection closed (SessionEnded), so that a wait for one on a
		// new connection is told the truth (unavailable), not "never
		// started"; the newest endedMax of them, oldest first in endedIDs.
		ended    map[uint64]string // id: its client
		endedIDs []uint64
		closed   bool
	}

	lanes struct {
		mu       sync.Mutex
		next     uint64
		byID     map[uint64]*serverLane
		byClient map[string]*serverLane
		ln       net.Listener
		path     string
		conns    map[net.Conn]struct{} // on the lane socket, being answered
		refusals *netio.RateLog        // connections refused at maxLaneConns
		closed   bool
		wg       sync.WaitGroup // the lane socket's goroutines
	}
}

// lookup returns client's transfer id, nil if there is none. Ids are
// unique on the server, so the map is keyed by id alone (hashing the
// client's name too cost a tenth of a small region's server time); a
// client never sees another's transfers. s.mu is held.
func (s *Service) lookup(client string, id uint64) *transfer {
	if t := s.mu.transfers.get(id); t != nil && t.client == client {
		return t
	}
	return nil
}

type layoutSeen struct {
	version uint64
	dims    []uint64
}

// transfer is one registered region transfer.
type transfer struct {
	id     uint64
	client string
	item   wire.DataItem
	box    region.Box
	layout regionstore.Layout
	data   []byte   // write: the bytes to store; read: the bytes read (from bufpool)
	msg    *payload // write: the request payload data lies in
	held   int64    // bytes of the budget this transfer holds
	deps   []*transfer

	// store holds the item's data slot (DataItem.Slot).
	store *regionstore.Store
	// floor is the dims version the object's files were used with: an
	// older one is stale (floorVersions).
	floor uint64

	// A run of writes, or of reads, of one request that continue each
	// other along the first dim is done as one I/O: the first (the
	// leader) does the I/O of ioBox (from ioData, for writes), the
	// others (its followers) are registered but never queued, and end
	// with it.
	followers []*transfer
	follower  bool
	leader    *transfer // a follower's
	ioBox     region.Box
	ioData    []byte
	ioBytes   int64
	payOff    uint64 // write: where data starts in the request's payload, or its lane
	inLane    bool   // write: data is in the client's lane

	// src, for a write stored as its bytes arrive (startHere), reads
	// them, through scratch.
	src     io.Reader
	scratch []byte
	// queued: a write (leader) handed to the workers, not yet done;
	// guarded by Service.mu.
	queued bool

	// view: a read. It holds no buffer and no budget: it is done once the
	// writes it waits for are, and its wait answers with a view of the
	// object's file (regionstore.View), which the socket write copies from
	// the page cache; a view that fails, or would be many tiny slices, is
	// read into a buffer then.
	view bool

	done chan struct{} // closed when the I/O has finished
	err  error         // set before done is closed

	// lazy is lazyNone, or lazyWaiting for a read registered without
	// budget, until whoever moves it to lazyClaimed first (a wait for it,
	// or its budget arriving) does it.
	lazy atomic.Int32
}

const (
	lazyNone = iota
	lazyWaiting
	lazyClaimed
)

// payload is a request's bulk bytes, shared by its writes: it goes back to
// the pool once the last of them is stored or dropped.
type payload struct {
	buf     []byte
	release func()      // gives buf back: rpc.Request.Release; nil: bufpool.Put
	lane    *serverLane // the bytes are in this lane, not buf
	refs    atomic.Int32
}

func (p *payload) unref() {
	if p.refs.Add(-1) == 0 {
		if p.lane != nil {
			p.lane.unref()
			return
		}
		if p.release != nil {
			p.release()
			return
		}
		bufpool.Put(p.buf)
	}
}

// New starts a Service's workers. Close stops them.
func New(cfg Config) *Service {
	cfg.setDefaults()
	s := &Service{cfg: cfg, log: cfg.Logger,
		budget: newBudget(cfg.MaxBytes), queue: make(chan *transfer, cfg.QueueDepth),
		slotsReady: make(chan struct{}), epoch: time.Now()}
	if cfg.Store != nil {
		s.SetSlots(Slots{Stores: map[int]*regionstore.Store{0: cfg.Store}})
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.quit, s.stop = context.WithCancel(context.Background())
	s.mu.transfers = newIDTable()
	s.mu.writes = map[uint64]map[*transfer]struct{}{}
	s.mu.queued = map[uint64]int{}
	s.mu.layouts = map[uint64]layoutSeen{}
	s.mu.confirmed = map[uint64]time.Duration{}
	s.mu.lives = map[uint64]life{}
	s.mu.checks = map[uint64]*lifeCheck{}
	s.lanes.byID = map[uint64]*serverLane{}
	s.lanes.byClient = map[string]*serverLane{}
	s.lanes.conns = map[net.Conn]struct{}{}
	s.lanes.refusals = netio.NewRateLog(s.log, 10, 10*time.Second)
	for range cfg.Workers {
		s.wg.Add(1)
		go s.worker()
	}
	return s
}

// Register adds the data methods to srv.
func (s *Service) Register(srv *rpc.Server) {
	srv.Handle(wire.MethodDataStart, s.start, rpc.TryHere(s.startHere), rpc.Describe(wire.DescribeDataStart))
	srv.Handle(wire.MethodDataWait, s.wait)
	srv.Handle(wire.MethodDataStatus, s.status, rpc.Inline())
	srv.Handle(wire.MethodDataFlush, s.flush)
	srv.Handle(wire.MethodDataDelete, s.delete)
	srv.Handle(wire.MethodDataDeleteObjs, s.deleteObjs)
	srv.Handle(wire.MethodDataQuery, s.query)
	srv.Handle(wire.MethodDataLane, s.makeLane)
	srv.Handle(wire.MethodDataGone, s.gone)
	srv.Handle(wire.MethodDataScrub, s.scrub)
	srv.Handle(wire.MethodDataCut, s.cut)
}

// Close stops the workers once the queued transfers are done, and fails
// transfers registered after. Idempotent.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	s.stop() // requests waiting for budget, and reads waiting for it, give up
	s.bg.Wait()
	// Reads waiting for writes or budget are handed over (or failed)
	// first; then no sender is left, and the workers drain the queue and
	// stop.
	s.deferred.Wait()
	s.closing.Store(true)
	s.sendMu.Lock()
	close(s.queue)
	s.sendMu.Unlock()
	s.wg.Wait()
	s.cancel()
	s.closeLanes()
	return nil
}

// endedMax bounds the ids of transfers a server remembers it dropped when
// their client's connections closed: a client that reconnects waits at
// once, so the newest suffice.
const endedMax = 1 << 16

// endedLocked remembers that transfer id was dropped with its client's
// session. s.mu is held.
func (s *Service) endedLocked(id uint64, client string) {
	if s.mu.ended == nil {
		s.mu.ended = make(map[uint64]string)
	}
	if len(s.mu.endedIDs) == endedMax {
		delete(s.mu.ended, s.mu.endedIDs[0])
		s.mu.endedIDs = s.mu.endedIDs[1:]
	}
	s.mu.ended[id] = client
	s.mu.endedIDs = append(s.mu.endedIDs, id)
}

// SessionEnded forgets the transfers of a client that has gone: their
// results can no longer be collected.
func (s *Service) SessionEnded(client string) {
	s.mu.Lock()
	var gone []*transfer
	s.mu.transfers.each(func(id uint64, t *transfer) {
		if t.client == client {
			s.mu.transfers.del(id)
			gone = append(gone, t)
			s.endedLocked(id, client)
		}
	})
	s.mu.Unlock()
	s.drop(client, gone)
	s.dropLanes(client)
}

// releaseWhenDone gives a forgotten transfer's budget back once its I/O
// has finished.
func (s *Service) releaseWhenDone(t *transfer) {
	<-t.done
	s.release(t)
}

func (s *Service) release(t *transfer) {
	if t.held > 0 {
		s.budget.Release(t.held)
		t.held = 0
	}
	switch {
	case t.msg != nil:
		t.msg.unref()
		t.msg = nil
	case !t.item.Write && t.data != nil:
		bufpool.Put(t.data)
	}
	t.data = nil
}

func (s *Service) worker() {
	defer s.wg.Done()
	for t := range s.queue {
		if s.cfg.beforeIO != nil {
			s.cfg.beforeIO(t.item)
		}
		s.complete(t, s.do(t))
	}
}

func (s *Service) do(t *transfer) (err error) {
	// A bug in the store must fail this transfer, not the server.
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("region store panicked", "object", t.item.Obj, "region", t.box.String(), "panic", p)
			err = fmt.Errorf("object %d region %v: data server bug (panic: %v): %w", t.item.Obj, t.box, p, pdc.ErrInternal)
		}
	}()
	if t.item.Write {
		box, data := t.box, t.data
		if len(t.followers) > 0 {
			box, data = t.ioBox, t.ioData
		}
		if t.src != nil {
			if err := t.store.WriteFrom(t.item.Obj, t.layout, box, t.src, t.scratch); err != nil {
				return fmt.Errorf("write object %d region %v: %w", t.item.Obj, box, err)
			}
			return nil
		}
		if err := t.store.Write(t.item.Obj, t.layout, box, data); err != nil {
			return fmt.Errorf("write object %d region %v: %w", t.item.Obj, box, err)
		}
		return nil
	}
	if len(t.followers) == 0 {
		t.data = bufpool.Get(int(t.bytes()))
		if err := t.store.Read(t.item.Obj, t.layout, t.box, t.data); err != nil {
			return fmt.Errorf("read object %d region %v: %w", t.item.Obj, t.box, err)
		}
		return nil
	}
	// The union's row-major bytes are the members' in order: each gets
	// its slice of one buffer, which goes back when the last lets go.
	buf := bufpool.Get(int(t.ioBytes))
	msg := &payload{buf: buf}
	var off int64
	for _, u := range t.group() {
		n := u.bytes()
		u.data, u.msg = buf[off:off+n:off+n], msg
		msg.refs.Add(1)
		off += n
	}
	if err := t.store.Read(t.item.Obj, t.layout, t.ioBox, buf); err != nil {
		return fmt.Errorf("read object %d region %v: %w", t.item.Obj, t.ioBox, err)
	}
	return nil
}

// forgetWrite drops a write (a leader: its ioBox covers its group) from
// the pending writes that reads must wait for.
func (s *Service) forgetWrite(t *transfer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.mu.writes[t.item.Obj]
	delete(ws, t)
	if len(ws) == 0 {
		delete(s.mu.writes, t.item.Obj)
	}
	if t.queued {
		t.queued = false
		if s.mu.queued[t.item.Obj]--; s.mu.queued[t.item.Obj] == 0 {
			delete(s.mu.queued, t.item.Obj)
		}
	}
}

// check validates an item and makes its transfer in t, which its caller
// takes from one slice for all of a request's items: one allocation
// instead of one per region (the transfers of a request live about as
// long as each other). The slots must be set (awaitSlots).
func (s *Service) check(client string, it wire.DataItem, t *transfer) (*transfer, error) {
	box := region.Box{Off: it.Off, Size: it.Size}
	if err := box.Check(); err != nil {
		return nil, fmt.Errorf("object %d: region: %w", it.Obj, err)
	}
	if len(it.Dims) != box.Ndim() {
		return nil, fmt.Errorf("object %d: region %v has %d dims, the object %d: %w", it.Obj, box, box.Ndim(), len(it.Dims), pdc.ErrInvalid)
	}
	if err := box.Within(it.Dims); err != nil {
		return nil, fmt.Errorf("object %d: %w", it.Obj, err)
	}
	if it.Elem == 0 || it.Elem > 1<<16 {
		return nil, fmt.Errorf("object %d: element size %d: %w", it.Obj, it.Elem, pdc.ErrInvalid)
	}
	if hi, lo := bits.Mul64(box.Volume(), uint64(it.Elem)); hi != 0 || lo > uint64(s.cfg.MaxTransfer) {
		return nil, fmt.Errorf("object %d: region %v of %d-byte elements is more than %d bytes, the most one transfer may move: %w",
			it.Obj, box, it.Elem, s.cfg.MaxTransfer, pdc.ErrTooLarge)
	}
	// Compared as sent: a wider value must not pass as its low byte.
	var mode regionstore.Mode
	switch it.Storage {
	case 0, uint32(regionstore.ByOffset):
		mode = regionstore.ByOffset
	case uint32(regionstore.ByRegion):
		mode = regionstore.ByRegion
	default:
		return nil, fmt.Errorf("object %d: unknown storage mode %d: %w", it.Obj, it.Storage, pdc.ErrInvalid)
	}
	store, err := s.slotStore(it.Slot)
	if err != nil {
		return nil, fmt.Errorf("object %d region %v: %w", it.Obj, box, err)
	}
	t.client, t.item, t.box, t.done, t.store = client, it, box, make(chan struct{}), store
	t.layout = regionstore.Layout{Dims: it.Dims, Elem: int(it.Elem), Mode: mode, Version: it.DimsVersion}
	t.view = !it.Write && !s.cfg.buffered
	return t, nil
}

// observeLayout refuses a layout older than one already seen for the
// object, or than floor, the version its files say it was used with, and
// remembers a newer one. Called with mu held.
func (s *Service) observeLayout(it wire.DataItem, floor uint64) error {
	if it.DimsVersion < floor {
		return fmt.Errorf("object %d: dims version %d is older than version %d its stored data was written with: %w",
			it.Obj, it.DimsVersion, floor, pdc.ErrStale)
	}
	seen, ok := s.mu.layouts[it.Obj]
	if ok && it.DimsVersion < seen.version {
		return fmt.Errorf("object %d: dims version %d is older than version %d (dims %v) already used here: %w",
			it.Obj, it.DimsVersion, seen.version, seen.dims, pdc.ErrStale)
	}
	if !ok || it.DimsVersion > seen.version {
		s.mu.layouts[it.Obj] = layoutSeen{version: it.DimsVersion, dims: it.Dims}
	}
	return nil
}

var errClosing = fmt.Errorf("data server is shutting down: %w", pdc.ErrUnavailable)
