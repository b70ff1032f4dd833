package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/vfs"
)

// Restored says what RestoreCheckpoint did to one metadata store.
type Restored struct {
	Rank int
	// Store is the store's dir; From the checkpoint it now holds.
	Store, From string
	// Previous is where the store it replaced is kept ("" if there was
	// none).
	Previous string
	Files    int
	Bytes    int64
}

// checkpointsDir is where the servers of dataDir write their checkpoints,
// one dir per rank (Config.CheckpointDir).
func checkpointsDir(dataDir string) string { return filepath.Join(dataDir, "checkpoints") }

// RestoreCheckpoint puts the checkpoint called name back as the metadata
// stores of data dir dataDir: every meta-R there is replaced by
// checkpoints/meta-R/name. It refuses, changing nothing, while a server
// runs on the data dir (naming its rank and pid), when some store there
// has no checkpoint of that name (restoring the others alone would mix
// metadata of two times), or when a checkpoint fails its manifest's
// checks (metastore.VerifyCheckpoint). The stores are replaced together:
// all are copied and checked first, and swapped in only then; each store
// replaced is kept beside it (metastore.SwapRestored). Region data is not
// in checkpoints: it stays as it is.
func RestoreCheckpoint(fsys vfs.FS, dataDir, name string) ([]Restored, error) {
	fsys = vfs.OrDefault(fsys)
	if err := metastore.ValidCheckpointName(name); err != nil {
		return nil, err
	}
	if st, err := fsys.Stat(dataDir); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("data dir %s is not a directory: %w", dataDir, pdc.ErrInvalid)
	}
	stores, locks, err := scanDataDir(fsys, dataDir)
	if err != nil {
		return nil, err
	}
	cpRanks, err := checkpointRanks(fsys, dataDir, name)
	if err != nil {
		return nil, err
	}
	if len(cpRanks) == 0 {
		return nil, fmt.Errorf("data dir %s has no checkpoint %q (none of %s holds one; pdc checkpoint ls --datadir %s lists them): %w",
			dataDir, name, filepath.Join(checkpointsDir(dataDir), "meta-*", name), dataDir, pdc.ErrNotFound)
	}
	for _, r := range stores {
		if !slices.Contains(cpRanks, r) {
			return nil, fmt.Errorf("data dir %s: metadata store meta-%d has no checkpoint %q (no %s): restoring the other stores alone would mix metadata of two times; "+
				"move meta-%d out of the data dir first if it is to go: %w",
				dataDir, r, name, filepath.Join(checkpointsDir(dataDir), fmt.Sprintf("meta-%d", r), name), r, pdc.ErrInvalid)
		}
	}

	// No server may run on the data dir meanwhile, of any rank: each
	// holds its lock (lockDataDir) while it runs, and a server that
	// starts while these are held is refused.
	for _, r := range cpRanks {
		if l, _ := ownerPaths(dataDir, r); !slices.Contains(locks, l) {
			locks = append(locks, l)
		}
	}
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for _, l := range locks {
		c, err := fsys.Lock(l)
		if errors.Is(err, fs.ErrExist) {
			return nil, runningOn(fsys, dataDir, l)
		}
		if err != nil {
			return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
		}
		held = append(held, c)
	}

	var out []Restored
	var prepared []string
	abort := func() {
		for _, s := range prepared {
			_ = metastore.AbortRestore(fsys, s)
		}
	}
	// Every checkpoint is verified before any copy is made.
	for _, r := range cpRanks {
		cp := filepath.Join(checkpointsDir(dataDir), fmt.Sprintf("meta-%d", r), name)
		m, err := metastore.VerifyCheckpoint(fsys, cp)
		if err != nil {
			return nil, err
		}
		if m.Name != name || (m.Store != "" && m.Rank != r) {
			return nil, fmt.Errorf("checkpoint %s: its manifest names checkpoint %q of rank %d: %w", cp, m.Name, m.Rank, pdc.ErrCorrupt)
		}
	}
	for _, r := range cpRanks {
		cp := filepath.Join(checkpointsDir(dataDir), fmt.Sprintf("meta-%d", r), name)
		store := filepath.Join(dataDir, fmt.Sprintf("meta-%d", r))
		prepared = append(prepared, store)
		m, err := metastore.PrepareRestore(fsys, cp, store)
		if err != nil {
			abort()
			return nil, err
		}
		res := Restored{Rank: r, Store: store, From: cp, Files: len(m.Files)}
		for _, f := range m.Files {
			res.Bytes += f.Size
		}
		out = append(out, res)
	}
	for i := range out {
		prev, err := metastore.SwapRestored(fsys, out[i].Store)
		out[i].Previous = prev
		if err != nil {
			return out[:i], err
		}
	}
	return out, nil
}

// scanDataDir returns the ranks of the metadata stores in dataDir and
// the lock files of the servers that ran there.
func scanDataDir(fsys vfs.FS, dataDir string) (stores []int, locks []string, err error) {
	names, err := fsys.List(dataDir)
	if err != nil {
		return nil, nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	for _, n := range names {
		if r, ok := rankOf(n, "meta-"); ok {
			if st, err := fsys.Stat(filepath.Join(dataDir, n)); err == nil && st.IsDir() {
				stores = append(stores, r)
			}
		}
		if b, ok := strings.CutSuffix(n, ".lock"); ok {
			if _, ok := rankOf(b, "owner-"); ok {
				locks = append(locks, filepath.Join(dataDir, n))
			}
		}
	}
	return stores, locks, nil
}

// checkpointRanks returns the ranks that have a checkpoint called name
// in dataDir, in order.
func checkpointRanks(fsys vfs.FS, dataDir, name string) ([]int, error) {
	names, err := fsys.List(checkpointsDir(dataDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	var ranks []int
	for _, n := range names {
		r, ok := rankOf(n, "meta-")
		if !ok {
			continue
		}
		if _, err := fsys.Stat(filepath.Join(checkpointsDir(dataDir), n, name)); err == nil {
			ranks = append(ranks, r)
		}
	}
	slices.Sort(ranks)
	return ranks, nil
}

// rankOf parses name as prefix followed by a rank, nothing else.
func rankOf(name, prefix string) (int, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	r, err := strconv.Atoi(s)
	if err != nil || r < 0 || strconv.Itoa(r) != s {
		return 0, false
	}
	return r, true
}

// runningOn says which server holds the lock at lockPath in dataDir.
func runningOn(fsys vfs.FS, dataDir, lockPath string) error {
	rec := strings.TrimSuffix(lockPath, ".lock")
	o, ok := readOwner(fsys, rec)
	if !ok {
		return fmt.Errorf("data dir %s: a server runs on it (it holds %s): stop it first: %w", dataDir, lockPath, pdc.ErrExists)
	}
	return fmt.Errorf("data dir %s: rank %d's server runs on it, pid %d on %s, of the cluster in %s (since %s): stop the cluster first (`pdc down --tmpdir %s`): %w",
		dataDir, o.Rank, o.PID, o.Host, o.TmpDir, o.Started, o.TmpDir, pdc.ErrExists)
}

// Checkpoints lists the checkpoints in dataDir: for each name, the ranks
// that have one of that name, and whether each has a manifest (the
// checkpoint is whole; it is not read).
func Checkpoints(fsys vfs.FS, dataDir string) (map[string][]CheckpointInfo, error) {
	fsys = vfs.OrDefault(fsys)
	names, err := fsys.List(checkpointsDir(dataDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	out := map[string][]CheckpointInfo{}
	for _, n := range names {
		r, ok := rankOf(n, "meta-")
		if !ok {
			continue
		}
		dir := filepath.Join(checkpointsDir(dataDir), n)
		cps, err := fsys.List(dir)
		if err != nil {
			return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
		}
		for _, cp := range cps {
			_, err := fsys.Stat(filepath.Join(dir, cp, metastore.ManifestFile))
			out[cp] = append(out[cp], CheckpointInfo{Rank: r, Path: filepath.Join(dir, cp), Whole: err == nil})
		}
	}
	for _, v := range out {
		slices.SortFunc(v, func(a, b CheckpointInfo) int { return a.Rank - b.Rank })
	}
	return out, nil
}

// CheckpointInfo is one rank's checkpoint of some name.
type CheckpointInfo struct {
	Rank  int
	Path  string
	Whole bool // it has its manifest
}
