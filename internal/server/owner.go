package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/vfs"
	"golang.org/x/sys/unix"
)

// ownerVersion is the version of the owner file's format.
const ownerVersion = 1

// owner is what a server records beside its lock on its rank's share of
// the data dir: who to name when another cluster's server finds the lock
// held (two clusters pointed at one data dir).
type owner struct {
	Version int    `json:"version"`
	PID     int    `json:"pid"`
	Rank    int    `json:"rank"`
	TmpDir  string `json:"tmpdir"`
	Host    string `json:"host"`
	Started string `json:"started"` // RFC 3339
}

func ownerPaths(dataDir string, rank int) (lock, rec string) {
	base := filepath.Join(dataDir, fmt.Sprintf("owner-%d", rank))
	return base + ".lock", base
}

// lockDataDir takes this rank's lock on the data dir, held until the
// server ends, and records the owner beside it. A lock held already is
// an error naming the cluster that holds it.
func (p *proc) lockDataDir() error {
	cfg := p.cfg
	fsys := vfs.OrDefault(cfg.FS)
	lockPath, recPath := ownerPaths(cfg.DataDir, cfg.Rank)
	l, err := fsys.Lock(lockPath)
	if errors.Is(err, fs.ErrExist) && p.awaitPredecessor(fsys, recPath) {
		l, err = fsys.Lock(lockPath)
	}
	if err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
		}
		return inUseError(fsys, cfg.DataDir, cfg.Rank, recPath)
	}
	p.onClose(func() { l.Close() })
	tmpdir, _ := filepath.Abs(cfg.TmpDir)
	host, _ := os.Hostname()
	if cfg.Host != "" {
		host = cfg.Host
	}
	b, err := json.Marshal(owner{Version: ownerVersion, PID: os.Getpid(), Rank: cfg.Rank, TmpDir: tmpdir, Host: host,
		Started: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFS(fsys, recPath, b, 0o600); err != nil {
		return fmt.Errorf("data dir %s: record its owner: %w", cfg.DataDir, err)
	}
	return nil
}

// predecessorWait bounds how long a server waits for the previous
// server of its rank to finish exiting.
const predecessorWait = 10 * time.Second

// awaitPredecessor waits, if the lock on this rank's share is held by the
// previous server of this rank and cluster on this host, for that process
// to end, and reports whether it did. A server killed with -9 holds its
// lock until the kernel has taken down its address space, which for one
// with large mappings takes a while: a restart of a dead rank right after
// the kill (pdc up --restart-dead) found the lock held and failed. The
// wait is on the process itself (a pidfd), not a retry loop.
func (p *proc) awaitPredecessor(fsys vfs.FS, recPath string) bool {
	var o owner
	b, err := vfs.ReadFile(fsys, recPath)
	if err != nil || json.Unmarshal(b, &o) != nil || o.Version != ownerVersion {
		return false
	}
	tmpdir, _ := filepath.Abs(p.cfg.TmpDir)
	host, _ := os.Hostname()
	if p.cfg.Host != "" {
		host = p.cfg.Host
	}
	if o.Rank != p.cfg.Rank || o.TmpDir != tmpdir || o.Host != host || o.PID <= 0 || o.PID == os.Getpid() {
		return false
	}
	fd, err := unix.PidfdOpen(o.PID, 0)
	if err == unix.ESRCH {
		return true // gone since the lock was tried
	}
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	p.log.Info("waiting for the previous server of this rank to exit", "pid", o.PID, "up_to", predecessorWait.String())
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(predecessorWait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// inUseError says which cluster holds rank's share of dataDir, as far as
// its owner file tells.
func inUseError(fsys vfs.FS, dataDir string, rank int, recPath string) error {
	var o owner
	b, err := vfs.ReadFile(fsys, recPath)
	if err == nil {
		err = json.Unmarshal(b, &o)
	}
	if err != nil || o.Version != ownerVersion {
		return fmt.Errorf("data dir %s: rank %d's share is in use by another server (its owner file %s: %v): %w", dataDir, rank, recPath, err, pdc.ErrExists)
	}
	return fmt.Errorf("data dir %s: rank %d's share is in use by pid %d on %s, rank %d of the cluster in %s (since %s); stop it with `pdc down --tmpdir %s`, or give this cluster another --datadir: %w",
		dataDir, rank, o.PID, o.Host, o.Rank, o.TmpDir, o.Started, o.TmpDir, pdc.ErrExists)
}
