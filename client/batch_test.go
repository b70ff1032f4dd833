package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// TestCreateObjectsInManyChunks creates more objects than three requests
// hold, over two servers, with duplicates in a late chunk: every result
// lands at its own index, and the duplicates alone fail.
func TestCreateObjectsInManyChunks(t *testing.T) {
	srv := startServers(t, t.TempDir(), 2)
	defer srv.stop()
	c := srv.connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ct, _, err := c.CreateContainer(ctx, "many", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	props := client.ObjectProps{Dims: []uint64{4}, Type: region.Int}
	n := 3*client.MaxBatch + 500
	specs := make([]client.ObjectSpec, n)
	names := make([]string, n)
	for i := range specs {
		names[i] = fmt.Sprintf("obj%06d", i)
		specs[i] = client.ObjectSpec{Name: names[i], Props: props}
	}
	// Two made beforehand, so that their creates in the batch fail.
	dups := []int{n - 7, 2*client.MaxBatch + 3}
	for _, i := range dups {
		if _, err := ct.CreateObject(ctx, names[i], props); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := ct.CreateObjects(ctx, specs)
	if !errors.Is(err, pdc.ErrExists) {
		t.Fatalf("batch with 2 existing objects: %v; want ErrExists", err)
	}
	failed := 0
	for i, o := range objs {
		switch {
		case o == nil:
			failed++
			if i != dups[0] && i != dups[1] {
				t.Fatalf("create of %s failed; only %s and %s exist already", names[i], names[dups[0]], names[dups[1]])
			}
		case o.Info().Name != names[i]:
			t.Fatalf("result %d is object %q; want %q", i, o.Info().Name, names[i])
		}
	}
	if failed != len(dups) {
		t.Fatalf("%d creates failed; want %d", failed, len(dups))
	}
	opened, err := c.OpenObjects(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range opened {
		if objs[i] != nil && o.ID() != objs[i].ID() {
			t.Fatalf("%s: opened id %d, created %d", names[i], o.ID(), objs[i].ID())
		}
	}
}
