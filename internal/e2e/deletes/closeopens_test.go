package deletes_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
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
