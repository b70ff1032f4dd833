package metastore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs/vfstest"
)

// A full disk fails commits with ENOSPC naming the file, never kills the
// process (it did: a store into the mapped log past what fallocate could
// reserve raised SIGBUS); what was acknowledged still reads; commits work
// again once space is freed, and everything acknowledged survives a
// restart. On a real tmpfs, in both durabilities.
func TestFullDiskFailsCommitsCleanly(t *testing.T) {
	for _, d := range []Durability{DurabilityProcess, DurabilitySync} {
		t.Run(d.String(), func(t *testing.T) {
			root := vfstest.SmallFS(t, 8<<20)
			dir := filepath.Join(root, "meta")
			s, err := openStore(dir, d, 1<<20, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			filler := vfstest.Fill(t, root, 0)
			acked := 0
			value := strings.Repeat("v", 1000)
			var failed error
			for i := 0; i < 100000 && failed == nil; i++ {
				b := s.db.NewBatch()
				_ = b.Set([]byte(fmt.Sprint("k", i)), []byte(value), nil)
				if failed = s.commit(b); failed == nil {
					acked++
				}
				b.Close()
			}
			if failed == nil {
				t.Fatal("100000 commits of 1 KB fit on a full 8 MiB disk")
			}
			if !errors.Is(failed, syscall.ENOSPC) || pdc.NoSpaceOrIO(failed) != pdc.ErrNoSpace || !strings.Contains(failed.Error(), root) {
				t.Fatalf("commit on a full disk: %v; want ENOSPC naming a file under %s", failed, root)
			}
			t.Logf("%d commits acknowledged before: %v", acked, failed)
			// Refused again, at once, while the disk is full.
			b := s.db.NewBatch()
			_ = b.Set([]byte("refused"), []byte("x"), nil)
			if err := s.commit(b); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("second commit on a full disk: %v", err)
			}
			b.Close()
			check := func(when string) {
				t.Helper()
				for i := range acked {
					mustGetWhen(t, s, when, fmt.Sprint("k", i), value)
				}
			}
			check("with the disk full")
			filler.Release(t)
			for i := acked; i < acked+200; i++ {
				b := s.db.NewBatch()
				_ = b.Set([]byte(fmt.Sprint("k", i)), []byte(value), nil)
				if err := s.commit(b); err != nil {
					t.Fatalf("commit %d after space was freed: %v", i, err)
				}
				b.Close()
			}
			acked += 200
			check("after space was freed")
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
			s = openTest(t, dir, d)
			defer s.close()
			check("after a restart")
		})
	}
}

func mustGetWhen(t *testing.T, s *Store, when, k, want string) {
	t.Helper()
	v, ok, err := s.get([]byte(k))
	if err != nil || !ok || string(v) != want {
		t.Fatalf("%s: get %q = %.20q, %v, %v", when, k, v, ok, err)
	}
}

// A store into the mapped log that faults anyway (here: the file cut
// under the mapping, as a file system that allocates only on write-back
// would fault) fails that commit with an error instead of killing the
// process, and the next commit goes to a new log file.
func TestLogFaultFailsTheCommit(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, DurabilityProcess)
	put(t, s, "before", "1")
	for i := 0; s.log.size < 3*4096; i++ {
		put(t, s, fmt.Sprint("fill", i), strings.Repeat("f", 100))
	}
	// Cut the file at the end of the page the next record starts in: the
	// record runs into the page after, which no longer exists.
	if err := os.Truncate(filepath.Join(dir, walFile), (s.log.size+4095)/4096*4096); err != nil {
		t.Fatal(err)
	}
	b := s.db.NewBatch()
	_ = b.Set([]byte("faulted"), []byte(strings.Repeat("x", 8192)), nil)
	err := s.commit(b)
	b.Close()
	if err == nil || !strings.Contains(err.Error(), "faulted") || pdc.NoSpaceOrIO(err) == nil {
		t.Fatalf("commit into a cut log: %v; want an I/O or no-space error saying the store faulted", err)
	}
	if _, ok, _ := s.get([]byte("faulted")); ok {
		t.Fatal("the failed commit was applied")
	}
	put(t, s, "after", "2")
	mustGet(t, s, "before", "1")
	crash(s)
	s = openTest(t, dir, DurabilityProcess)
	defer s.close()
	mustGet(t, s, "before", "1")
	mustGet(t, s, "after", "2")
}
