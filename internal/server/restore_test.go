package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/vfs"
)

// restoreFixture makes, on an in-memory file system, a data dir with the
// stores of ranks and a checkpoint "saved" of each, taken before the
// store changed again.
func restoreFixture(t *testing.T, ranks ...int) (vfs.FS, string) {
	t.Helper()
	fsys := vfs.NewMem()
	data := "/data"
	for _, r := range ranks {
		dir := filepath.Join(data, fmt.Sprintf("meta-%d", r))
		st, err := metastore.Open(metastore.Options{Dir: dir, FS: fsys, LogBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := metastore.EnsureIdentity(fsys, dir, r); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Checkpoint(context.Background(), filepath.Join(checkpointsDir(data), fmt.Sprintf("meta-%d", r)), "saved"); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return fsys, data
}

// A restore refuses, changing nothing, a data dir with a store that has
// no checkpoint of the name, and one a server holds; cut short between
// its renames, it completes when run again.
func TestRestoreCheckpointRefusesAndResumes(t *testing.T) {
	t.Run("a store without the checkpoint", func(t *testing.T) {
		fsys, data := restoreFixture(t, 0, 1)
		if err := fsys.RemoveAll(filepath.Join(checkpointsDir(data), "meta-1", "saved")); err != nil {
			t.Fatal(err)
		}
		_, err := RestoreCheckpoint(fsys, data, "saved")
		if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "meta-1 has no checkpoint") {
			t.Fatalf("restore with meta-1 lacking the checkpoint: %v", err)
		}
		if _, err := fsys.Stat(filepath.Join(data, "meta-0"+metastore.RestoreSuffix)); err == nil {
			t.Fatal("the refused restore made a copy")
		}
	})
	t.Run("no such checkpoint", func(t *testing.T) {
		fsys, data := restoreFixture(t, 0)
		if _, err := RestoreCheckpoint(fsys, data, "other"); !errors.Is(err, pdc.ErrNotFound) {
			t.Fatalf("restore of a checkpoint nobody took: %v", err)
		}
	})
	t.Run("a server holds the data dir", func(t *testing.T) {
		fsys, data := restoreFixture(t, 0, 1)
		p := &proc{cfg: Config{DataDir: data, Rank: 3, TmpDir: "/tmp/c", Host: "node-a", FS: fsys}, log: slog.New(slog.DiscardHandler)}
		if err := p.lockDataDir(context.Background()); err != nil {
			t.Fatal(err)
		}
		p.joined = true // as a running server: its files stay
		_, err := RestoreCheckpoint(fsys, data, "saved")
		p.close()
		if !errors.Is(err, pdc.ErrExists) || !strings.Contains(err.Error(), "rank 3's server runs on it") {
			t.Fatalf("restore while rank 3 runs on the data dir: %v", err)
		}
		if _, err := RestoreCheckpoint(fsys, data, "saved"); err != nil {
			t.Fatalf("restore once it stopped: %v", err)
		}
	})
	t.Run("cut short between its renames", func(t *testing.T) {
		fsys, data := restoreFixture(t, 0)
		store := filepath.Join(data, "meta-0")
		if _, err := metastore.PrepareRestore(fsys, filepath.Join(checkpointsDir(data), "meta-0", "saved"), store); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Rename(store, store+metastore.PreviousSuffix+"x"); err != nil {
			t.Fatal(err)
		}
		done, err := RestoreCheckpoint(fsys, data, "saved")
		if err != nil || len(done) != 1 || done[0].Previous != "" {
			t.Fatalf("restore run again: %+v, %v", done, err)
		}
		if _, err := metastore.VerifyCheckpoint(fsys, filepath.Join(checkpointsDir(data), "meta-0", "saved")); err != nil {
			t.Fatal(err)
		}
		if id, err := metastore.ReadIdentity(fsys, store); err != nil || id.Rank != 0 {
			t.Fatalf("the restored store's identity: %+v, %v", id, err)
		}
	})
}
