package bed

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"
)

// RequiredEnv, set to 1 (CI sets it), makes Start fail instead of skip
// when a bed cannot be built here, so that CI never skips the bed's
// tests without a word.
const RequiredEnv = "PDC_BED_REQUIRED"

var available = sync.OnceValue(Available)

// Start builds a bed of n nodes for a test, closed when the test ends
// (after processes the test started in it were stopped by their own
// cleanups, if any). When a bed cannot be built here the test is
// skipped with the reason, or fails if $PDC_BED_REQUIRED is 1.
func Start(t testing.TB, n int) *Bed {
	t.Helper()
	if err := available(); err != nil {
		if os.Getenv(RequiredEnv) == "1" {
			t.Fatalf("%v (and $%s=1)", err, RequiredEnv)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := New(ctx, Config{Nodes: n, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}
