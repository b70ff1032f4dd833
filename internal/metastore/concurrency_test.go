package metastore

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/pdcgo/pdc"
)

// Sync commits while the log rotates: a lock-order inversion between the
// log's mutex and its sync mutex once hung every commit here (found in
// review). A hang fails the test by the test binary's timeout.
func TestSyncCommitsAcrossLogRotation(t *testing.T) {
	old := walRotateBytes
	walRotateBytes = 4 << 10
	defer func() { walRotateBytes = old }()
	s := openTest(t, t.TempDir(), DurabilitySync)
	defer s.close()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 300 {
				b := s.db.NewBatch()
				_ = b.Set([]byte(fmt.Sprintf("g%d-%d", g, i)), make([]byte, 200), nil)
				if err := s.commit(b); err != nil {
					t.Error(err)
				}
				b.Close()
			}
		})
	}
	wg.Wait()
	mustGet(t, s, "g15-299", string(make([]byte, 200)))
}

// TestSyncedBeforeAFailureStaysSynced: a change whose log bytes were synced
// before a later sync failed is durable, and its wait says so. Failing it
// would drop its outbox record, which the next start delivers after newer
// ones.
func TestSyncedBeforeAFailureStaysSynced(t *testing.T) {
	w, _, err := openWAL(t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.reset(0); err != nil {
		t.Fatal(err)
	}
	defer w.close(pdc.ErrClosed)
	w.mu.Lock()
	first, err := w.append([]byte("first"))
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.waitSynced(first); err != nil {
		t.Fatal(err)
	}
	w.syncMu.Lock()
	w.setErr(errors.New("injected fsync failure"))
	w.syncMu.Unlock()
	w.mu.Lock()
	second, err := w.append([]byte("second"))
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.waitSynced(first); err != nil {
		t.Fatalf("a change synced before the failure: %v", err)
	}
	if err := w.waitSynced(second); err == nil {
		t.Fatal("a change logged after the failure counts as synced")
	}
}
