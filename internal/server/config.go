package server

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// Config configures one server process.
type Config struct {
	// Rank of this server, 0 to Size-1.
	Rank int
	// Size is the number of servers in the cluster. Default 1.
	Size int
	// Listen is "host:port" (port 0 picks one) or "unix:/path".
	// Default "127.0.0.1:0".
	Listen string
	// Advertise is the address published for others to dial: "host:port",
	// or "host" with the bound port. Default: the bound address, or for a
	// wildcard (0.0.0.0, ::) this host's address on the route to rank 0
	// (cluster.AdvertiseAddr).
	Advertise string
	// Insecure lets a server that listens beyond loopback run without a
	// cluster secret. Without it such a server refuses to start.
	Insecure bool
	// TmpDir holds the server list, rendezvous record and secret. Required.
	TmpDir string
	// DataDir holds stored data. Required.
	DataDir string
	// Roles of this server. Default both.
	Roles wire.Role
	// AbandonStores are the ranks whose metadata stores a full start may
	// go on without, deliberately, if no server finds them: the cluster
	// then forgets them (slots.CheckStores). A store that is found is
	// kept whatever this says.
	AbandonStores []int
	// AbandonSlots are the data slots a start may start empty,
	// deliberately, if they are missing (no server finds their data):
	// what they held reads as never written, and their copies found
	// (out of date) are set aside (slots.Plan). A slot that is held is
	// kept whatever this says.
	AbandonSlots []int
	// SecretFile, if set, must hold the cluster secret. If empty, the
	// tmpdir's secret file is used when it exists.
	SecretFile string
	// Limits bound frame lengths from clients.
	Limits wire.Limits
	// PayloadBudget bounds the bytes of request payloads held in memory
	// at once, being received or waiting to be stored; a payload that
	// does not fit waits (rpc.ServerConfig.PayloadBudget). Default 1 GiB;
	// at least Limits.MaxPayload.
	PayloadBudget int64
	// MaxConns bounds the connections open at once, MaxConnsPerPeer those
	// from one address, MaxHandshakes those not yet authenticated (see
	// rpc.ServerConfig). MaxConns and MaxConnsPerPeer bound the DTL side
	// channels (pull, shm) too, each on its own. Defaults 4096 (or half
	// the process's descriptor limit, if lower), 1024 and 256.
	MaxConns, MaxConnsPerPeer, MaxHandshakes int
	// HandshakeTimeout bounds a new connection's handshake. Default 10s.
	HandshakeTimeout time.Duration
	// StallTimeout closes a connection whose peer sends nothing of a
	// frame it has begun, or takes nothing of one sent to it, for this
	// long. Default 60s.
	StallTimeout time.Duration
	// MinRecvRate is the floor, in bytes per second, below which a frame
	// may not arrive for longer than StallTimeout. Default 64 KiB/s;
	// negative: no floor.
	MinRecvRate int64
	// StartupTimeout bounds the rendezvous. Default 60s.
	StartupTimeout time.Duration
	// ShutdownTimeout bounds the wait for running requests at shutdown.
	// Default 10s.
	ShutdownTimeout time.Duration
	// Durability of acknowledged metadata changes.
	Durability metastore.Durability
	// NoIndex turns the DART tag index off; NoSuffixTree keeps it without
	// DART's suffix-tree mode (infix queries then scan).
	NoIndex, NoSuffixTree bool
	// DataBudget bounds the bytes of region payloads a data server holds
	// in memory: writes not yet stored, reads not yet collected. Default
	// 1 GiB.
	DataBudget int64
	// Host is the host name this server reports, which clients compare
	// with theirs to find the servers on their node. Default $PDC_HOST,
	// else the kernel's host name.
	Host string
	// StageProducerDir is the producer dir whose produced files this
	// server serves to consumers on other hosts ("": none).
	StageProducerDir string
	// MetricsAddr, if set, is where the server serves its Prometheus
	// metrics over HTTP (/metrics): HOST:PORT, or :PORT for loopback.
	// The address bound is recorded in the tmpdir (cluster.MetricsAddr).
	MetricsAddr string
	// Version is the build version reported by status.
	Version string
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// SlowRequest, if set, logs each request that takes at least this
	// long as a warning (rpc.ServerConfig.SlowRequest).
	SlowRequest time.Duration
	// Ready, if set, is called once the cluster is complete.
	Ready func(self cluster.Server, list *cluster.List)
	// FS holds the stores and the cluster files. Default the operating
	// system's; tests give one that fails or crashes.
	FS vfs.FS
}

// Validate checks c and fills in defaults. Run calls it.
func (c *Config) Validate() error {
	if c.Size == 0 {
		c.Size = 1
	}
	if c.Size < 1 || c.Size > 1<<16 {
		return fmt.Errorf("cluster size %d out of range 1..65536: %w", c.Size, pdc.ErrInvalid)
	}
	if c.Rank < 0 || c.Rank >= c.Size {
		return fmt.Errorf("rank %d out of range for a cluster of %d servers (0..%d): %w", c.Rank, c.Size, c.Size-1, pdc.ErrInvalid)
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	if c.Advertise != "" {
		if strings.HasPrefix(c.Listen, "unix:") {
			return fmt.Errorf("--advertise %q: the server listens on a Unix socket (%s), which is reached by its path: %w", c.Advertise, c.Listen, pdc.ErrInvalid)
		}
		if _, _, err := cluster.ParseAdvertise(c.Advertise); err != nil {
			return err
		}
	}
	if c.TmpDir == "" {
		return fmt.Errorf("no tmpdir given: %w", pdc.ErrInvalid)
	}
	if c.DataDir == "" {
		return fmt.Errorf("no data dir given: %w", pdc.ErrInvalid)
	}
	for _, r := range c.AbandonStores {
		if r < 0 || r >= 1<<30 {
			return fmt.Errorf("--abandon-store %d: want the rank of a metadata store (meta-RANK): %w", r, pdc.ErrInvalid)
		}
	}
	for _, s := range c.AbandonSlots {
		if s < 0 || s >= 1<<20 {
			return fmt.Errorf("--abandon-slot %d: want a data slot (data-SLOT under a data dir): %w", s, pdc.ErrInvalid)
		}
	}
	if c.Roles == 0 {
		c.Roles = wire.RoleBoth
	}
	if c.Roles&^wire.RoleBoth != 0 {
		return fmt.Errorf("unknown roles %#x: %w", uint32(c.Roles), pdc.ErrInvalid)
	}
	if c.StartupTimeout == 0 {
		c.StartupTimeout = 60 * time.Second
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	c.Limits = c.Limits.WithDefaults()
	if c.PayloadBudget == 0 {
		c.PayloadBudget = rpc.DefaultPayloadBudget
	}
	if c.PayloadBudget < 0 || uint64(c.PayloadBudget) < c.Limits.MaxPayload {
		return fmt.Errorf("payload budget of %d bytes is below the largest payload accepted (%d bytes): lower the one or raise the other: %w",
			c.PayloadBudget, c.Limits.MaxPayload, pdc.ErrInvalid)
	}
	if c.MaxConns == 0 {
		c.MaxConns = defaultMaxConns()
	}
	if c.MaxConnsPerPeer == 0 {
		c.MaxConnsPerPeer = min(rpc.DefaultMaxConnsPerPeer, c.MaxConns)
	}
	if c.MaxHandshakes == 0 {
		c.MaxHandshakes = min(rpc.DefaultMaxHandshakes, c.MaxConns)
	}
	if c.MaxConns < 1 || c.MaxConnsPerPeer < 1 || c.MaxHandshakes < 1 {
		return fmt.Errorf("connection limits %d total, %d per peer, %d in handshake: each must be at least 1: %w",
			c.MaxConns, c.MaxConnsPerPeer, c.MaxHandshakes, pdc.ErrInvalid)
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = 60 * time.Second
	}
	if c.HandshakeTimeout < 0 || c.StallTimeout < 0 {
		return fmt.Errorf("handshake timeout %v, stall timeout %v: neither may be negative: %w", c.HandshakeTimeout, c.StallTimeout, pdc.ErrInvalid)
	}
	if c.MinRecvRate == 0 {
		c.MinRecvRate = rpc.DefaultMinRecvRate
	}
	return nil
}

// defaultMaxConns is rpc.DefaultMaxConns, or half the descriptors the
// process may open if that is less: the rest are for data files, the
// metadata store and the DTL side channels.
func defaultMaxConns() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		return rpc.DefaultMaxConns
	}
	return int(max(min(uint64(rpc.DefaultMaxConns), lim.Cur/2), 16))
}
