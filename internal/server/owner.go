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
