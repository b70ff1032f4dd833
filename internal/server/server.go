package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/dataserver"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/metaserver"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/slots"
	"github.com/pdcgo/pdc/internal/staging"
	"github.com/pdcgo/pdc/internal/wire"
)

// Server is a running server process's state.
type Server struct {
	cfg   Config
	log   *slog.Logger
	self  cluster.Server
	start time.Time
	rpc   *rpc.Server
	meta  *metaserver.Service // nil without the metadata role
	data  *dataserver.Service // nil without the data role
	// authenticated: every connection proved the cluster secret.
	authenticated bool

	stopOnce sync.Once
	stop     chan struct{} // closed by a shutdown request

	mu struct {
		sync.Mutex
		list    *cluster.List          // set once complete
		members map[int]cluster.Server // rank 0: registrations so far
	}
	complete chan struct{} // closed when the list is complete
	// listMu orders the writes of the server list file (publishList).
	listMu sync.Mutex

	// Rank 0 coordinates the rounds of the start; slots is its record of
	// them, written by finishRound under the rounds' lock.
	rounds *rounds
	slots  slotState

	// Rank 0: servers that have moved the metadata they no longer own.
	migMu       sync.Mutex
	migrated    map[int]bool  // guarded by migMu
	allMigrated chan struct{} // closed once every rank is in migrated
}

// metaPlace returns the index of rank among the cluster's metadata servers
// (in rank order) and their number.
func metaPlace(list *cluster.List, rank int) (index, count int) {
	index = -1
	for _, m := range list.Servers {
		r, _ := cluster.ParseRoles(m.Roles)
		if r&wire.RoleMetadata == 0 {
			continue
		}
		if m.Rank == rank {
			index = count
		}
		count++
	}
	return index, count
}

func loadSecret(cfg Config) ([]byte, error) {
	if cfg.SecretFile != "" {
		s, err := cluster.ReadSecret(cfg.SecretFile)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("secret file %s does not exist", cfg.SecretFile)
		}
		return s, err
	}
	return cluster.SecretIn(cfg.TmpDir)
}

func newInstance() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// rendezvous completes the cluster membership.
func (s *Server) rendezvous(ctx context.Context, secret []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartupTimeout)
	defer cancel()
	if s.cfg.Rank == 0 {
		s.mu.Lock()
		s.completeIfReadyLocked()
		s.mu.Unlock()
		err := s.tmpDir().WriteRendezvous(cluster.Rendezvous{
			Addr: s.self.Addr, Instance: s.self.Instance, Size: s.cfg.Size, PID: s.self.PID})
		if err != nil {
			return err
		}
		select {
		case <-s.complete:
		case <-ctx.Done():
			s.mu.Lock()
			n := len(s.mu.members)
			s.mu.Unlock()
			return fmt.Errorf("only %d of %d servers registered within %v (--startup-timeout): %w", n, s.cfg.Size, s.cfg.StartupTimeout, pdc.ErrTimeout)
		}
		return s.publishList()
	}

	req := wire.RegisterRequest{Server: s.self.Info(), Size: uint32(s.cfg.Size)}
	waiting := waitingForRank0(s.log, s.cfg, "to register with it")
	for {
		rv, err := cluster.WaitForRendezvous(ctx, s.cfg.TmpDir, waiting)
		if err != nil {
			return fmt.Errorf("%w (--startup-timeout %v)", err, s.cfg.StartupTimeout)
		}
		if rv.Size != s.cfg.Size {
			return fmt.Errorf("rank 0 at %s runs a cluster of %d servers, this server was started with size %d: %w",
				rv.Addr, rv.Size, s.cfg.Size, pdc.ErrInvalid)
		}
		conn, err := rpc.Dial(ctx, rv.Addr, rpc.DialOptions{Secret: secret, Label: "rank 0 (" + rv.Addr + ")"})
		if err != nil {
			if errors.Is(err, pdc.ErrUnavailable) {
				continue // rank 0 went away between the probe and the dial
			}
			return fmt.Errorf("register with rank 0: %w", err)
		}
		rep, err := conn.Call(ctx, wire.MethodRegister, req.Marshal(nil), nil, nil)
		conn.Close()
		if errors.Is(err, pdc.ErrUnavailable) {
			continue
		}
		if err != nil {
			return fmt.Errorf("register with rank 0: %w", err)
		}
		var wl wire.ServerList
		if err := wl.Unmarshal(rep.Header); err != nil {
			return fmt.Errorf("register with rank 0: %w", err)
		}
		list := &cluster.List{Size: s.cfg.Size, Created: time.Now()}
		for _, si := range wl.Servers {
			list.Servers = append(list.Servers, cluster.ServerFromInfo(si))
		}
		if err := list.Validate(); err != nil {
			return fmt.Errorf("register with rank 0: %w", err)
		}
		s.mu.Lock()
		s.mu.list = list
		s.mu.Unlock()
		close(s.complete)
		return nil
	}
}

// completeIfReadyLocked publishes the list once every rank has registered.
// It requires s.mu.
func (s *Server) completeIfReadyLocked() {
	if s.mu.list != nil || len(s.mu.members) < s.cfg.Size {
		return
	}
	list := &cluster.List{Size: s.cfg.Size, Created: time.Now()}
	for r := range s.cfg.Size {
		list.Servers = append(list.Servers, s.mu.members[r])
	}
	s.mu.list = list
	close(s.complete)
}

func (s *Server) register(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if s.cfg.Rank != 0 {
		return nil, fmt.Errorf("rank %d is not the rendezvous server (rank 0 is): %w", s.cfg.Rank, pdc.ErrInvalid)
	}
	var r wire.RegisterRequest
	if err := r.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	in := cluster.ServerFromInfo(r.Server)
	if int(r.Size) != s.cfg.Size {
		return nil, fmt.Errorf("rank 0 runs a cluster of %d servers, rank %d at %s was started with size %d: %w",
			s.cfg.Size, in.Rank, in.Addr, r.Size, pdc.ErrInvalid)
	}
	if in.Rank <= 0 || in.Rank >= s.cfg.Size {
		return nil, fmt.Errorf("rank %d out of range 1..%d: %w", in.Rank, s.cfg.Size-1, pdc.ErrInvalid)
	}
	s.mu.Lock()
	if s.mu.list != nil {
		cur := s.mu.list.Servers[in.Rank]
		s.mu.Unlock()
		if cur.Instance != in.Instance {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			alive := cluster.Alive(pctx, cur)
			cancel()
			if alive {
				return nil, fmt.Errorf("the cluster is complete and rank %d is served by %s (pid %d); is another cluster using tmpdir %s? %w",
					in.Rank, cur.Addr, cur.PID, s.cfg.TmpDir, pdc.ErrExists)
			}
			if in.Roles != cur.Roles {
				// Placement depends on which ranks hold metadata: a rank
				// rejoins with the roles it had.
				return nil, fmt.Errorf("rank %d rejoins with roles %s but had roles %s; restart it with --roles %s: %w",
					in.Rank, in.Roles, cur.Roles, cur.Roles, pdc.ErrInvalid)
			}
			if err := s.rejoin(in); err != nil {
				return nil, err
			}
		}
	} else {
		if cur, ok := s.mu.members[in.Rank]; ok && cur.Instance != in.Instance {
			// Two processes claim one rank, or one restarted during startup.
			// The newest wins; the other will fail to find itself in the list.
			s.log.Warn("rank registered again", "registered", in.Rank, "old", cur.Addr, "new", in.Addr)
		}
		s.mu.members[in.Rank] = in
		s.completeIfReadyLocked()
		s.mu.Unlock()
	}
	select {
	case <-s.complete:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the other servers to register: %w", ctx.Err())
	}
	s.mu.Lock()
	list := s.mu.list
	s.mu.Unlock()
	if list.Servers[in.Rank].Instance != in.Instance {
		return nil, fmt.Errorf("rank %d was taken by another server (%s) during startup: %w", in.Rank, list.Servers[in.Rank].Addr, pdc.ErrExists)
	}
	var wl wire.ServerList
	for _, m := range list.Servers {
		wl.Servers = append(wl.Servers, m.Info())
	}
	return rpc.Respond(&wl), nil
}

// canRejoin checks that a rank 0 started with cfg can take the place of
// the dead rank 0 of the running cluster of list.
func canRejoin(cfg Config, list *cluster.List) error {
	if list.Size != cfg.Size {
		return fmt.Errorf("a cluster of %d servers runs in %s without its rank 0, and this server was started with size %d: restart rank 0 with --size %d (or stop the cluster with `pdc down --tmpdir %s`): %w",
			list.Size, cfg.TmpDir, cfg.Size, list.Size, cfg.TmpDir, pdc.ErrInvalid)
	}
	if had, roles := list.Servers[0].Roles, cluster.RoleString(cfg.Roles); had != roles {
		// Placement depends on which ranks hold metadata.
		return fmt.Errorf("rank 0 rejoins the cluster in %s with roles %s but had roles %s; restart it with --roles %s: %w",
			cfg.TmpDir, roles, had, had, pdc.ErrInvalid)
	}
	return nil
}

// rejoinAsRank0 makes this server the rank 0 of the running cluster of
// list, whose rank 0 died: the others keep serving, so there is no start
// to lead. It takes the dead one's place in the list, answers its own
// rounds (and those of servers that restart later) with what the last
// start recorded, and publishes the list and the rendezvous record.
func (s *Server) rejoinAsRank0(running *cluster.List) error {
	list := &cluster.List{Size: running.Size, Created: time.Now(), Servers: append([]cluster.Server(nil), running.Servers...)}
	old := list.Servers[0]
	list.Servers[0] = s.self
	table, err := s.dataDir().Table()
	if err != nil {
		return err
	}
	servers := make([]slots.Server, len(list.Servers))
	for i, m := range list.Servers {
		r, _ := cluster.ParseRoles(m.Roles)
		servers[i] = slots.Server{Rank: m.Rank, Data: r&wire.RoleData != 0, Meta: r&wire.RoleMetadata != 0}
	}
	plans := slots.Held(servers, table)
	s.slots.servers, s.slots.plans, s.slots.next = servers, plans, table
	planReplies := map[int]*wire.StartRound{}
	for rank, p := range plans {
		planReplies[rank] = &wire.StartRound{Round: wire.RoundPlan, Plan: p}
	}
	s.rounds.preset(map[uint32]map[int]*wire.StartRound{wire.RoundPlan: planReplies})
	for r := range s.cfg.Size {
		s.markMigrated(r)
	}
	s.mu.Lock()
	s.mu.list = list
	s.mu.members = map[int]cluster.Server{}
	for _, m := range list.Servers {
		s.mu.members[m.Rank] = m
	}
	s.mu.Unlock()
	close(s.complete)
	if err := s.publishList(); err != nil {
		return err
	}
	if err := s.tmpDir().WriteRendezvous(cluster.Rendezvous{
		Addr: s.self.Addr, Instance: s.self.Instance, Size: s.cfg.Size, PID: s.self.PID}); err != nil {
		return err
	}
	s.log.Warn("rank 0 rejoined the running cluster after its server died", "old", old.Addr, "new", s.self.Addr, "epoch", table.Epoch)
	return nil
}

// rejoin replaces a dead member of the complete cluster by its restarted
// successor and republishes the server list.
func (s *Server) rejoin(in cluster.Server) error {
	s.mu.Lock()
	old := s.mu.list.Servers[in.Rank]
	list := &cluster.List{Size: s.mu.list.Size, Created: time.Now(), Servers: append([]cluster.Server(nil), s.mu.list.Servers...)}
	list.Servers[in.Rank] = in
	s.mu.list = list
	s.mu.Unlock()
	s.log.Warn("rank rejoined after its server died", "rejoined", in.Rank, "old", old.Addr, "new", in.Addr)
	return s.publishList()
}

// publishList writes the server list as it is now. Writes are one at a
// time, each of the newest list: a rank that rejoins while rank 0, itself
// restarted, publishes the list it started from must not have its new
// address overwritten by that older list, or clients reading the file
// dial the dead one (rank 0 and rank 1 restarted together,
// TestRestartDeadCycles).
func (s *Server) publishList() error {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	s.mu.Lock()
	list := s.mu.list
	s.mu.Unlock()
	return s.tmpDir().WriteList(list)
}

// tmpDir is the cluster's tmpdir on the server's FS.
func (s *Server) tmpDir() cluster.Dir { return cluster.Dir{Path: s.cfg.TmpDir, FS: s.cfg.FS} }

// moveMetadata places this metadata server among the others and moves the
// metadata it no longer owns (the number of metadata servers changed) and
// that of the stores it adopts (adopt: their ranks).
func (s *Server) moveMetadata(ctx context.Context, list *cluster.List, secret []byte, adopt []uint64) error {
	index, count := metaPlace(list, s.cfg.Rank)
	s.meta.SetPlacement(index, count)
	var ranks []int
	for _, m := range list.Servers {
		if r, _ := cluster.ParseRoles(m.Roles); r&wire.RoleMetadata != 0 {
			ranks = append(ranks, m.Rank)
		}
	}
	pools := map[int]*rpc.Pool{}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	send := func(ctx context.Context, idx int, kvs *wire.KVBatch) error {
		rank := ranks[idx]
		p := pools[rank]
		if p == nil {
			m := list.Servers[rank]
			p = rpc.NewPool(m.Addr, 1, rpc.DialOptions{Secret: secret, Label: m.Label()})
			pools[rank] = p
		}
		_, err := p.Call(ctx, wire.MethodImport, kvs.Marshal(nil), nil, nil)
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartupTimeout)
	defer cancel()
	moved, err := s.meta.MoveForeign(ctx, send)
	if err != nil {
		return err
	}
	if moved > 0 {
		s.log.Info("moved metadata to its new owners", "entries", moved, "metadata servers", count)
	}
	// Stores no metadata server of this cluster opens (of ranks beyond its
	// size, of ranks that no longer hold metadata, or under another data
	// dir than their rank's now) are adopted by a metadata server that
	// sees them, as rank 0 said (slots.Adopt).
	for _, r := range adopt {
		name := fmt.Sprintf("meta-%d", r)
		dir := filepath.Join(s.cfg.DataDir, name)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue // gone since the scan
		}
		n, err := s.meta.Adopt(ctx, dir, send)
		if err != nil {
			return err
		}
		s.log.Info("adopted a metadata store no server opens", "store", dir, "entries", n)
	}
	s.meta.MovesDone()
	return nil
}

// barrier returns once every server has moved its metadata: rank 0 waits
// for the others to report, the others report to rank 0 and wait for its
// answer.
func (s *Server) barrier(ctx context.Context, secret []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartupTimeout)
	defer cancel()
	if s.cfg.Rank == 0 {
		s.markMigrated(0)
		select {
		case <-s.allMigrated:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("waiting for the other servers to move their metadata: %w", ctx.Err())
		}
	}
	s.mu.Lock()
	rank0 := s.mu.list.Servers[0]
	s.mu.Unlock()
	conn, err := rpc.Dial(ctx, rank0.Addr, rpc.DialOptions{Secret: secret, Label: rank0.Label()})
	if err != nil {
		return fmt.Errorf("report to rank 0: %w", err)
	}
	defer conn.Close()
	req := wire.RegisterRequest{Server: s.self.Info(), Size: uint32(s.cfg.Size)}
	if _, err := conn.Call(ctx, wire.MethodMigrated, req.Marshal(nil), nil, nil); err != nil {
		return fmt.Errorf("report to rank 0: %w", err)
	}
	return nil
}

func (s *Server) markMigrated(rank int) {
	s.migMu.Lock()
	defer s.migMu.Unlock()
	if s.migrated[rank] {
		return
	}
	s.migrated[rank] = true
	if len(s.migrated) == s.cfg.Size {
		close(s.allMigrated)
	}
}

func (s *Server) migratedRPC(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if s.cfg.Rank != 0 {
		return nil, fmt.Errorf("rank %d is not the rendezvous server: %w", s.cfg.Rank, pdc.ErrInvalid)
	}
	var r wire.RegisterRequest
	if err := r.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	if int(r.Server.Rank) >= s.cfg.Size {
		return nil, fmt.Errorf("rank %d out of range: %w", r.Server.Rank, pdc.ErrInvalid)
	}
	s.markMigrated(int(r.Server.Rank))
	select {
	case <-s.allMigrated:
		return &rpc.Response{}, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the other servers to move their metadata: %w", ctx.Err())
	}
}

func (s *Server) ping(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	return &rpc.Response{Payload: [][]byte{req.Payload}}, nil
}

func (s *Server) status(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	st := s.rpc.Stats()
	return rpc.Respond(&wire.Status{
		Server:       s.self.Info(),
		Size:         uint32(s.cfg.Size),
		Clients:      uint64(st.Clients),
		Requests:     st.Requests,
		Version:      s.cfg.Version,
		UptimeNS:     int64(time.Since(s.start)),
		IndexWaiting: s.indexWaiting(),
		CutsWaiting:  s.cutsWaiting(),
		SlotsMissing: s.slotsMissing(),
	}), nil
}

// cutsWaiting counts the objects whose dims cut some data server has not
// applied yet; 0 without the metadata role.
func (s *Server) cutsWaiting() uint64 {
	if s.meta == nil {
		return 0
	}
	return uint64(s.meta.PendingCuts())
}

// slotsMissing describes the data slots this server should hold and
// cannot; none without the data role.
func (s *Server) slotsMissing() []string {
	if s.data == nil {
		return nil
	}
	return s.data.MissingSlots()
}

// indexWaiting lists the ranks of the metadata servers whose last
// delivery of tag index updates from here failed.
func (s *Server) indexWaiting() []uint64 {
	s.mu.Lock()
	list := s.mu.list
	s.mu.Unlock()
	if s.meta == nil || list == nil {
		return nil
	}
	ranks := ranksWith(list, wire.RoleMetadata)
	var out []uint64
	for _, d := range s.meta.IndexFailing() {
		if d < len(ranks) {
			out = append(out, uint64(ranks[d]))
		}
	}
	return out
}

func (s *Server) shutdown(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if !s.authenticated && !fromThisHost(req) {
		s.log.Warn("shutdown refused: no cluster secret and the request came from another host", "client", req.Client, "remote", req.Remote)
		return nil, fmt.Errorf("rank %d runs without a cluster secret (--insecure), so it takes shutdown only from its own host, not from %s; "+
			"run pdc down on %s, or start the cluster with a secret: %w", s.cfg.Rank, req.Remote, s.self.Host, pdc.ErrPermission)
	}
	s.log.Info("shutdown requested", "client", req.Client, "remote", req.Remote)
	s.stopOnce.Do(func() { close(s.stop) })
	return &rpc.Response{}, nil
}

// fromThisHost reports whether a request came from this host: over a Unix
// socket, from a loopback address, or from one of this host's own
// addresses (a client that dialed the server's published address).
// TCP's handshake keeps a peer elsewhere from claiming such a source.
func fromThisHost(req *rpc.Request) bool {
	host, _, err := net.SplitHostPort(req.Remote)
	if err != nil {
		return true // a Unix socket peer
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	if lh, _, err := net.SplitHostPort(req.Local); err == nil && ip.Equal(net.ParseIP(lh)) {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// waitingForRank0 logs, once, that a rank waits for rank 0 and why, and
// for how long: launchers start ranks in any order, and a rank started
// before rank 0 waits for it under --startup-timeout, which it names.
func waitingForRank0(log *slog.Logger, cfg Config, what string) func(error) {
	said := false
	return func(why error) {
		if said {
			return
		}
		said = true
		log.Info(fmt.Sprintf("waiting for rank 0 %s, up to %v (--startup-timeout): %v", what, cfg.StartupTimeout, why))
	}
}

// advertiseAddr is the address this server publishes (Config.Advertise). A
// rank above 0 bound to a wildcard address without --advertise takes its
// address on the route to rank 0, so it waits for rank 0's record first.
func advertiseAddr(ctx context.Context, log *slog.Logger, cfg Config, ln net.Listener) (string, error) {
	bound := rpc.Addr(ln.Addr())
	towards := ""
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() && cfg.Advertise == "" && cfg.Rank > 0 {
		wctx, cancel := context.WithTimeout(ctx, cfg.StartupTimeout)
		rv, err := cluster.WaitForRendezvous(wctx, cfg.TmpDir, waitingForRank0(log, cfg, "to learn the address on the route to it"))
		cancel()
		if err != nil {
			return "", fmt.Errorf("find the address on the route to rank 0: %w (--startup-timeout %v)", err, cfg.StartupTimeout)
		}
		towards = rv.Addr
	}
	return cluster.AdvertiseAddr(bound, cfg.Advertise, towards)
}

// newSender makes the server's side of the data transport layer: it serves
// produced files from the producer dir (when the server has one) to
// consumers, by every DTL mode. Its bulk connections are accepted on the
// host the server listens on, and are published on the host it
// advertises (addr) when that was given, else at the address each
// consumer reached the server at.
func newSender(cfg Config, ln net.Listener, addr string, files *staging.Files) (*dtl.Sender, error) {
	bulk := "127.0.0.1:0"
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		bulk = net.JoinHostPort(a.IP.String(), "0")
	}
	advertise := ""
	if cfg.Advertise != "" {
		advertise, _, _ = net.SplitHostPort(addr)
	}
	rank := cfg.Rank
	return dtl.NewSender(dtl.SenderConfig{
		BulkAddr:        bulk,
		AdvertiseHost:   advertise,
		Logger:          cfg.Logger,
		Stall:           cfg.StallTimeout,
		MaxConns:        cfg.MaxConns,
		MaxConnsPerPeer: cfg.MaxConnsPerPeer,
		Resolve: func(ctx context.Context, key []byte) (dtl.Source, error) {
			if !staging.IsFetchKey(key) {
				return dtl.Source{}, fmt.Errorf("rank %d: unknown kind of fetch key: %w", rank, pdc.ErrNotFound)
			}
			if files == nil {
				return dtl.Source{}, fmt.Errorf("rank %d serves no producer dir (start it with --stage-producer-dir or $PDC_STAGE_PRODUCER_DIR): %w", rank, pdc.ErrNotFound)
			}
			return files.Resolve(ctx, key)
		},
	})
}

// closeBounded runs close, waiting at most d. A store whose background
// work keeps failing (its directory removed under it) can make close wait
// for ever; the process then exits without it, and what it acknowledged
// is in its log (metadata) or files (data) already. The goroutine left
// behind ends with the process.
func closeBounded(log *slog.Logger, what string, d time.Duration, close func() error) {
	done := make(chan error, 1)
	go func() { done <- close() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			log.Error("close " + what + ": " + err.Error())
		}
	case <-t.C:
		log.Error(fmt.Sprintf("close %s: not done after %v; stopping without it", what, d))
	}
}

// indexStartFatal reports whether the tag index's start failed in a way
// the server must not serve around. A wait for deliveries to other servers
// that ended (too slow, or the server is stopping) is not: the outbox
// started, and they go on in the background. Any other error is: the
// outbox did not start (its store failed), so serving would deliver
// nothing, and this server's own part of its records would be applied
// only at the next start, after the tag writes served meanwhile.
func indexStartFatal(err error) bool {
	return err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}
