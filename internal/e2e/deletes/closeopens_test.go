package deletes_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/batch"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

// A client that closes without closing its objects leaves them open
// only until its Close returns: a container delete right after (by
// another client, as a cleanup step after a producer exits would) is not
// refused for objects still open. The servers used to release such opens
// when the closed client's connections wound down, after Close had
// returned.
func TestDeleteRightAfterAnotherClientCloses(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 2*time.Minute)
	cleaner := e2e.Connect(t, tmpdir)
	for i := range 20 {
		name := fmt.Sprintf("left-open-%d", i)
		producer, err := client.Connect(ctx, client.WithTmpDir(tmpdir))
		if err != nil {
			t.Fatal(err)
		}
		ct, _, err := producer.CreateContainer(ctx, name, client.Persistent)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 8 {
			o, err := ct.CreateObject(ctx, fmt.Sprintf("%s/o%d", name, j), client.ObjectProps{Dims: []uint64{16}, Type: region.Int32})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := producer.OpenObject(ctx, o.Info().Name); err != nil {
				t.Fatal(err)
			}
		}
		if err := producer.Close(); err != nil {
			t.Fatal(err)
		}
		if err := cleaner.DeleteContainer(ctx, name); err != nil {
			t.Fatalf("round %d: delete right after the producer's Close: %v", i, err)
		}
	}
}

// Objects opened or created in a batch large enough to go in several
// requests (more than batch.MaxItems to one server) are released by
// Close as those of a small batch are. A second client of the same name
// keeps the session on the server going, so that only Close's own
// release can free them: the delete after it is refused otherwise.
func TestCloseReleasesOpensOfALargeBatch(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	ctx := e2e.Ctx(t, 2*time.Minute)
	cleaner := e2e.Connect(t, tmpdir)
	const name = "large-batch-left-open"
	holder := e2e.Connect(t, tmpdir, client.WithName(name))
	defer holder.Close()
	if _, err := holder.Ping(ctx, 0); err != nil {
		t.Fatal(err)
	}
	producer, err := client.Connect(ctx, client.WithTmpDir(tmpdir), client.WithName(name))
	if err != nil {
		t.Fatal(err)
	}
	ct, _, err := producer.CreateContainer(ctx, name, client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	specs := make([]client.ObjectSpec, batch.MaxItems+1)
	for i := range specs {
		specs[i] = client.ObjectSpec{Name: fmt.Sprintf("%s/o%d", name, i), Props: client.ObjectProps{Dims: []uint64{16}, Type: region.Int32}}
	}
	if _, err := ct.CreateObjects(ctx, specs); err != nil {
		t.Fatal(err)
	}
	if err := producer.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cleaner.DeleteContainer(ctx, name); err != nil {
		t.Fatalf("delete after the producer's Close: %v", err)
	}
}
