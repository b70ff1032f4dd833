package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/batch"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/transfer"
	"github.com/pdcgo/pdc/internal/wire"
)

// Option configures Connect.
type Option func(*options)

type options struct {
	tmpDir     string
	secret     []byte
	secretFile string
	poolSize   int
	name       string
	wait       bool

	producerDir, consumerDir string
	stageDirsSet             bool
	shared, sharedSet        bool
	link, linkSet            bool
	host                     string
	namespace                string
	namespaceSet             bool

	regionMode    string
	regionModeSet bool
	laneSize      int
	pageSize      int
}

// WithTmpDir reads the server list and secret from dir instead of
// $PDC_TMPDIR (default ./pdc_tmp).
func WithTmpDir(dir string) Option { return func(o *options) { o.tmpDir = dir } }

// WithSecret sets the cluster secret.
func WithSecret(secret []byte) Option { return func(o *options) { o.secret = secret } }

// WithSecretFile reads the cluster secret from path instead of the tmpdir.
// Without WithSecret or WithSecretFile, Connect reads $PDC_SECRET_FILE if
// it is set, else the tmpdir's secret file if there is one.
func WithSecretFile(path string) Option { return func(o *options) { o.secretFile = path } }

// EnvSecretFile names the variable that gives the cluster secret's file
// to clients (and servers) not given one otherwise.
const EnvSecretFile = "PDC_SECRET_FILE"

// WithPoolSize sets how many connections the client keeps per server
// (default 2).
func WithPoolSize(n int) Option { return func(o *options) { o.poolSize = n } }

// WithWait makes Connect wait, until ctx ends, for servers that are still
// starting to write the server list, instead of failing at once.
func WithWait() Option { return func(o *options) { o.wait = true } }

// WithName sets the name servers know this client by (default
// pid@host/random). Servers keep a client's session under its name: its
// open objects, its registered transfers, its shared-memory lane. Give
// each Client a name of its own: two live clients of one name share a
// session, and the first to close ends the other's opens.
func WithName(name string) Option { return func(o *options) { o.name = name } }

// DefaultTmpDir is $PDC_TMPDIR, or ./pdc_tmp.
func DefaultTmpDir() string {
	if d := os.Getenv("PDC_TMPDIR"); d != "" {
		return d
	}
	return "pdc_tmp"
}

// Server describes one server of the cluster.
type Server struct {
	Rank     int
	Addr     string
	Roles    string // "metadata", "data" or "both"
	PID      int
	Host     string
	Instance string
	Start    time.Time
	// StageDir is the producer dir the server serves staged files from
	// ("" if it serves none).
	StageDir string
	// MetaStore is the id of the metadata store the server serves ("" if
	// it holds no metadata): the same id across restarts of its rank
	// means the same metadata.
	MetaStore string
}

// Label names the server as errors do: "rank 2 (127.0.0.1:4000)".
func (s Server) Label() string { return fmt.Sprintf("rank %d (%s)", s.Rank, s.Addr) }

// Client talks to a pdc cluster.
type Client struct {
	tmpDir string
	dial   rpc.DialOptions

	// mu guards servers and pools, which change when a server restarts at
	// a new address (see refresh).
	mu      sync.RWMutex
	servers []Server
	pools   []*rpc.Pool
	// downSince is when this client first failed to reach each server
	// that it has not reached since (zero: reached, or never tried).
	downSince []time.Time

	poolSize int
	pageSize int // items asked for per page of a listing; 0: the servers' bound

	metaOnce sync.Once
	meta     []int // ranks of the metadata servers
	query    queryState
	dataOnce sync.Once
	data     []int // ranks of the data servers

	stage stageConfig
	recv  stageRecv

	xfer *transfer.Engine // region transfers

	// opened holds the ranks this client has opened or created objects
	// on: Close asks each to release its opens (closeOpens).
	opened struct {
		sync.Mutex
		ranks map[int]struct{}
	}

	closeOnce sync.Once
}

// Connect reads the cluster's server list and returns a client. It does not
// dial: connections are made on first use. With no server list it fails at
// once with pdc.ErrNotFound and a message saying how to start servers.
func Connect(ctx context.Context, opts ...Option) (*Client, error) {
	o := options{tmpDir: DefaultTmpDir(), poolSize: 2}
	for _, opt := range opts {
		opt(&o)
	}
	// As a sentinel of package pdc, as every other call's end: it was
	// context's own, which errors.Is(err, pdc.ErrTimeout) missed.
	if err := pdc.CtxErr(ctx); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	var list *cluster.List
	var err error
	if o.wait {
		if err := os.MkdirAll(o.tmpDir, 0o700); err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		list, err = cluster.WaitForList(ctx, o.tmpDir)
	} else {
		list, err = cluster.ReadList(o.tmpDir)
	}
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	secret := o.secret
	if secret == nil && o.secretFile == "" {
		o.secretFile = os.Getenv(EnvSecretFile)
	}
	if secret == nil {
		if o.secretFile != "" {
			secret, err = cluster.ReadSecret(o.secretFile)
			if errors.Is(err, fs.ErrNotExist) {
				err = fmt.Errorf("secret file %s does not exist: %w", o.secretFile, pdc.ErrNotFound)
			}
		} else {
			secret, err = cluster.SecretIn(o.tmpDir)
		}
		if err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
	}
	if o.name == "" {
		// Unique per Client: servers track open objects per client name.
		host, _ := os.Hostname()
		var r [4]byte
		_, _ = rand.Read(r[:])
		o.name = fmt.Sprintf("%d@%s/%x", os.Getpid(), host, r)
	}
	mode, err := regionMode(&o)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	c := &Client{tmpDir: o.tmpDir, dial: rpc.DialOptions{Secret: secret, ClientName: o.name}, poolSize: o.poolSize, pageSize: max(o.pageSize, 0),
		stage: o.stage()}
	c.xfer = transfer.NewEngine((*clusterView)(c), transfer.Config{Mode: mode, LaneSize: o.laneSize})
	if c.stage.host == "" {
		c.stage.host = cluster.HostName()
	}
	for _, s := range list.Servers {
		c.servers = append(c.servers, Server(s))
		c.pools = append(c.pools, c.newPool(Server(s)))
	}
	c.downSince = make([]time.Time, len(c.servers))
	return c, nil
}

func (c *Client) newPool(s Server) *rpc.Pool {
	opts := c.dial
	opts.Label = s.Label()
	return rpc.NewPool(s.Addr, c.poolSize, opts)
}

// server returns the server of rank and its pool.
func (c *Client) server(rank int) (Server, *rpc.Pool, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if rank < 0 || rank >= len(c.pools) {
		return Server{}, nil, fmt.Errorf("no server of rank %d: the cluster has ranks 0..%d: %w", rank, len(c.pools)-1, pdc.ErrNotFound)
	}
	return c.servers[rank], c.pools[rank], nil
}

// ranks returns 0 .. number of servers - 1.
func (c *Client) ranks() []int {
	rs := make([]int, len(c.Servers()))
	for i := range rs {
		rs[i] = i
	}
	return rs
}

// label names the server of rank in errors.
func (c *Client) label(rank int) string {
	s, _, err := c.server(rank)
	if err != nil {
		return fmt.Sprintf("rank %d", rank)
	}
	return s.Label()
}

// conn returns a connection to the server of rank. When the server cannot
// be reached, the server list is read again: a server that died and was
// restarted has a new address there.
func (c *Client) conn(ctx context.Context, rank int) (*rpc.Conn, error) {
	return c.pooled(ctx, rank, (*rpc.Pool).Get)
}

// startConn returns the connection this client's data starts to rank go
// on: always the same one, so that the server registers (and stores) them
// in the order they were sent, one after another, rather than on two
// connections at once, where writes to one object would contend.
func (c *Client) startConn(ctx context.Context, rank int) (*rpc.Conn, error) {
	return c.pooled(ctx, rank, (*rpc.Pool).First)
}

// pooled takes a connection from rank's pool with get, reading the server
// list again if the server cannot be reached (see conn).
func (c *Client) pooled(ctx context.Context, rank int, get func(*rpc.Pool, context.Context) (*rpc.Conn, error)) (*rpc.Conn, error) {
	_, p, err := c.server(rank)
	if err != nil {
		return nil, err
	}
	conn, err := get(p, ctx)
	if err != nil && errors.Is(err, pdc.ErrUnavailable) && (c.refresh(rank) || c.replaced(rank, p)) {
		_, p, _ = c.server(rank)
		conn, err = get(p, ctx)
	}
	c.reached(rank, err == nil || !errors.Is(err, pdc.ErrUnavailable))
	return conn, err
}

// reached notes whether rank's server could be reached just now.
func (c *Client) reached(rank int, ok bool) {
	// Every pooled call lands here, nearly always with nothing to note:
	// a shared look first, the exclusive lock only for a change.
	c.mu.RLock()
	same := rank < 0 || rank >= len(c.downSince) || c.downSince[rank].IsZero() == ok
	c.mu.RUnlock()
	if same {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case rank < 0 || rank >= len(c.downSince):
	case ok:
		c.downSince[rank] = time.Time{}
	case c.downSince[rank].IsZero():
		c.downSince[rank] = time.Now()
	}
}

// DownSince returns when this client first failed to reach the server of
// rank, if it has not reached it since; else ok is false.
func (c *Client) DownSince(rank int) (since time.Time, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if rank < 0 || rank >= len(c.downSince) || c.downSince[rank].IsZero() {
		return time.Time{}, false
	}
	return c.downSince[rank], true
}

// refresh rereads the server list and reports whether rank's entry changed.
func (c *Client) refresh(rank int) bool {
	list, err := cluster.ReadList(c.tmpDir)
	if err != nil || rank >= len(list.Servers) {
		return false
	}
	fresh := Server(list.Servers[rank])
	c.mu.Lock()
	defer c.mu.Unlock()
	if rank >= len(c.servers) || c.servers[rank].Instance == fresh.Instance {
		return false
	}
	// Calls still on the old pool fail as unavailable, and retry on the
	// new one (pooled).
	c.pools[rank].Retire(fmt.Sprintf("restarted at %s", fresh.Addr))
	c.servers[rank] = fresh
	c.pools[rank] = c.newPool(fresh)
	return true
}

// replaced reports whether rank's pool is no longer p: another call
// found the server restarted and replaced it.
func (c *Client) replaced(rank int, p *rpc.Pool) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return rank < len(c.pools) && c.pools[rank] != p
}

// TmpDir is the directory the server list was read from.
func (c *Client) TmpDir() string {
	abs, err := filepath.Abs(c.tmpDir)
	if err != nil {
		return c.tmpDir
	}
	return abs
}

// Servers returns the cluster's servers in rank order.
func (c *Client) Servers() []Server {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]Server(nil), c.servers...)
}

// Ping makes one round trip to the server of the given rank and returns its
// duration.
func (c *Client) Ping(ctx context.Context, rank int) (time.Duration, error) {
	conn, err := c.conn(ctx, rank)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if _, err := conn.Call(ctx, wire.MethodPing, nil, nil, nil); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// ServerStatus is one server's answer to Status.
type ServerStatus struct {
	Server
	// Err is why the server did not answer; the other fields but Server
	// and DownSince are then zero.
	Err error
	// DownSince, for a server that could not be reached, is when this
	// client first failed to reach it (Client.DownSince).
	DownSince time.Time
	Size      int
	Clients   uint64 // connections open now, this client's included
	Requests  uint64 // requests served since start
	Uptime    time.Duration
	Version   string
	// IndexWaiting are the ranks of the metadata servers that tag index
	// updates this server acknowledged wait for: its deliveries there
	// fail (down, or cut off from it). Indexed queries that look there
	// wait for them, or fail at their deadline.
	IndexWaiting []int
	// CutsWaiting counts the objects whose shrink or relayout, acknowledged
	// by this metadata server, some data server has not applied yet: the
	// next set dims of each is refused with ErrUnavailable until it has.
	CutsWaiting uint64
	// SlotsMissing are the data slots this data server should hold and
	// cannot, each with why: reads and writes of their data fail, and so
	// do the dims cuts pushed to it until they are back.
	SlotsMissing []string
}

// Status asks every server for its status, concurrently. It returns one
// entry per server in rank order; the error joins the failures, each also in
// its entry's Err.
func (c *Client) Status(ctx context.Context) ([]ServerStatus, error) {
	out := make([]ServerStatus, len(c.Servers()))
	err := batch.FanOut(c.ranks(), func(rank int) error {
		out[rank] = c.status(ctx, rank)
		return out[rank].Err
	})
	return out, err
}

func (c *Client) status(ctx context.Context, rank int) ServerStatus {
	srv, _, _ := c.server(rank)
	st := ServerStatus{Server: srv}
	var rep rpc.Reply
	conn, err := c.conn(ctx, rank)
	if err == nil {
		rep, err = conn.Call(ctx, wire.MethodStatus, nil, nil, nil)
	}
	if err != nil {
		st.Err = err
		if errors.Is(err, pdc.ErrUnavailable) {
			// The call, not only the dial, may be what found it gone.
			c.reached(rank, false)
		}
		st.DownSince, _ = c.DownSince(rank)
		return st
	}
	var ws wire.Status
	if err := ws.Unmarshal(rep.Header); err != nil {
		st.Err = fmt.Errorf("status of %s: %w", st.Label(), err)
		return st
	}
	st.Server = Server(cluster.ServerFromInfo(ws.Server))
	st.Size = int(ws.Size)
	st.Clients = ws.Clients
	st.Requests = ws.Requests
	st.Uptime = time.Duration(ws.UptimeNS)
	st.Version = ws.Version
	for _, r := range ws.IndexWaiting {
		st.IndexWaiting = append(st.IndexWaiting, int(r))
	}
	st.CutsWaiting, st.SlotsMissing = ws.CutsWaiting, ws.SlotsMissing
	return st
}

// Shutdown asks every server to stop cleanly, concurrently, and waits until
// each has closed its connections or ctx ends. The error joins the failures;
// a server already gone fails with pdc.ErrUnavailable.
func (c *Client) Shutdown(ctx context.Context) error {
	return batch.FanOut(c.ranks(), func(rank int) error { return c.ShutdownServer(ctx, rank) })
}

// ShutdownServer asks the server of the given rank to stop cleanly: it
// finishes the requests it is running and closes. It returns once the
// server has closed this client's connection, or ctx ends.
func (c *Client) ShutdownServer(ctx context.Context, rank int) error {
	srv, p, err := c.server(rank)
	if err != nil {
		return err
	}
	conn, err := p.Get(ctx)
	if err != nil {
		return err
	}
	if _, err := conn.Call(ctx, wire.MethodShutdown, nil, nil, nil); err != nil {
		return err
	}
	// The server closes every connection as it stops.
	if err := conn.WaitClosed(ctx); err != nil {
		return fmt.Errorf("%s did not stop: %w", srv.Label(), err)
	}
	return nil
}

// Close closes every connection and stops the goroutine that places
// region-dynamic and region-local transfers; those it has not started
// end with pdc.ErrClosed. Objects this client left open are closed on
// their metadata servers before it returns, so that their container can
// be deleted right after. Idempotent.
func (c *Client) Close() error { return c.CloseContext(context.Background()) }

// CloseContext is Close with the release of this client's opens
// (closeOpens) bounded by ctx too: a command whose deadline has passed, or is about
// to, ends within it instead of giving a server that does not answer
// closeOpensWait more (the servers release the opens anyway once the
// connections end). Idempotent, as Close; the first call decides.
func (c *Client) CloseContext(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.xfer.StopPlacer()
		c.closeOpens(ctx)
		c.mu.Lock()
		for _, p := range c.pools {
			p.Close()
		}
		c.recv.close()
		c.mu.Unlock()
		// Starts never waited end now (their connections are closed), so
		// that they let go of the lanes their writes were copied into.
		// Not under c.mu: the engine holds a lane's lock while it asks
		// for a server's address.
		ctx, cancel := context.WithTimeout(context.Background(), closeDrain)
		c.xfer.Close(ctx)
		cancel()
	})
	return nil
}

// closeDrain bounds Close's collection of unanswered starts, which fail at
// once on closed connections.
const closeDrain = 5 * time.Second

// noteOpens records that a call of method m to rank may leave objects
// open there under this client's session.
func (c *Client) noteOpens(rank int, m wire.Method) {
	if m != wire.MethodObjOpen && m != wire.MethodObjCreate {
		return
	}
	c.opened.Lock()
	defer c.opened.Unlock()
	if c.opened.ranks == nil {
		c.opened.ranks = make(map[int]struct{})
	}
	c.opened.ranks[rank] = struct{}{}
}

// objectBatch is batch.Objects of method m, noting first (noteOpens) the
// ranks it may leave objects open on: a batch of more than one request to
// a server is sent on a connection of its own, not through call.
func (c *Client) objectBatch(ctx context.Context, m wire.Method, keys []uint32, size func(i int) int, build func(idx []int) wire.ObjBatch) ([]wire.ObjResult, error) {
	if m == wire.MethodObjOpen || m == wire.MethodObjCreate {
		for _, k := range keys {
			if rank, err := c.ownerOfKey(k); err == nil {
				c.noteOpens(rank, m)
			}
		}
	}
	return batch.Objects(ctx, (*clusterView)(c), m, keys, size, build)
}

// closeOpens asks every metadata server this client opened objects on to
// release its opens before its connections close. The servers release
// them anyway when its last connection ends, but that comes after Close
// has returned: a container delete right after (another process's, once
// this one has exited) would find the objects still open and be refused.
// A server that does not answer within closeOpensWait ends the session
// as before.
func (c *Client) closeOpens(ctx context.Context) {
	c.opened.Lock()
	ranks := make([]int, 0, len(c.opened.ranks))
	for r := range c.opened.ranks {
		ranks = append(ranks, r)
	}
	c.opened.ranks = nil
	c.opened.Unlock()
	if len(ranks) == 0 || ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, closeOpensWait)
	defer cancel()
	_ = batch.FanOut(ranks, func(rank int) error { return c.calls().ObjCloseAll(ctx, rank) })
}

// closeOpensWait bounds closeOpens.
const closeOpensWait = 2 * time.Second

// clusterView is the client as the transfer engine sees it
// (transfer.Cluster).
type clusterView Client

func (v *clusterView) DataServers() []int { return (*Client)(v).dataServers() }

func (v *clusterView) Call(ctx context.Context, rank int, m wire.Method, req, resp wire.Message) error {
	return (*Client)(v).call(ctx, rank, m, req, resp)
}

func (v *clusterView) Conn(ctx context.Context, rank int) (*rpc.Conn, error) {
	return (*Client)(v).conn(ctx, rank)
}

func (v *clusterView) StartConn(ctx context.Context, rank int) (*rpc.Conn, error) {
	return (*Client)(v).startConn(ctx, rank)
}

func (v *clusterView) Owner(key uint32) (int, error) { return (*Client)(v).ownerOfKey(key) }

func (v *clusterView) Label(rank int) string { return (*Client)(v).label(rank) }

func (v *clusterView) Addr(rank int) (addr, host string, err error) {
	s, _, err := (*Client)(v).server(rank)
	return s.Addr, s.Host, err
}

// calls makes the typed calls of the wire table over this client's
// connections.
func (c *Client) calls() wire.Stub { return wire.Stub{Caller: (*clusterView)(c)} }
