package metaserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/outbox"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/postings"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// Config configures a metadata service.
type Config struct {
	// Dir holds the store. Required.
	Dir string
	// CheckpointDir receives checkpoints. Required.
	CheckpointDir string
	// Durability of acknowledged changes.
	Durability metastore.Durability
	// CacheBytes is the store's block cache. Default 64 MiB.
	CacheBytes int64
	// LogBytes is the store's log size (metastore.Options.LogBytes).
	LogBytes int64
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// NoIndex turns the DART tag index off: queries scan every server.
	NoIndex bool
	// NoSuffixTree indexes keys and values without their suffixes (DART's
	// suffix-tree mode off): infix queries then scan.
	NoSuffixTree bool
	// IndexFlushBytes is how many bytes of index entries a server keeps
	// in memory (and in its log) before writing them as a run on disk;
	// 0 takes the default (32 MiB). Tests make it small.
	IndexFlushBytes int
	// FS holds the store; nil means the operating system's.
	FS vfs.FS
}

// Service serves the metadata methods of one metadata server. It is made
// of one small service per concern, each holding its own state and lock
// (docs/design/0024-metaserver-services.md), over a core they share: the
// store, the server's place among the metadata servers, the tag index and
// the lock that orders an object's end against the writes that need it.
type Service struct {
	*core
	*containers
	*objects
	*tags
	*regions
	*stages
}

// core is what the services share.
type core struct {
	cfg Config
	log *slog.Logger
	st  *metastore.Store

	// index and count place this server among the metadata servers; set
	// once the cluster is complete, zero count until then.
	index, count atomic.Int64
	ready        atomic.Bool   // placed and holding all its metadata
	readyCh      chan struct{} // closed when ready
	readyOnce    sync.Once
	moved        atomic.Bool // done moving metadata to new owners at start

	// ix indexes object tags: tag writes and object deletes commit their
	// index changes with their own (commitChanges).
	ix indexer
	// fresh holds objects created by this process that have no tags yet.
	fresh freshSet
	// live remembers objects seen to exist, for the checks of tag writes
	// and reads.
	live liveSet
	// creates holds the creates of objects and containers under way, for
	// the reads that must not hand them out before their commit returned
	// and the questions about ids not created yet.
	creates inFlight
	// touches holds the commits of tags, deletes, memberships, region
	// placements and staged records' removals under way, for the reads
	// that must not answer what they changed before their fsync returned.
	touches touching

	// lifeMu orders the end of objects and containers against the writes
	// that need them to exist. Deletes and read-modify-write updates (set
	// dims, lifetime) hold it for writing; tag writes, region placements
	// and membership changes hold it for reading, so that none can land on
	// an object deleted between its check and its commit. Reads that check
	// an object exists and then read what hangs off it (tag gets and lists,
	// region queries) hold it for reading too: a delete between the two
	// would answer "no tags" or "no regions" (read as zeros) for an object
	// that had them; they take it with ReadLock, which goes past a delete
	// that waits for the tag writes' fsyncs (rwLock). Every wait for it
	// ends with its request's context, as a holder may keep it through an
	// fsync on a stalled disk. It spans the services because it orders
	// writes of several against one another.
	lifeMu rwLock
}

// Open opens (or creates) the store in cfg.Dir.
func Open(cfg Config) (*Service, error) {
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = 64 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	st, err := metastore.Open(metastore.Options{Dir: cfg.Dir, FS: cfg.FS, Durability: cfg.Durability, CacheBytes: cfg.CacheBytes, LogBytes: cfg.LogBytes, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	c := &core{cfg: cfg, log: cfg.Logger, st: st, readyCh: make(chan struct{})}
	c.touches.on = cfg.Durability == metastore.DurabilitySync
	regions := newRegions(c)
	s := &Service{
		core:       c,
		containers: &containers{core: c},
		objects:    newObjects(c, regions),
		tags:       &tags{core: c},
		regions:    regions,
		stages:     newStages(c),
	}
	s.ix.on, s.ix.suffix = !cfg.NoIndex, !cfg.NoSuffixTree
	s.ix.dict = map[string]struct{}{}
	s.ix.ob, err = outbox.Open(outbox.Config{Log: outboxLog{c}, Decode: recordOps, Logger: cfg.Logger})
	if err == nil {
		s.ix.post, err = postings.Open(st.DB(), st.CommitPebble, prefixIndexLog, prefixIndexRuns, postings.Options{FlushBytes: cfg.IndexFlushBytes, Logger: cfg.Logger})
	}
	if err == nil {
		err = s.openIndex()
	}
	if err != nil {
		s.ix.ob.Close()
		if s.ix.post != nil {
			s.ix.post.Close()
		}
		st.Close()
		return nil, err
	}
	return s, nil
}

// MovesDone tells the service that it has moved the metadata it no longer
// owns: other servers may now send it index entries.
func (s *Service) MovesDone() { s.moved.Store(true) }

// StartIndex starts delivering the tag index updates of this server's
// outbox (left by a crash, moved here with their objects, or queued by a
// rebuild) and those of later tag changes. It returns once each update
// queued so far has been tried; call it once every server has moved its
// metadata, before SetReady, so that clients find the index complete.
func (s *Service) StartIndex(ctx context.Context, peers Peers) error {
	recs, err := s.ix.ob.Start(int(s.index.Load()), int(s.count.Load()), outboxPeers{s.core, peers})
	if err != nil {
		return fmt.Errorf("tag index outbox: %w", err)
	}
	if len(recs) > 0 {
		s.log.Info("delivering tag index updates left in the outbox", "records", len(recs))
	}
	return s.ix.ob.WaitTried(ctx, recs)
}

// SetPlacement tells the service its place among the metadata servers.
func (s *Service) SetPlacement(index, count int) {
	s.index.Store(int64(index))
	s.count.Store(int64(count))
}

// SetReady makes the service serve clients: call it once every metadata
// server has moved the metadata it no longer owns.
func (s *Service) SetReady() {
	s.ready.Store(true)
	s.readyOnce.Do(func() { close(s.readyCh) })
}

// startupWait bounds how long a client request waits, on the server, for
// a metadata server that is still starting (moving metadata, delivering
// index updates) before it is refused. Clients read the server list as
// soon as it exists, which is before every server is ready: a launch
// script that starts servers and then clients (pdc_server.exe & ...)
// should not see "still starting" errors.
const startupWait = 30 * time.Second

// awaitReady waits until the service serves, at most startupWait.
func (s *core) awaitReady() bool {
	if s.ready.Load() {
		return true
	}
	t := time.NewTimer(startupWait)
	defer t.Stop()
	select {
	case <-s.readyCh:
		return true
	case <-t.C:
		return false
	}
}

// Close stops index deliveries, then flushes and closes the store.
// Undelivered index updates stay in the outbox for the next start.
func (s *Service) Close() error {
	s.StopStageWaits()
	s.tombs.close()
	s.ix.ob.Close()
	// After the outbox: its deliveries to this server apply entries.
	s.ix.post.Close()
	return s.st.Close()
}

// Checkpoint writes a consistent copy of the store into the checkpoint
// directory's dir name (name "": the time) and returns its path.
func (s *Service) Checkpoint(ctx context.Context, name string) (string, error) {
	return s.st.Checkpoint(ctx, s.cfg.CheckpointDir, name)
}

// SessionEnded releases the opens of a client whose connections are gone.
func (s *Service) SessionEnded(client string) { s.opens.endSession(client) }

// smallBatch is the header size up to which a batch request runs inline: a
// few items.
const smallBatch = 1 << 10

// Register adds the metadata methods to srv.
//
// Point operations run inline (see rpc.Inline): they wait on
// nothing but this server's own store, a point read or one commit, and
// handing each to another goroutine costs more than the operation on a
// small machine. Scans and batches, whose cost grows with their size, run
// on goroutines of their own so that they never hold up a connection.
func (s *Service) Register(srv *rpc.Server) {
	srv.Handle(wire.MethodContCreate, s.contCreate)
	srv.Handle(wire.MethodContGet, s.contGet, rpc.Inline())
	srv.Handle(wire.MethodContList, s.contList)
	srv.Handle(wire.MethodContDelete, s.contDelete)
	srv.Handle(wire.MethodContLifetime, s.contLifetime)
	srv.Handle(wire.MethodContDeleting, s.contDeleting)
	srv.Handle(wire.MethodContPage, s.contPage)
	srv.Handle(wire.MethodObjCreate, s.objCreate, rpc.InlineUpTo(smallBatch))
	srv.Handle(wire.MethodObjOpen, s.objOpen, rpc.InlineUpTo(smallBatch))
	srv.Handle(wire.MethodObjList, s.objList)
	// Tag writes and object deletes commit here and leave the index
	// updates for other servers to the outbox, so they run inline too;
	// only over the outbox's bound does one wait for deliveries, which
	// holds up its own connection: the writer that is too fast.
	// A delete waits for the data servers to drop the object's data, and
	// a set dims that shrinks for them to cut it (cut.go).
	srv.Handle(wire.MethodObjDelete, s.objDelete)
	srv.Handle(wire.MethodObjGone, s.objGone)
	srv.Handle(wire.MethodObjSetDims, s.objSetDims)
	srv.Handle(wire.MethodObjClose, s.objClose, rpc.Inline())
	srv.Handle(wire.MethodObjCloseAll, s.objCloseAll, rpc.Inline())
	srv.Handle(wire.MethodObjOpenCount, s.objOpenCount, rpc.Inline())
	srv.Handle(wire.MethodObjDeleteCont, s.objDeleteCont)
	srv.Handle(wire.MethodObjMembers, s.objMembers)
	srv.Handle(wire.MethodObjPage, s.objPage)
	srv.Handle(wire.MethodObjPurge, s.objPurge)
	srv.Handle(wire.MethodTagPut, s.tagPut, rpc.InlineUpTo(smallBatch))
	srv.Handle(wire.MethodTagDelete, s.tagDelete, rpc.Inline())
	srv.Handle(wire.MethodTagGet, s.tagGet, rpc.Inline())
	srv.Handle(wire.MethodTagQuery, s.tagQuery)
	srv.Handle(wire.MethodIndexApply, s.indexApply, rpc.InlineUpTo(smallBatch))
	srv.Handle(wire.MethodIndexFence, s.indexFence) // waits for deliveries
	srv.Handle(wire.MethodTagList, s.tagList)
	srv.Handle(wire.MethodCheckpoint, s.checkpointRPC)
	srv.Handle(wire.MethodImport, s.importRPC)
	srv.Handle(wire.MethodRegionAssign, s.regionAssign, rpc.Describe(wire.DescribeRegionBatch))
	srv.Handle(wire.MethodRegionPlace, s.regionPlace, rpc.Describe(wire.DescribeRegionBatch))
	srv.Handle(wire.MethodRegionQuery, s.regionQuery, rpc.Describe(wire.DescribeRegionReq))
	srv.Handle(wire.MethodRegionQueryAll, s.regionQueryAll, rpc.Describe(wire.DescribeRegionBatch))
	srv.Handle(wire.MethodStageProduce, s.stageProduce, rpc.InlineUpTo(smallBatch))
	srv.Handle(wire.MethodStageLookup, s.stageLookup, rpc.Inline(), rpc.Describe(wire.DescribeStageKey))
	srv.Handle(wire.MethodStageWait, s.stageWait, rpc.Describe(wire.DescribeStageKey), rpc.Waits()) // blocks until a produce
	srv.Handle(wire.MethodStageList, s.stageList)
	srv.Handle(wire.MethodStageRemove, s.stageRemove)
}

// owns checks that this server owns placement key k. The thing the key
// belongs to is described by format and arg, formatted only for an error.
func (s *core) owns(k uint32, format string, arg any) error {
	if !s.awaitReady() {
		return fmt.Errorf("metadata server is still starting after %v: %w", startupWait, pdc.ErrUnavailable)
	}
	count := int(s.count.Load())
	if count == 0 {
		return fmt.Errorf("metadata server is still starting: %w", pdc.ErrUnavailable)
	}
	if o := placement.Owner(k, count); o != int(s.index.Load()) {
		return fmt.Errorf("%s belongs to metadata server %d of %d, not to this one (%d): %w",
			fmt.Sprintf(format, arg), o, count, s.index.Load(), pdc.ErrInvalid)
	}
	return nil
}

func decode(req *rpc.Request, m wire.Message) error {
	if err := m.Unmarshal(req.Header); err != nil {
		return fmt.Errorf("%s: %w", req.Method, err)
	}
	return nil
}

// ---- helpers

func isNotFound(err error) bool { return err != nil && errors.Is(err, pdc.ErrNotFound) }

// scan calls fn for every key with prefix p, in order.
func (s *core) scan(p []byte, fn func(k, v []byte) error) error { return s.st.Scan(p, fn) }

func (s *Service) checkpointRPC(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.CheckpointRequest
	if err := decode(req, &m); err != nil {
		return nil, err
	}
	path, err := s.Checkpoint(ctx, m.Name)
	if err != nil {
		return nil, err
	}
	s.log.Info("checkpoint written", "path", path)
	return rpc.Respond(&wire.Checkpoint{Path: path}), nil
}
