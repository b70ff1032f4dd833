package stage_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
)

// WaitProduced (dyad_get_metadata with should_wait) returns the record of
// a file once it is produced, named by its absolute path in a consumer dir
// that does not exist yet, as a consumer started before anything arrived
// names it; one never produced is not found when the wait ends.
func TestStageWaitProduced(t *testing.T) {
	sc := stageUp(t)
	cons := filepath.Join(sc.base, "cons-node-b")
	c := e2e.Connect(t, sc.tmpdir, client.WithHost("node-b"), client.WithStageDirs("", cons), client.WithSharedStorage(false))
	ctx := e2e.Ctx(t, 60*time.Second)

	type result struct {
		f   client.StagedFile
		err error
	}
	got := make(chan result, 1)
	go func() {
		f, err := c.WaitProduced(ctx, filepath.Join(cons, "w", "late.dat"))
		got <- result{f, err}
	}()
	writeFile(t, sc.prodA, "w/late.dat", randBytes(3, 4321))
	sc.produce(t, "w/late.dat")
	r := <-got
	if r.err != nil {
		t.Fatalf("WaitProduced: %v", r.err)
	}
	if r.f.Path != "w/late.dat" || r.f.Version != 1 || r.f.Size != 4321 || r.f.Owner.Rank != 0 || r.f.Host != "node-a" {
		t.Errorf("WaitProduced: %+v, want w/late.dat version 1, 4321 bytes, owned by rank 0 on node-a", r.f)
	}

	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := c.WaitProduced(short, "never.dat"); err == nil {
		t.Errorf("WaitProduced of a file never produced succeeded")
	}
	if _, err := c.Lookup(ctx, "never.dat"); !errors.Is(err, pdc.ErrNotFound) {
		t.Errorf("Lookup of a file never produced: %v, want %v", err, pdc.ErrNotFound)
	}
}
