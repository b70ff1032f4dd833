package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// File names in the tmpdir.
const (
	// ListFile is the server list clients read.
	ListFile = "pdc_server_list"
	// Rank0File tells starting servers where rank 0 listens.
	Rank0File = "pdc_rank0"
	// SecretFile holds the cluster secret that `pdc up` makes.
	SecretFile = "pdc_secret"

	listMagic    = "pdc-server-list"
	listVersion  = 1
	rank0Magic   = "pdc-rank0"
	rank0Version = 1
)

// Roles is what a server does: metadata, data or both.
type Roles = wire.Role

// ParseRoles parses "metadata", "data", "both" or "metadata,data".
func ParseRoles(s string) (Roles, error) {
	var r Roles
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case "metadata", "meta":
			r |= wire.RoleMetadata
		case "data":
			r |= wire.RoleData
		case "both":
			r |= wire.RoleBoth
		default:
			return 0, fmt.Errorf("unknown role %q (want metadata, data or both): %w", p, pdc.ErrInvalid)
		}
	}
	return r, nil
}

// RoleString formats roles the way ParseRoles reads them.
func RoleString(r Roles) string {
	switch r {
	case wire.RoleBoth:
		return "both"
	case wire.RoleMetadata:
		return "metadata"
	case wire.RoleData:
		return "data"
	}
	return fmt.Sprintf("roles(%d)", uint32(r))
}

// Server is one member of a cluster.
type Server struct {
	Rank     int       `json:"rank"`
	Addr     string    `json:"addr"`
	Roles    string    `json:"roles"`
	PID      int       `json:"pid"`
	Host     string    `json:"host"`
	Instance string    `json:"instance"`
	Start    time.Time `json:"start"`
	StageDir string    `json:"stage_dir,omitempty"`
	// MetaStore is the id of the metadata store the server serves ("" if
	// it holds no metadata, or is of a build from before store ids): a
	// rank that restarts while the cluster serves must open that store
	// again, not an empty one on a node that does not have it.
	MetaStore string `json:"meta_store,omitempty"`
}

// Label names the server in messages: "rank 2 (127.0.0.1:4000)".
func (s Server) Label() string { return fmt.Sprintf("rank %d (%s)", s.Rank, s.Addr) }

// Info converts s to its wire form.
func (s Server) Info() wire.ServerInfo {
	r, _ := ParseRoles(s.Roles)
	return wire.ServerInfo{Rank: uint32(s.Rank), Addr: s.Addr, Roles: r, PID: uint32(s.PID), Host: s.Host,
		Instance: s.Instance, StartUnix: s.Start.UnixNano(), StageDir: s.StageDir, MetaStore: s.MetaStore}
}

// ServerFromInfo converts a wire ServerInfo.
func ServerFromInfo(i wire.ServerInfo) Server {
	return Server{Rank: int(i.Rank), Addr: i.Addr, Roles: RoleString(i.Roles), PID: int(i.PID), Host: i.Host,
		Instance: i.Instance, Start: time.Unix(0, i.StartUnix), StageDir: i.StageDir, MetaStore: i.MetaStore}
}

// List is a complete cluster: Size servers, ranks 0 to Size-1, in order.
type List struct {
	Size    int       `json:"size"`
	Created time.Time `json:"created"`
	Servers []Server  `json:"servers"`
}

// Validate checks that l names every rank exactly once, in order.
func (l *List) Validate() error {
	if l.Size < 1 || len(l.Servers) != l.Size {
		return fmt.Errorf("server list has %d servers for size %d: %w", len(l.Servers), l.Size, pdc.ErrInvalid)
	}
	for i, s := range l.Servers {
		if s.Rank != i {
			return fmt.Errorf("server list entry %d has rank %d: %w", i, s.Rank, pdc.ErrInvalid)
		}
		if s.Addr == "" {
			return fmt.Errorf("server list: rank %d has no address: %w", i, pdc.ErrInvalid)
		}
		if _, err := ParseRoles(s.Roles); err != nil {
			return fmt.Errorf("server list: rank %d: %w", i, err)
		}
	}
	return nil
}

// Dir is a cluster's tmpdir, where its server list and rendezvous record
// are, on a file system (nil: the operating system's).
type Dir struct {
	Path string
	FS   vfs.FS
}

// WriteList validates l and writes it to dir/ListFile atomically.
func WriteList(dir string, l *List) error { return Dir{Path: dir}.WriteList(l) }

// WriteList validates l and writes it to ListFile atomically.
func (d Dir) WriteList(l *List) error {
	if err := l.Validate(); err != nil {
		return err
	}
	body, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFS(vfs.OrDefault(d.FS), filepath.Join(d.Path, ListFile), frameFile(listMagic, listVersion, append(body, '\n')), 0o600)
}

// ReadList reads dir/ListFile. A missing list is pdc.ErrNotFound with a
// message that says how to start servers.
func ReadList(dir string) (*List, error) { return Dir{Path: dir}.ReadList() }

// ReadList reads ListFile, as the function ReadList does.
func (d Dir) ReadList() (*List, error) {
	path := filepath.Join(d.Path, ListFile)
	data, err := vfs.ReadFile(vfs.OrDefault(d.FS), path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no server list at %s: no pdc servers are running with this tmpdir (start them with `pdc up`, or set PDC_TMPDIR): %w", path, pdc.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read server list: %w", err)
	}
	return parseList(path, data)
}

// parseList decodes and validates the bytes of a server list file.
func parseList(path string, data []byte) (*List, error) {
	body, err := unframeFile(path, listMagic, listVersion, data)
	if err != nil {
		return nil, err
	}
	var l List
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("%s: %v: %w", path, err, pdc.ErrProtocol)
	}
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &l, nil
}

// Rendezvous is what rank 0 publishes so that the others can register.
type Rendezvous struct {
	Addr     string `json:"addr"`
	Instance string `json:"instance"`
	Size     int    `json:"size"`
	PID      int    `json:"pid"`
}

// WriteRendezvous writes dir/Rank0File atomically.
func WriteRendezvous(dir string, r Rendezvous) error { return Dir{Path: dir}.WriteRendezvous(r) }

// WriteRendezvous writes Rank0File atomically.
func (d Dir) WriteRendezvous(r Rendezvous) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return atomicfile.WriteFS(vfs.OrDefault(d.FS), filepath.Join(d.Path, Rank0File), frameFile(rank0Magic, rank0Version, append(body, '\n')), 0o600)
}

// ReadRendezvous reads dir/Rank0File; fs.ErrNotExist when there is none.
func ReadRendezvous(dir string) (Rendezvous, error) { return Dir{Path: dir}.ReadRendezvous() }

// ReadRendezvous reads Rank0File; fs.ErrNotExist when there is none.
func (d Dir) ReadRendezvous() (Rendezvous, error) {
	path := filepath.Join(d.Path, Rank0File)
	data, err := vfs.ReadFile(vfs.OrDefault(d.FS), path)
	if err != nil {
		return Rendezvous{}, err
	}
	return parseRendezvous(path, data)
}

// parseRendezvous decodes the bytes of a rendezvous record.
func parseRendezvous(path string, data []byte) (Rendezvous, error) {
	body, err := unframeFile(path, rank0Magic, rank0Version, data)
	if err != nil {
		return Rendezvous{}, err
	}
	var r Rendezvous
	if err := json.Unmarshal(body, &r); err != nil {
		return Rendezvous{}, fmt.Errorf("%s: %v: %w", path, err, pdc.ErrProtocol)
	}
	return r, nil
}

// RemoveFiles removes the list and the rendezvous record from dir.
func RemoveFiles(dir string) error { return Dir{Path: dir}.RemoveFiles() }

// RemoveFiles removes the list and the rendezvous record.
func (d Dir) RemoveFiles() error {
	fsys := vfs.OrDefault(d.FS)
	var errs []error
	for _, name := range []string{ListFile, Rank0File} {
		if err := fsys.Remove(filepath.Join(d.Path, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return atomicfile.SyncDirFS(fsys, d.Path)
	}
	return errors.Join(errs...)
}

// Alive reports whether s is still the server that answers at its address:
// something answers there and announces s's instance.
func Alive(ctx context.Context, s Server) bool {
	h, err := rpc.Probe(ctx, s.Addr)
	return err == nil && h.Instance == s.Instance
}

// LiveServers probes every server of l concurrently and returns those that
// are alive, in rank order.
func LiveServers(ctx context.Context, l *List) []Server {
	var mu sync.Mutex
	var live []Server
	var wg sync.WaitGroup
	for _, s := range l.Servers {
		wg.Go(func() {
			if Alive(ctx, s) {
				mu.Lock()
				live = append(live, s)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(live, func(a, b Server) int { return a.Rank - b.Rank })
	return live
}

// CheckStale looks for a server list in dir. No list: nil, nil. A list whose
// servers all are gone: that stale list, nil; the caller replaces it. Any
// member still alive: an error naming it, because another cluster uses dir.
func CheckStale(ctx context.Context, dir string) (*List, error) {
	l, live := Probe(ctx, dir)
	if l == nil {
		return nil, nil
	}
	if len(live) > 0 {
		return nil, RunningError(dir, l, live)
	}
	return l, nil
}

// Probe reads dir's server list and probes its servers: the list (nil if
// there is none, or &List{} for a torn or foreign file, which cannot belong
// to a live cluster of ours: the list is written atomically) and those that
// answer, in rank order.
func Probe(ctx context.Context, dir string) (*List, []Server) {
	l, err := ReadList(dir)
	if errors.Is(err, pdc.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return &List{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return l, LiveServers(ctx, l)
}

// RunningError says that the cluster of l still runs in dir (live are its
// servers that answer) and what to do about it.
func RunningError(dir string, l *List, live []Server) error {
	s := live[0]
	of := fmt.Sprintf("%d of %d servers answer", len(live), l.Size)
	if l.Size == 1 {
		of = "its 1 server answers" // not "1 of 1 servers answer"
	}
	return fmt.Errorf("a pdc cluster is already running in %s (%s; %s, pid %d on %s): stop it with `pdc down --tmpdir %s`, restart the servers that do not answer with `pdc up --restart-dead --tmpdir %s`, or use another tmpdir: %w",
		dir, of, s.Label(), s.PID, s.Host, dir, dir, pdc.ErrExists)
}
