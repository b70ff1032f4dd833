package dataserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

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
	// tombstone says otherwise.
	Objects Objects

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
}

// Service serves the data methods of one server.
type Service struct {
	cfg    Config
	log    *slog.Logger
	budget *semaphore.Weighted
	queue  chan *transfer

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

	mu struct {
		sync.Mutex
		next      uint64
		transfers map[uint64]*transfer              // by id; see lookup
		writes    map[uint64]map[*transfer]struct{} // pending writes per object (leaders)
		queued    map[uint64]int                    // of those, how many the workers have
		layouts   map[uint64]layoutSeen             // newest dims seen per object
		lives     map[uint64]life                   // what is known of objects' lives (gone.go)
		checks    map[uint64]*lifeCheck             // questions about lives under way
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
	if t := s.mu.transfers[id]; t != nil && t.client == client {
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
		budget: semaphore.NewWeighted(cfg.MaxBytes), queue: make(chan *transfer, cfg.QueueDepth),
		slotsReady: make(chan struct{})}
	if cfg.Store != nil {
		s.SetSlots(Slots{Stores: map[int]*regionstore.Store{0: cfg.Store}})
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.quit, s.stop = context.WithCancel(context.Background())
	s.mu.transfers = map[uint64]*transfer{}
	s.mu.writes = map[uint64]map[*transfer]struct{}{}
	s.mu.queued = map[uint64]int{}
	s.mu.layouts = map[uint64]layoutSeen{}
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
	srv.Handle(wire.MethodDataStart, s.start, rpc.TryHere(s.startHere))
	srv.Handle(wire.MethodDataWait, s.wait)
	srv.Handle(wire.MethodDataStatus, s.status, rpc.Inline())
	srv.Handle(wire.MethodDataFlush, s.flush)
	srv.Handle(wire.MethodDataDelete, s.delete)
	srv.Handle(wire.MethodDataDeleteObjs, s.deleteObjs)
	srv.Handle(wire.MethodDataQuery, s.query)
	srv.Handle(wire.MethodDataLane, s.makeLane)
	srv.Handle(wire.MethodDataGone, s.gone)
	srv.Handle(wire.MethodDataScrub, s.scrub)
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
	for id, t := range s.mu.transfers {
		if t.client == client {
			delete(s.mu.transfers, id)
			gone = append(gone, t)
			s.endedLocked(id, client)
		}
	}
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
// object and remembers a newer one. Called with mu held.
func (s *Service) observeLayout(it wire.DataItem) error {
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

// firstTouchHere bounds how long startHere holds a connection's reader
// to ask whether an object seen for the first time still exists (one
// round trip to its metadata server, usually well under a millisecond).
const firstTouchHere = 200 * time.Millisecond

// startHere stores a request of writes on the goroutine that read its
// header, each as its bytes arrive, and answers once they are stored,
// when nothing stands in their way: no write of their objects is queued
// for the workers (which they must not overtake; writes being stored as
// they arrive on other connections are concurrent with them, as any two
// clients' writes are, and the object's lock orders them). Anything
// else, reads included, goes to start. Handing the bytes to a worker would gather them in a buffer
// first, which falls out of the CPU cache before the worker stores it,
// and add two thread hand-offs per request: measured with 1 GiB in 1 MiB
// regions, a fifth of the data server's time; in 16 MiB regions more.
// Here each bufferful is stored from one small buffer while the next
// waits in the socket. The budget is not taken: no more than that buffer
// is held.
func (s *Service) startHere(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if s.cfg.beforeIO != nil {
		return nil, rpc.ErrElsewhere // the knob holds I/O in the workers
	}
	if req.Behind() || !s.slotsSet() {
		// An earlier start of this connection is not registered yet:
		// this one must not overtake it. Or the server is still
		// starting: start waits for it.
		return nil, rpc.ErrElsewhere
	}
	var m wire.DataStart
	if err := m.Unmarshal(req.Header); err != nil || len(m.Items) == 0 {
		return nil, rpc.ErrElsewhere // start reports it
	}
	inLane := m.Lane != 0 && req.BodyLen == 0
	if !inLane && req.BodyLen == 0 {
		return nil, rpc.ErrElsewhere
	}
	for _, it := range m.Items {
		if !it.Write || inLane != (it.Lane != 0) {
			return nil, rpc.ErrElsewhere
		}
	}
	if known, err := s.admitNow(m.Items); err != nil {
		return nil, rpc.ErrElsewhere // start refuses a deleted object
	} else if !known {
		// An object seen for the first time: its metadata server is
		// asked here, on the reader, for a short while. Sent to the
		// workers, this start would have every later start of the
		// object follow it there while it is queued, which under a
		// full pipeline is all of them: 4 KiB writes lost a fifth of
		// their rate so. A question that takes longer goes on in start.
		actx, cancel := context.WithTimeout(ctx, firstTouchHere)
		err := s.admit(actx, m.Items)
		cancel()
		if err != nil {
			return nil, rpc.ErrElsewhere
		}
	}
	s.mu.Lock()
	busy := s.mu.closed
	for _, it := range m.Items {
		if s.mu.queued[it.Obj] > 0 {
			busy = true
			break
		}
	}
	s.mu.Unlock()
	if busy {
		return nil, rpc.ErrElsewhere
	}
	if inLane {
		return s.storeFromLane(ctx, req, &m)
	}
	ts, slab := make([]*transfer, len(m.Items)), make([]transfer, len(m.Items))
	var pos uint64
	for i, it := range m.Items {
		t, err := s.check(req.Client, it, &slab[i])
		if err != nil {
			return nil, fmt.Errorf("transfer %d of %d: %w", i+1, len(m.Items), err)
		}
		t.payOff = pos
		pos += uint64(t.bytes())
		ts[i] = t
	}
	if pos != uint64(req.BodyLen) {
		return nil, fmt.Errorf("the writes cover %d bytes, the request carries %d: %w", pos, req.BodyLen, pdc.ErrInvalid)
	}
	merge(ts, nil, nil)
	scratch := bufpool.Get(hereChunk)
	defer bufpool.Put(scratch)
	body := &bodyReader{r: req.Body}
	for i, t := range ts {
		if t.follower {
			continue // stored with its leader
		}
		src := io.LimitReader(body, t.ioBytes)
		t.src, t.scratch = src, scratch
		err := s.enqueue(ctx, t, true)
		t.src, t.scratch = nil, nil
		if err == nil && body.err == nil {
			// A store that failed part way left the rest of its bytes.
			_, _ = io.Copy(io.Discard, src)
		}
		if err == nil && body.err != nil {
			err = body.err // the client is gone, or broke the stream
		}
		if err != nil {
			s.forget(req.Client, ts[:i+1])
			return nil, fmt.Errorf("transfer %d of %d (object %d region %v): %w", i+1, len(ts), t.item.Obj, t.box, err)
		}
	}
	return s.started(ctx, req.Client, ts, m.Wait)
}

// hereChunk is the buffer startHere stores a request's bytes through: a
// few bufferfuls fit in the CPU's L2 cache with the socket's.
const hereChunk = 512 << 10

// bodyReader remembers the first error of a request's body.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

func (s *Service) start(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	msg := &payload{buf: req.Payload, release: req.Release}
	msg.refs.Store(1) // this handler's
	defer msg.unref()
	var m wire.DataStart
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	if err := s.awaitSlots(ctx); err != nil {
		return nil, err
	}
	if err := s.admit(ctx, m.Items); err != nil {
		return nil, err
	}
	// Writes whose bytes are in the client's lane refer to it through
	// laneMsg as the others refer to the payload through msg.
	var ln *serverLane
	var laneMsg *payload
	if m.Lane != 0 {
		l, err := s.laneOf(req.Client, m.Lane)
		if err != nil {
			return nil, err
		}
		ln, laneMsg = l, &payload{lane: l}
		laneMsg.refs.Store(1)
		defer laneMsg.unref()
	}

	ts, slab := make([]*transfer, len(m.Items)), make([]transfer, len(m.Items))
	var writeBytes uint64
	for i, it := range m.Items {
		t, err := s.check(req.Client, it, &slab[i])
		if err != nil {
			return nil, fmt.Errorf("transfer %d of %d: %w", i+1, len(m.Items), err)
		}
		switch {
		case it.Write && it.Lane != 0:
			if ln == nil {
				return nil, fmt.Errorf("transfer %d of %d: its bytes are in a lane, and the request names none: %w", i+1, len(m.Items), pdc.ErrInvalid)
			}
			if t.data, err = ln.span(it.Lane, t.bytes()); err != nil {
				return nil, fmt.Errorf("transfer %d of %d (object %d region %v): %w", i+1, len(m.Items), it.Obj, t.box, err)
			}
			t.inLane, t.payOff = true, it.Lane-1
		case it.Write:
			writeBytes += uint64(t.bytes())
		}
		ts[i] = t
	}
	if writeBytes != uint64(len(req.Payload)) {
		return nil, fmt.Errorf("the writes cover %d bytes, the request carries %d: %w", writeBytes, len(req.Payload), pdc.ErrInvalid)
	}
	// Writes first, so that reads of the same request see them.
	order := make([]*transfer, 0, len(ts))
	for _, t := range ts {
		if t.item.Write {
			order = append(order, t)
		}
	}
	for _, t := range ts {
		if !t.item.Write {
			order = append(order, t)
		}
	}
	var pos uint64
	var fromLane []*transfer
	for _, t := range ts {
		switch {
		case t.inLane:
			t.msg = laneMsg
			laneMsg.refs.Add(1)
			fromLane = append(fromLane, t)
		case t.item.Write:
			n := uint64(t.bytes())
			t.data = req.Payload[pos : pos+n : pos+n]
			t.payOff = pos
			t.msg = msg
			msg.refs.Add(1)
			pos += n
		}
	}
	var laneMem []byte
	if ln != nil {
		laneMem = ln.mem
	}
	merge(order, req.Payload, laneMem)
	// A client's starts are registered in the order they arrived, each
	// after the ones before it: a write must not overtake an earlier
	// one it overlaps, nor a read the writes it must see.
	if err := req.WaitTurn(ctx); err != nil {
		for _, t := range order {
			s.release(t)
		}
		return nil, err
	}
	// The payload's memory is on the RPC server's payload budget until
	// msg gives it back: its writes take none of ours. Were they to wait
	// for ours, held by reads their client has yet to collect, they would
	// hold that budget while the client's collecting waits sat unread
	// behind payloads waiting for it.
	if err := s.acquire(ctx, order, req.Release == nil); err != nil {
		for _, t := range order {
			s.release(t)
		}
		return nil, err
	}
	for i, t := range order {
		if err := s.enqueue(ctx, t, false); err != nil {
			// The ones already queued run, but the client never learns
			// their ids: nothing of theirs may stay held.
			for _, rest := range order[i+1:] {
				s.release(rest)
			}
			s.forget(req.Client, order[:i+1])
			// The client reuses its lane's space once answered.
			if werr := storedFromLane(ctx, fromLane); werr != nil {
				return nil, werr
			}
			return nil, fmt.Errorf("transfer %d of %d (object %d region %v): %w", i+1, len(order), t.item.Obj, t.box, err)
		}
	}
	req.EndTurn()
	// The client reuses its lane's space once answered: the writes from
	// it are stored first.
	if err := storedFromLane(ctx, fromLane); err != nil {
		s.forget(req.Client, order)
		return nil, err
	}
	return s.started(ctx, req.Client, ts, m.Wait)
}

// storedFromLane waits until the writes ts, whose bytes are in a lane,
// are no longer reading them: stored, failed, or never queued. If ctx ends
// first, the client gets no answer and does not reuse the space.
func storedFromLane(ctx context.Context, ts []*transfer) error {
	for _, t := range ts {
		if t.lead().id == 0 {
			continue
		}
		select {
		case <-t.lead().done:
		case <-ctx.Done():
			return fmt.Errorf("storing writes from the lane: %w", ctxErr(ctx, ctx.Err()))
		}
	}
	return nil
}

// storeFromLane is startHere for writes whose bytes are all in the
// client's lane: each is stored from there, and the answer tells the client
// that it may reuse the space.
func (s *Service) storeFromLane(ctx context.Context, req *rpc.Request, m *wire.DataStart) (*rpc.Response, error) {
	ln, err := s.laneOf(req.Client, m.Lane)
	if err != nil {
		return nil, err
	}
	defer ln.unref()
	ts, slab := make([]*transfer, len(m.Items)), make([]transfer, len(m.Items))
	for i, it := range m.Items {
		t, err := s.check(req.Client, it, &slab[i])
		if err != nil {
			return nil, fmt.Errorf("transfer %d of %d: %w", i+1, len(m.Items), err)
		}
		if t.data, err = ln.span(it.Lane, t.bytes()); err != nil {
			return nil, fmt.Errorf("transfer %d of %d (object %d region %v): %w", i+1, len(m.Items), it.Obj, t.box, err)
		}
		t.inLane, t.payOff = true, it.Lane-1
		ts[i] = t
	}
	merge(ts, nil, ln.mem)
	for i, t := range ts {
		err := s.enqueue(ctx, t, true)
		t.data, t.ioData = nil, nil // stored: the lane is the client's again
		for _, f := range t.followers {
			f.data = nil
		}
		if err != nil {
			s.forget(req.Client, ts[:i+1])
			return nil, fmt.Errorf("transfer %d of %d (object %d region %v): %w", i+1, len(ts), t.item.Obj, t.box, err)
		}
	}
	return s.started(ctx, req.Client, ts, m.Wait)
}

// started answers a DataStart whose transfers ts are registered: with
// their ids, or, if the client asked to wait, with how they ended.
func (s *Service) started(ctx context.Context, client string, ts []*transfer, wait bool) (*rpc.Response, error) {
	ids := make([]uint64, len(ts))
	for i, t := range ts {
		ids[i] = t.id
	}
	if !wait {
		return rpc.Respond(&wire.DataIDs{IDs: ids}), nil
	}
	resp, err := s.collect(ctx, client, ids, true, nil)
	if err != nil {
		// Unlike a DataWait, the client has no ids to wait again with.
		s.forget(client, ts)
	}
	return resp, err
}

// acquire takes the budget for a request's writes, all at once, waiting
// for room: their bytes are here already, and the budget bounds how many
// wait in memory for the disk. A request larger than the whole budget
// takes all of it and goes alone. Reads take theirs in enqueue. Writes
// whose payload is on the RPC server's budget already (not unbudgeted)
// take none.
func (s *Service) acquire(ctx context.Context, ts []*transfer, unbudgeted bool) error {
	var total int64
	for _, t := range ts {
		if t.item.Write && !t.inLane {
			total += t.bytes()
		}
	}
	if total == 0 || !unbudgeted {
		return nil
	}
	grant := min(total, s.cfg.MaxBytes)
	if s.quit.Err() != nil {
		return errClosing
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.quit, cancel)()
	if err := s.budget.Acquire(actx, grant); err != nil {
		if ctx.Err() == nil && s.quit.Err() != nil {
			return errClosing
		}
		return fmt.Errorf("waiting for room: %w", ctxErr(ctx, err))
	}
	for _, t := range ts {
		if t.item.Write && !t.inLane {
			t.held = min(t.bytes(), grant)
			grant -= t.held
		}
	}
	return nil
}

// forget drops registered transfers of client whose results nobody will
// collect; their budget and buffers go back once their I/O is done.
func (s *Service) forget(client string, ts []*transfer) {
	var gone []*transfer
	s.mu.Lock()
	for _, t := range ts {
		if t.id != 0 && s.mu.transfers[t.id] == t {
			delete(s.mu.transfers, t.id)
			gone = append(gone, t)
		}
	}
	s.mu.Unlock()
	s.drop(client, gone)
}

// drop gives back what forgotten transfers hold once their I/O is done; a
// read still waiting for budget is not done at all.
func (s *Service) drop(client string, gone []*transfer) {
	for _, t := range gone {
		if l := t.lead(); l.lazy.CompareAndSwap(lazyWaiting, lazyClaimed) {
			s.fail(l, fmt.Errorf("client %s will not collect it: %w", client, pdc.ErrCanceled))
			continue
		}
		go s.releaseWhenDone(t)
	}
}

// mergeMax bounds the bytes of writes stored as one.
const mergeMax = 64 << 20

// merge makes leaders of runs of writes, and of reads, in order, that
// continue each other: same object and layout, the same extent in every
// dim but the first, the next rows in the first, and for writes the next
// bytes of the payload. Their union is then a box whose row-major bytes
// are theirs in order, and thousands of small regions become one list I/O.
func merge(order []*transfer, payload, lane []byte) {
	var lead *transfer
	for _, t := range order {
		if lead != nil && continues(lead, t) {
			t.follower, t.leader = true, lead
			if len(lead.followers) == 0 {
				// The leader's own box until now; most transfers
				// lead alone and never pay for the copy.
				lead.ioBox = lead.box.Clone()
			}
			lead.followers = append(lead.followers, t)
			lead.ioBox.Size[0] += t.box.Size[0]
			lead.ioBytes += t.bytes()
			base := payload
			if t.inLane {
				base = lane
			}
			if t.item.Write && base != nil {
				end := t.payOff + uint64(t.bytes())
				lead.ioData = base[lead.payOff:end:end]
			}
			continue
		}
		lead = t
		lead.ioBox = t.box
		lead.ioData = t.data
		lead.ioBytes = t.bytes()
	}
}

// hold gives t's group n bytes of budget, spread over its members so that
// each gives back its share when collected.
func (t *transfer) hold(n int64) {
	for _, u := range t.group() {
		u.held = min(u.bytes(), n)
		n -= u.held
	}
}

func continues(lead, t *transfer) bool {
	a, b := lead.item, t.item
	if lead.view || t.view {
		return false // a view needs no merged I/O
	}
	if a.Write != b.Write || lead.inLane != t.inLane || a.Obj != b.Obj || lead.store != t.store || a.DimsVersion != b.DimsVersion || a.Elem != b.Elem || lead.layout.Mode != t.layout.Mode ||
		!slices.Equal(a.Dims, b.Dims) || lead.ioBox.Ndim() != t.box.Ndim() || lead.ioBytes+t.bytes() > mergeMax {
		return false
	}
	if a.Write && t.payOff != lead.payOff+uint64(lead.ioBytes) {
		return false
	}
	box := lead.ioBox
	for d := 1; d < box.Ndim(); d++ {
		if box.Off[d] != t.box.Off[d] || box.Size[d] != t.box.Size[d] {
			return false
		}
	}
	return t.box.Off[0] == box.Off[0]+box.Size[0]
}

// bytes is the size of t's data.
func (t *transfer) bytes() int64 { return int64(t.box.Volume()) * int64(t.item.Elem) }

// enqueue registers t and hands it to the workers, waiting for queue room
// under ctx, or, if here is set, does a write's I/O itself (startHere). A
// write holds its budget already. A read takes budget only if it is free:
// its buffer holds budget until the client waits for it, and
// the client may wait only after starting more reads, so it never blocks
// on it; without budget it is done when budget frees up, or by the wait
// that claims it first. A read that must wait for earlier writes is handed
// over once they are done, by a goroutine of its own, so that no worker
// ever waits for work still in the queue.
func (s *Service) enqueue(ctx context.Context, t *transfer, here bool) error {
	if t.follower {
		return nil // registered and queued with its leader
	}
	n := min(t.ioBytes, s.cfg.MaxBytes) // one larger than the budget goes alone
	if !t.item.Write && !t.view {
		if s.budget.TryAcquire(n) {
			t.hold(n)
		} else {
			t.lazy.Store(lazyWaiting)
		}
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		s.release(t)
		return errClosing
	}
	if err := s.deadLocked(t.item.Obj); err != nil {
		s.mu.Unlock()
		s.release(t)
		return err
	}
	if err := s.observeLayout(t.item); err != nil {
		s.mu.Unlock()
		s.release(t)
		return err
	}
	s.mu.next++
	t.id = s.mu.next
	obj := t.item.Obj
	if t.item.Write {
		ws := s.mu.writes[obj]
		if ws == nil {
			ws = map[*transfer]struct{}{}
			s.mu.writes[obj] = ws
		}
		if !here {
			// Two workers may store two queued writes in either order:
			// one must not overtake the client's earlier writes it
			// overlaps.
			t.deps = earlierOverlapping(ws, t)
			t.queued = true
			s.mu.queued[obj]++
		}
		ws[t] = struct{}{}
		for _, f := range t.followers {
			s.mu.next++
			f.id = s.mu.next
			s.mu.transfers[f.id] = f
		}
	} else {
		t.deps = earlierOverlapping(s.mu.writes[obj], t)
		for _, f := range t.followers {
			s.mu.next++
			f.id = s.mu.next
			s.mu.transfers[f.id] = f
		}
	}
	s.mu.transfers[t.id] = t
	if t.view {
		if len(t.deps) == 0 {
			s.mu.Unlock()
			s.complete(t, nil)
			return nil
		}
		// Counted before the lock goes, as below: Close waits for
		// deferred once it has marked the service closed under it.
		s.deferred.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.deferred.Done()
			for _, d := range t.deps {
				<-d.done
			}
			t.deps = nil
			s.complete(t, nil)
		}()
		return nil
	}
	if t.lazy.Load() == lazyWaiting {
		s.deferred.Add(1)
		s.mu.Unlock()
		go s.awaitBudget(t, n)
		return nil
	}
	if len(t.deps) > 0 {
		s.deferred.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.deferred.Done()
			for _, d := range t.deps {
				<-d.done
			}
			t.deps = nil
			_ = s.send(s.ctx, t)
		}()
		return nil
	}
	s.mu.Unlock()
	if here && t.item.Write {
		s.complete(t, s.do(t))
		return nil
	}
	return s.send(ctx, t)
}

// earlierOverlapping lists the writes of ws by t's client that overlap t:
// the ones t must wait for.
func earlierOverlapping(ws map[*transfer]struct{}, t *transfer) []*transfer {
	var deps []*transfer
	for w := range ws {
		if w.client == t.client {
			if _, ok := region.Intersect(w.ioBox, t.ioBox); ok {
				deps = append(deps, w)
			}
		}
	}
	return deps
}

// awaitBudget hands a lazy read to the workers once the writes it depends
// on are stored and budget for its bytes is free, unless a wait claimed it
// first.
func (s *Service) awaitBudget(t *transfer, n int64) {
	defer s.deferred.Done()
	for _, d := range t.deps {
		<-d.done
	}
	if err := s.budget.Acquire(s.quit, n); err != nil {
		if t.lazy.CompareAndSwap(lazyWaiting, lazyClaimed) {
			s.fail(t, errClosing)
		}
		return
	}
	if !t.lazy.CompareAndSwap(lazyWaiting, lazyClaimed) {
		s.budget.Release(n)
		return
	}
	t.hold(n)
	_ = s.send(s.ctx, t)
}

// send puts a registered transfer on the queue.
func (s *Service) send(ctx context.Context, t *transfer) error {
	s.sendMu.RLock()
	defer s.sendMu.RUnlock()
	if s.closing.Load() {
		s.fail(t, errClosing)
		return errClosing
	}
	select {
	case s.queue <- t:
		return nil
	case <-ctx.Done():
		err := ctxErr(ctx, ctx.Err())
		s.fail(t, err)
		return err
	}
}

// fail ends a registered transfer that never reached a worker; a client
// waiting for it gets err.
func (s *Service) fail(t *transfer, err error) {
	if t.item.Write {
		s.forgetWrite(t)
	}
	for _, u := range t.group() {
		u.err = err
		s.release(u)
		close(u.done)
	}
}

// complete ends t's I/O (and its followers') with err.
func (s *Service) complete(t *transfer, err error) {
	if t.item.Write {
		s.forgetWrite(t)
	}
	for _, u := range t.group() {
		u.err = err
		if u.item.Write {
			// The bytes are stored: give back the budget they held.
			s.release(u)
		}
		close(u.done)
	}
}

// lead is the transfer that does t's I/O: t, or its leader.
func (t *transfer) lead() *transfer {
	if t.leader != nil {
		return t.leader
	}
	return t
}

// group is t and its followers.
func (t *transfer) group() []*transfer {
	if len(t.followers) == 0 {
		return []*transfer{t}
	}
	return append([]*transfer{t}, t.followers...)
}
