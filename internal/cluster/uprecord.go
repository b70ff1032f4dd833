package cluster

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
)

const (
	// UpFile records how `pdc up` started the cluster, so that
	// `pdc up --restart-dead` can start a dead server again the same way.
	UpFile = "pdc_up"

	upMagic   = "pdc-up"
	upVersion = 1
)

// UpRecord is what StartLocal needs to start any rank of a cluster again:
// its LocalConfig without the binary and the tmpdir, with each rank's own
// arguments written out.
type UpRecord struct {
	Size       int        `json:"size"`
	DataDir    string     `json:"datadir"`
	Unix       bool       `json:"unix,omitempty"`
	Listen     string     `json:"listen,omitempty"`
	Roles      string     `json:"roles"`
	SecretFile string     `json:"secret_file,omitempty"`
	Args       []string   `json:"args,omitempty"`
	RankArgs   [][]string `json:"rank_args"`
	TimeoutNS  int64      `json:"timeout_ns"`
}

// Record is what UpFile records of cfg.
func (cfg LocalConfig) Record() UpRecord {
	l := UpRecord{Size: cfg.N, DataDir: cfg.DataDir, Unix: cfg.Unix, Listen: cfg.Listen, Roles: cfg.Roles, SecretFile: cfg.SecretFile,
		Args: cfg.Args, TimeoutNS: int64(cfg.Timeout)}
	for r := range cfg.N {
		var a []string
		if cfg.RankArgs != nil {
			a = cfg.RankArgs(r)
		}
		l.RankArgs = append(l.RankArgs, a)
	}
	return l
}

// Local is the LocalConfig l records, to run binary in tmpdir.
func (l UpRecord) Local(binary, tmpdir string) LocalConfig {
	return LocalConfig{Binary: binary, N: l.Size, TmpDir: tmpdir, DataDir: l.DataDir, Unix: l.Unix, Listen: l.Listen, Roles: l.Roles,
		SecretFile: l.SecretFile, Args: l.Args, Timeout: time.Duration(l.TimeoutNS),
		RankArgs: func(rank int) []string { return l.RankArgs[rank] }}
}

// WriteUpRecord writes tmpdir/UpFile atomically.
func WriteUpRecord(tmpdir string, l UpRecord) error {
	body, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(tmpdir, UpFile), frameFile(upMagic, upVersion, append(body, '\n')), 0o600)
}

// ReadUpRecord reads tmpdir/UpFile; pdc.ErrNotFound, saying so, when
// there is none.
func ReadUpRecord(tmpdir string) (UpRecord, error) {
	path := filepath.Join(tmpdir, UpFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return UpRecord{}, fmt.Errorf("no record of pdc up at %s (the cluster was not started by `pdc up`): %w", path, pdc.ErrNotFound)
	}
	if err != nil {
		return UpRecord{}, fmt.Errorf("read the record of pdc up: %w", err)
	}
	body, err := unframeFile(path, upMagic, upVersion, data)
	if err != nil {
		return UpRecord{}, err
	}
	var l UpRecord
	if err := json.Unmarshal(body, &l); err != nil {
		return UpRecord{}, fmt.Errorf("%s: %v: %w", path, err, pdc.ErrProtocol)
	}
	if l.Size < 1 || len(l.RankArgs) != l.Size || l.DataDir == "" || l.TimeoutNS < 0 {
		return UpRecord{}, fmt.Errorf("%s: %d servers with arguments for %d: %w", path, l.Size, len(l.RankArgs), pdc.ErrProtocol)
	}
	return l, nil
}
