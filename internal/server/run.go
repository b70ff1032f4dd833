package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/bufpool"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/dataserver"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/metaserver"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/metrics"
	"github.com/pdcgo/pdc/internal/regionstore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/slots"
	"github.com/pdcgo/pdc/internal/staging"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// Run starts a server and serves until ctx ends or a client asks it to shut
// down; then it stops cleanly. Errors name what failed in one line.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	p := &proc{cfg: cfg, log: cfg.Logger.With("rank", cfg.Rank)}
	defer p.close()
	if err := p.run(ctx); err != nil {
		return fmt.Errorf("rank %d: %w", cfg.Rank, err)
	}
	return nil
}

// proc is one server process while Run runs it: what its steps build,
// and the cleanups that undo them, which close runs last first.
type proc struct {
	cfg    Config
	log    *slog.Logger
	secret []byte
	// running is the cluster rank 0 rejoins: it died, and the others
	// still serve.
	running *cluster.List

	meta *metaserver.Service // nil without the metadata role
	data *dataserver.Service // nil without the data role
	recv *slots.Receiver     // nil without the data role
	objs *objects
	// metaID is the id of meta's store: the server list records it, and
	// a rank that rejoins must come back with it (checkMetaStore).
	metaID string
	// The region stores, one per data slot this server holds, are opened
	// once the cluster knows who holds which (moveData).
	stores []*regionstore.Store
	files  *staging.Files // nil without a producer dir

	s        *Server
	reg      *metrics.Registry // nil without Config.MetricsAddr
	sender   *dtl.Sender
	serveErr chan error    // the rpc server's Serve result, once it ends
	list     *cluster.List // the complete cluster, once joined

	undo []func()
	// own is this server's owner record (lockDataDir).
	own owner
	// joined is set once the cluster took this server in (the
	// rendezvous, or rank 0's rejoin). Until then a failed start undoes
	// what it made on disk (undoIfRefused); after it, others may have
	// sent it metadata or data, and what it made stays.
	joined bool
}

// run takes the steps of a server's life in order.
func (p *proc) run(ctx context.Context) error {
	if err := p.checkSecret(); err != nil {
		return err
	}
	if err := p.lockDataDir(ctx); err != nil {
		return err
	}
	if err := p.probe(ctx); err != nil {
		return err
	}
	if err := p.checkMetaStore(ctx); err != nil {
		return err
	}
	if err := p.open(); err != nil {
		return err
	}
	if err := p.listen(ctx); err != nil {
		return err
	}
	if err := p.serveMetrics(); err != nil {
		return err
	}
	if err := p.join(ctx); err != nil {
		p.answerRounds()
		return err
	}
	if err := p.startServices(ctx); err != nil {
		return err
	}
	if err := p.serve(ctx); err != nil {
		return err
	}
	p.shutdown()
	return nil
}

// onClose adds a cleanup for close to run.
func (p *proc) onClose(f func()) { p.undo = append(p.undo, f) }

// undoIfRefused adds a cleanup that close runs only if the start ends
// before the cluster took this server in: a refused start leaves nothing
// on disk, neither a data dir nor an empty metadata store that a later
// start would find and take for one made on purpose.
func (p *proc) undoIfRefused(f func()) {
	p.onClose(func() {
		if !p.joined {
			f()
		}
	})
}

// close undoes the steps taken, last first.
func (p *proc) close() {
	for i := len(p.undo) - 1; i >= 0; i-- {
		p.undo[i]()
	}
}

// checkSecret makes the server's dirs and loads the cluster secret. A
// server reachable beyond this host refuses to run without one unless
// told to (Config.Insecure).
func (p *proc) checkSecret() error {
	cfg := p.cfg
	fsys := vfs.OrDefault(cfg.FS)
	for _, d := range []string{cfg.TmpDir, cfg.DataDir} {
		missing := missingDirs(fsys, d)
		p.undoIfRefused(func() {
			for _, m := range missing {
				if fsys.Remove(m) != nil {
					return // not empty: another server's, or made since
				}
			}
		})
		if err := fsys.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	secret, err := loadSecret(cfg)
	if err != nil {
		return err
	}
	p.secret = secret
	if len(secret) == 0 && !cluster.IsLoopback(cfg.Listen) {
		if !cfg.Insecure {
			return fmt.Errorf("listening on %s, beyond this host, without a cluster secret would let anyone who reaches it read, write or stop it: "+
				"give --secret-file FILE (or put the secret in %s), or --insecure to run without one: %w",
				cfg.Listen, filepath.Join(cfg.TmpDir, cluster.SecretFile), pdc.ErrPermission)
		}
		p.log.Warn("running without a cluster secret while listening beyond this host (--insecure): anyone who reaches " + cfg.Listen +
			" can read and write its data; shutdown is taken from this host only")
	}
	return nil
}

// probe, on rank 0, looks for the cluster of an earlier start: one that
// still serves without rank 0 is rejoined (p.running), a dead one's
// files are removed, a live rank 0 is an error.
func (p *proc) probe(ctx context.Context) error {
	cfg := p.cfg
	if cfg.Rank != 0 {
		return nil
	}
	prev, live := cluster.Probe(ctx, cfg.TmpDir)
	switch {
	case prev != nil && len(live) > 0 && live[0].Rank == 0:
		return cluster.RunningError(cfg.TmpDir, prev, live)
	case prev != nil && len(live) > 0:
		if err := canRejoin(cfg, prev); err != nil {
			return err
		}
		p.running = prev
	default:
		if prev != nil {
			p.log.Warn(fmt.Sprintf("replacing the stale server list in %s: none of its %d servers answers (a dead cluster)", cfg.TmpDir, prev.Size))
		}
		if err := (cluster.Dir{Path: cfg.TmpDir, FS: cfg.FS}).RemoveFiles(); err != nil {
			return fmt.Errorf("remove stale files: %w", err)
		}
	}
	return nil
}

// open opens the services of the server's roles and the producer dir.
func (p *proc) open() error {
	cfg, log := p.cfg, p.log
	if cfg.Roles&wire.RoleMetadata != 0 {
		if _, err := vfs.OrDefault(cfg.FS).Stat(metaDir(cfg)); errors.Is(err, fs.ErrNotExist) {
			// Made by this start: a refused one removes it, once closed.
			p.undoIfRefused(func() {
				if err := vfs.OrDefault(cfg.FS).RemoveAll(metaDir(cfg)); err != nil {
					log.Warn("remove the metadata store this refused start made: " + err.Error())
				}
			})
		}
		meta, err := metaserver.Open(metaserver.Config{
			Dir:           metaDir(cfg),
			CheckpointDir: filepath.Join(cfg.DataDir, "checkpoints", fmt.Sprintf("meta-%d", cfg.Rank)),
			Durability:    cfg.Durability,
			FS:            cfg.FS,
			Logger:        log,
			NoIndex:       cfg.NoIndex,
			NoSuffixTree:  cfg.NoSuffixTree,
		})
		if err != nil {
			return err
		}
		p.meta = meta
		p.onClose(func() { closeBounded(log, "metadata store", cfg.ShutdownTimeout, meta.Close) })
		id, made, err := metastore.EnsureIdentity(cfg.FS, metaDir(cfg), cfg.Rank)
		if err != nil {
			return err
		}
		if made {
			log.Info("metadata store identity recorded", "store", id.ID, "dir", metaDir(cfg))
		}
		p.metaID = id.ID
	}
	p.objs = newObjects()
	p.onClose(func() {
		// Shutdown fsyncs what the default durability left in the
		// kernel.
		for _, st := range p.stores {
			if err := st.Close(); err != nil {
				log.Error("close region store: " + err.Error())
			}
		}
	})
	if cfg.Roles&wire.RoleData != 0 {
		p.recv = slots.NewDataDir(cfg.FS, cfg.DataDir).NewReceiver(log)
		p.data = dataserver.New(dataserver.Config{Logger: log, MaxBytes: cfg.DataBudget, Rank: cfg.Rank, Objects: p.objs,
			RemoveGuard: p.storesServed})
		// Keep as much free payload memory warm as may be in flight.
		retain := cfg.DataBudget
		if retain <= 0 {
			retain = 1 << 30
		}
		bufpool.SetRetain(int(retain))
		data := p.data
		p.onClose(func() { data.Close() })
	}
	if cfg.StageProducerDir != "" {
		files, err := staging.NewFiles(cfg.StageProducerDir)
		if err != nil {
			return err
		}
		p.files = files
	}
	return nil
}

// listen binds the server's address and serves its methods there, in a
// goroutine, before the cluster is complete: the rendezvous and the
// start rounds are requests too.
func (p *proc) listen(ctx context.Context) error {
	cfg := p.cfg
	ln, err := rpc.Listen(cfg.Listen)
	if err != nil {
		return fmt.Errorf("cannot %w", err)
	}
	addr, err := advertiseAddr(ctx, p.log, cfg, ln)
	if err != nil {
		ln.Close()
		return err
	}
	s := p.newServer(addr)
	sender, err := newSender(cfg, ln, addr, p.files)
	if err != nil {
		ln.Close()
		return err
	}
	p.onClose(func() { sender.Close() })
	p.sender = sender
	sender.Register(s.rpc)
	s.rpc.Handle(wire.MethodPing, s.ping, rpc.Inline(), rpc.WithPayload()) // it echoes one
	s.rpc.Handle(wire.MethodStatus, s.status, rpc.Inline())
	s.rpc.Handle(wire.MethodShutdown, s.shutdown)
	s.rpc.Handle(wire.MethodRegister, s.register)
	s.rpc.Handle(wire.MethodMigrated, s.migratedRPC)
	s.rpc.Handle(wire.MethodStartRound, s.rounds.rpc)

	p.serveErr = make(chan error, 1)
	go func() { p.serveErr <- s.rpc.Serve(ln) }()
	p.onClose(func() {
		s.rpc.Close()
		<-p.serveErr
	})
	// It answers there now: a second start of this rank that finds the
	// data dir locked asks it (awaitPredecessor).
	if err := p.recordAddr(s.self.Addr, s.self.Instance); err != nil {
		return err
	}
	p.log.Info("listening", "addr", s.self.Addr, "size", cfg.Size, "roles", s.self.Roles,
		"tmpdir", cfg.TmpDir, "datadir", cfg.DataDir, "auth", len(p.secret) > 0)
	return nil
}

// newServer makes the Server that answers at addr, with its rpc server
// and the services' methods on it.
func (p *proc) newServer(addr string) *Server {
	cfg, meta, data := p.cfg, p.meta, p.data
	host := cfg.Host
	if host == "" {
		host = cluster.HostName()
	}
	stageDir := ""
	if p.files != nil {
		stageDir = p.files.Dir()
	}
	s := &Server{
		cfg:      cfg,
		log:      p.log,
		start:    time.Now(),
		stop:     make(chan struct{}),
		complete: make(chan struct{}),
		meta:     meta,
		data:     data,

		authenticated: len(p.secret) > 0,
		migrated:      map[int]bool{},
		allMigrated:   make(chan struct{}),
	}
	s.rounds = newRounds(cfg.Size, func() *cluster.List {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.mu.list
	})
	s.rounds.finish, s.rounds.rejoin = s.finishRound, s.rejoinRound
	s.rounds.patience = cfg.StartupTimeout
	s.self = cluster.Server{
		Rank: cfg.Rank, Addr: addr, Roles: cluster.RoleString(cfg.Roles),
		PID: os.Getpid(), Host: host, Instance: newInstance(), Start: s.start, StageDir: stageDir,
		MetaStore: p.metaID,
	}
	s.mu.members = map[int]cluster.Server{cfg.Rank: s.self}
	onSessionEnd := func(client string) {
		if meta != nil {
			meta.SessionEnded(client)
		}
		if data != nil {
			data.SessionEnded(client)
		}
	}
	s.rpc = rpc.NewServer(rpc.ServerConfig{
		Limits: cfg.Limits, Secret: p.secret, Rank: uint32(cfg.Rank), Size: uint32(cfg.Size),
		Instance: s.self.Instance, Logger: p.log, OnSessionEnd: onSessionEnd,
		PayloadBudget: cfg.PayloadBudget, MaxConns: cfg.MaxConns, MaxConnsPerPeer: cfg.MaxConnsPerPeer,
		MaxHandshakes: cfg.MaxHandshakes, HandshakeTimeout: cfg.HandshakeTimeout, StallTimeout: cfg.StallTimeout,
		MinRecvRate: cfg.MinRecvRate, Observer: p.observer(), SlowRequest: cfg.SlowRequest,
	})
	if meta != nil {
		meta.Register(s.rpc)
	}
	if data != nil {
		data.Register(s.rpc)
		p.recv.Register(s.rpc)
	}
	p.s = s
	return s
}

// join completes the cluster (rendezvous, or rank 0's rejoin), then
// takes the start rounds that put each metadata store and data slot
// where the cluster now wants it.
func (p *proc) join(ctx context.Context) error {
	s, cfg := p.s, p.cfg
	var err error
	if p.running != nil {
		err = s.rejoinAsRank0(p.running)
	} else {
		err = s.rendezvous(ctx, p.secret)
	}
	if err != nil {
		return err
	}
	p.joined = true
	s.mu.Lock()
	p.list = s.mu.list
	s.mu.Unlock()
	// Every server reports what its data dir holds; rank 0 answers with
	// the metadata stores it adopts.
	inv, warns, err := s.dataDir().Scan()
	if err != nil {
		return err
	}
	for _, w := range warns {
		p.log.Warn(w)
	}
	for _, r := range cfg.AbandonStores {
		inv.Abandon = append(inv.Abandon, uint64(r))
	}
	for _, slot := range cfg.AbandonSlots {
		inv.AbandonSlots = append(inv.AbandonSlots, uint64(slot))
	}
	ictx, icancel := context.WithTimeout(ctx, cfg.StartupTimeout)
	a, err := s.takeRound(ictx, &wire.StartRound{Round: wire.RoundInventory, Inventory: &inv}, p.secret)
	icancel()
	if err != nil {
		return err
	}
	// The cluster's record of its metadata stores (slots.CheckStores),
	// to the lowest rank of each data dir: written before any metadata
	// moves, so that a store that takes entries now is expected by every
	// later start.
	if a.Plan != nil && len(a.Plan.Stores) > 0 {
		if err := s.dataDir().SetStores(a.Plan.Stores); err != nil {
			return err
		}
	}
	if p.data != nil {
		// Data servers ask the metadata servers about objects they see
		// for the first time (docs/design/0016).
		askPeers := newMetaPeers(cfg.TmpDir, p.secret, p.list)
		p.onClose(askPeers.Close)
		p.objs.start(askPeers)
	}
	if p.meta != nil {
		var adopt []uint64
		if a.Plan != nil {
			adopt = a.Plan.Adopt
			if f := a.Plan.SeqFloor; f > 0 {
				if err := p.meta.KeepIDsAbove(uint32(min(f, 1<<32-1))); err != nil {
					return err
				}
			}
		}
		if err := s.moveMetadata(ctx, p.list, p.secret, adopt); err != nil {
			return err
		}
	}
	if err := s.barrier(ctx, p.secret); err != nil {
		return err
	}
	// Then the data: each slot to the server that holds it now.
	p.stores, err = s.moveData(ctx, p.list, p.secret, p.recv, p.data)
	return err
}

// startServices starts what serves clients once the cluster is complete:
// the tag index's deliveries, the tombstones' deletes and the scrub.
func (p *proc) startServices(ctx context.Context) error {
	cfg, meta := p.cfg, p.meta
	if meta != nil {
		// Every server has moved its metadata: index updates left in
		// outboxes can go to the servers that now hold their entries,
		// before clients query them.
		peers := newMetaPeers(cfg.TmpDir, p.secret, p.list)
		p.onClose(peers.Close)
		ictx, cancel := context.WithTimeout(ctx, cfg.StartupTimeout)
		err := meta.StartIndex(ictx, peers)
		cancel()
		if indexStartFatal(err) {
			return fmt.Errorf("start the tag index: %w", err)
		}
		if err != nil {
			p.log.Warn("tag index updates still waiting in the outbox; they are retried in the background: " + err.Error())
		}
		// Deleted objects' data still on some data server goes now, or
		// once that server is back.
		dpeers := newDataPeers(cfg.TmpDir, p.secret, p.list)
		p.onClose(dpeers.Close)
		if err := meta.StartTombstones(dpeers); err != nil {
			return err
		}
		meta.SetReady()
	}
	if p.data != nil {
		// Cheaply, in the background: files of objects whose metadata is
		// gone are reported (pdc fsck removes them).
		p.data.StartScrub()
	}
	p.log.Info("cluster complete; serving", "servers", cfg.Size)
	if cfg.Ready != nil {
		cfg.Ready(p.s.self, p.list)
	}
	return nil
}

// serve waits for the end: ctx, a shutdown request or the rpc server
// failing.
func (p *proc) serve(ctx context.Context) error {
	select {
	case <-ctx.Done():
		p.log.Info("stopping: signal")
	case <-p.s.stop:
		p.log.Info("stopping: shutdown requested")
	case err := <-p.serveErr:
		p.serveErr <- err // for close's wait
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// answerRounds lets rank 0, whose start failed, send the other servers
// the failed round's answer before it goes: without it they lost the
// connection ("EOF") rather than hear why the start was refused. It
// waits for the running requests (a round's answer once it is decided)
// for up to two seconds.
func (p *proc) answerRounds() {
	if p.cfg.Rank != 0 || p.s == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.s.rpc.Shutdown(sctx); err != nil {
		p.log.Warn("start failed: " + err.Error())
	}
}

// shutdown lets running requests finish, within Config.ShutdownTimeout,
// and checkpoints the metadata store so the next start replays little.
func (p *proc) shutdown() {
	cfg, log, meta := p.cfg, p.log, p.meta
	if meta != nil {
		// Consumers waiting for a produce would hold up the shutdown.
		meta.StopStageWaits()
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := p.s.rpc.Shutdown(sctx); err != nil {
		log.Warn("shutdown: " + err.Error())
	}
	if meta != nil {
		cctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		path, err := meta.Checkpoint(cctx, "")
		cancel()
		if err != nil {
			log.Error("checkpoint at shutdown: " + err.Error())
		} else {
			log.Info("checkpoint written", "path", path)
		}
	}
	log.Info("stopped", "requests", p.s.rpc.Stats().Requests)
}

// missingDirs returns dir and those of its parents that do not exist,
// deepest first: what MkdirAll(dir) makes.
func missingDirs(fsys vfs.FS, dir string) []string {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			return missing
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			return missing
		}
	}
}
