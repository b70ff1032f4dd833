package metastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
)

// A checkpoint whose directory cannot be written (full, failing) fails
// with the error, at once, and the store goes on taking writes. It did
// not: pebble writes a checkpoint's OPTIONS and marker files through the
// store's file system, which retried them as the store's own critical
// files, forever, refusing every commit meanwhile, and a failed fsync of
// one left the store refusing writes until a restart.
func TestCheckpointFaultLeavesStoreWorking(t *testing.T) {
	for _, r := range []vfs.Rule{
		{Ops: vfs.OpWrite, Path: "/cp/", Err: syscall.ENOSPC},
		{Ops: vfs.OpCreate, Path: "/cp/", Err: syscall.ENOSPC},
		{Ops: vfs.OpSync, Path: "/cp/", Err: syscall.EIO},
	} {
		t.Run(fmt.Sprintf("%v %s", r.Ops, errName(r.Err)), func(t *testing.T) {
			mem := vfs.NewMem()
			fsys := vfs.NewFaulty(mem)
			s := mustOpenFS(t, fsys, DurabilitySync)
			defer s.close()
			for i := range 10 {
				b := s.NewBatch()
				b.Set(faultKey(i), faultValue(i))
				if err := s.Commit(b); err != nil {
					t.Fatal(err)
				}
				b.Close()
			}
			remove := fsys.Inject(r)
			cpDir := path.Join(path.Dir(faultDir), "cp")
			type result struct {
				p   string
				err error
			}
			done := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				p, err := s.checkpoint(ctx, cpDir, "")
				done <- result{p, err}
			}()
			var res result
			select {
			case res = <-done:
			case <-time.After(20 * time.Second):
				remove()
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					leaveStuck() // stuck for good, as the store was
				}
				t.Fatal("a checkpoint into a failing directory did not return in 20 s")
			}
			if res.err == nil || !errors.Is(res.err, r.Err) {
				t.Fatalf("checkpoint into a failing directory: %q, %v; want the injected %v", res.p, res.err, r.Err)
			}
			remove()
			// Nothing half-written is left to be taken for a checkpoint.
			if names, err := mem.List(cpDir); err == nil && len(names) > 0 {
				t.Fatalf("a failed checkpoint left %v in %s", names, cpDir)
			} else if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			b := s.NewBatch()
			b.Set(faultKey(10), faultValue(10))
			err := s.Commit(b)
			b.Close()
			if err != nil {
				t.Fatalf("commit after a failed checkpoint: %v", err)
			}
			p, err := s.checkpoint(context.Background(), cpDir, "")
			if err != nil {
				t.Fatalf("checkpoint once the fault is gone: %v", err)
			}
			cp, err := openStoreFS(mem, p, DurabilitySync, 1<<20, 0, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer cp.close()
			checkAcked(t, cp, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, "the checkpoint")
		})
	}
}

// A store directory that lost pebble's manifest marker (an empty file,
// which some copy tools drop) is refused with an error naming what is
// missing. Pebble took such a directory for a new store and opened it
// empty, deleting its tables as obsolete: a metadata server restored
// from such a copy of a checkpoint knew no object, and pdc fsck --remove
// then deleted the data of every one.
func TestStoreWithoutManifestMarkerRefused(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir+"/db", DurabilityProcess)
	for i := range 100 {
		put(t, s, fmt.Sprint("k", i), fmt.Sprint("v", i))
	}
	cp, err := s.checkpoint(context.Background(), dir+"/cp", "")
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "after", "checkpoint")
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{cp, dir + "/db"} {
		names, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var marker string
		for _, n := range names {
			if strings.HasPrefix(n.Name(), "marker.manifest.") {
				marker = filepath.Join(d, n.Name())
			}
		}
		if marker == "" {
			t.Fatalf("no manifest marker in %s: %v", d, names)
		}
		if err := os.Remove(marker); err != nil {
			t.Fatal(err)
		}
		s, err := openStore(d, DurabilityProcess, 1<<20, slog.New(slog.DiscardHandler))
		if err == nil {
			_, ok, _ := s.get([]byte("k1"))
			s.close()
			t.Fatalf("%s without its manifest marker opened (k1 found: %v)", d, ok)
		}
		if !errors.Is(err, pdc.ErrCorrupt) || !strings.Contains(err.Error(), d) || !strings.Contains(err.Error(), "marker.manifest") {
			t.Fatalf("open %s without its manifest marker: %v; want pdc.ErrCorrupt naming the directory and the marker", d, err)
		}
		// Nothing was deleted: put back, the marker opens the store whole.
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		s = openTest(t, d, DurabilityProcess)
		mustGet(t, s, "k99", "v99")
		s.close()
	}
}

// The checkpoint just written is never the one pruned, even if its name
// sorts first: a clock stepped back (NTP, a migrated VM) named it before
// the ones kept, and pdc checkpoint returned the path of a checkpoint it
// had just removed.
func TestCheckpointKeptWhenClockSteppedBack(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir+"/db", DurabilityProcess)
	defer s.close()
	put(t, s, "k", "v")
	for _, later := range []string{"29990101T000000.000000001Z", "29990101T000000.000000002Z", "29990101T000000.000000003Z"} {
		if err := os.MkdirAll(filepath.Join(dir, "cp", later), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.checkpoint(context.Background(), dir+"/cp", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the checkpoint returned was removed: %v", err)
	}
	cp := openTest(t, p, DurabilityProcess)
	defer cp.close()
	mustGet(t, cp, "k", "v")
}
