package metastore

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
)

// applyOne logs and applies key i, and returns the wait for its sync.
func applyOne(t *testing.T, s *Store, i int) (wait func() error) {
	t.Helper()
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(faultKey(i), faultValue(i), nil)
	wait, err := s.commitApply(b)
	if err != nil {
		t.Fatal(err)
	}
	return wait
}

// A committer that waits for its sync after the store crashed is told the
// change may not be durable: nothing synced it. (The closed file's fsync
// failed with ErrClosed, which the log took for "synced".)
func TestWaitAfterCrashIsNotDurable(t *testing.T) {
	s := mustOpenFS(t, vfs.NewMem(), DurabilitySync)
	wait := applyOne(t, s, 1)
	s.Crash()
	if err := wait(); !errors.Is(err, ErrUnsynced) || !errors.Is(err, pdc.ErrClosed) {
		t.Fatalf("wait after a crash: %v; want ErrUnsynced and ErrClosed", err)
	}
}

// Likewise after a close whose flush failed: the change is in the log,
// which nobody synced, and in no table.
func TestWaitAfterFailedCloseIsNotDurable(t *testing.T) {
	fsys := vfs.NewFaulty(vfs.NewMem())
	s := mustOpenFS(t, fsys, DurabilitySync)
	wait := applyOne(t, s, 1)
	fsys.Inject(vfs.Rule{Ops: vfs.OpCreate | vfs.OpWrite, Path: ".sst", Err: syscall.EIO})
	if err := s.close(); err == nil {
		t.Fatal("close with tables that cannot be written succeeded")
	}
	if err := wait(); !errors.Is(err, ErrUnsynced) || !errors.Is(err, pdc.ErrClosed) {
		t.Fatalf("wait after a close that could not flush: %v; want ErrUnsynced and ErrClosed", err)
	}
}

// A rotation that closes the file a waiter is fsyncing leaves the waiter
// told, truly, that its change is durable (it is in pebble's tables), and
// the log working.
func TestWaitAcrossRotationIsDurable(t *testing.T) {
	smallLog(t)
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := mustOpenFS(t, fsys, DurabilitySync)
	defer s.close()
	inSync, release := make(chan struct{}), make(chan struct{})
	held := false
	fsys.OnOp(func(op vfs.Op, path string) {
		if op == vfs.OpSync && strings.Contains(path, walFile) && !held {
			held = true // the waiter below; the file it syncs has the name it was made with
			close(inSync)
			<-release
		}
	})
	wait := applyOne(t, s, 0)
	done := make(chan error, 1)
	go func() { done <- wait() }()
	<-inSync
	s.log.mu.Lock()
	origin := s.log.origin
	s.log.mu.Unlock()
	for i := 1; ; i++ {
		applyOne(t, s, i) // not waited for: the held fsync would block it
		s.log.mu.Lock()
		rotated := s.log.origin != origin
		s.log.mu.Unlock()
		if rotated {
			break
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("wait whose fsync the rotation cut short: %v; want durable (in pebble)", err)
	}
	if err := applyOne(t, s, 10000)(); err != nil {
		t.Fatalf("commit after the rotation: %v", err)
	}
	crashed := mustOpenFS(t, mem.CrashClone(), DurabilitySync)
	defer crashed.close()
	checkAcked(t, crashed, []int{0, 10000}, "after a power loss")
}

// A rotation whose directory fsync failed leaves the new log's name not
// durable: a power loss brings the old file back. The commit after it
// goes to a log whose name is durable, not to that one, where a power
// loss took it although its fsync had answered.
func TestRotationWithFailedDirSyncRotatesAgain(t *testing.T) {
	smallLog(t)
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := mustOpenFS(t, fsys, DurabilitySync)
	defer s.close()
	armed := true
	fsys.OnOp(func(op vfs.Op, path string) {
		if op == vfs.OpRename && strings.HasPrefix(path, filepath.Join(faultDir, walFile+".new ")) && armed {
			armed = false // the rotation's own directory fsync fails, once
			fsys.Inject(vfs.Rule{Ops: vfs.OpSyncDir, Count: 1, Err: syscall.EIO})
		}
	})
	var acked []int
	i := 0
	for ; armed && i < 1000; i++ {
		b := s.db.NewBatch()
		_ = b.Set(faultKey(i), faultValue(i), nil)
		err := s.commit(b)
		b.Close()
		switch {
		case err == nil:
			acked = append(acked, i)
		case !errors.Is(err, syscall.EIO):
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	if armed {
		t.Fatal("1000 commits and no rotation")
	}
	for end := i + 3; i < end; i++ {
		b := s.db.NewBatch()
		_ = b.Set(faultKey(i), faultValue(i), nil)
		if err := s.commit(b); err != nil {
			t.Fatalf("commit %d after the failed directory fsync: %v", i, err)
		}
		b.Close()
		acked = append(acked, i)
	}
	crashed := mustOpenFS(t, mem.CrashClone(), DurabilitySync)
	defer crashed.close()
	checkAcked(t, crashed, acked, "after a power loss")
}
