package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// TestCreateObjectsInManyChunks creates more objects than three requests
// to each of two servers hold (so that chunks are sent while two are in
// flight), with duplicates in late chunks: every result lands at its own
// index, and the duplicates alone fail.
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
	n := 7*client.MaxBatch + 500
	specs := make([]client.ObjectSpec, n)
	names := make([]string, n)
	for i := range specs {
		names[i] = fmt.Sprintf("obj%06d", i)
		specs[i] = client.ObjectSpec{Name: names[i], Props: props}
	}
	// Two made beforehand, so that their creates in the batch fail.
	dups := []int{n - 7, 5*client.MaxBatch + 3}
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

// TestCreateObjectsCutShort ends big batched creates at different points:
// each fails with the deadline, once, or finishes, and the client works
// on after.
func TestCreateObjectsCutShort(t *testing.T) {
	srv := startServers(t, t.TempDir(), 1)
	defer srv.stop()
	c := srv.connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ct, _, err := c.CreateContainer(ctx, "cut", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	props := client.ObjectProps{Dims: []uint64{4}, Type: region.Int}
	for round, d := range []time.Duration{0, time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond, time.Minute} {
		specs := make([]client.ObjectSpec, 4*client.MaxBatch)
		for i := range specs {
			specs[i] = client.ObjectSpec{Name: fmt.Sprintf("cut%d-%06d", round, i), Props: props}
		}
		short, stop := context.WithTimeout(ctx, d)
		objs, err := ct.CreateObjects(short, specs)
		stop()
		t.Logf("deadline %v: %v", d, err)
		switch {
		case err == nil:
			if len(objs) != len(specs) {
				t.Fatalf("round %d: %d results for %d specs", round, len(objs), len(specs))
			}
		case !errors.Is(err, pdc.ErrTimeout):
			t.Fatalf("round %d (deadline %v): %v; want ErrTimeout", round, d, err)
		case strings.Count(err.Error(), "deadline exceeded") > 1 || strings.Count(err.Error(), "\n") > 0:
			t.Fatalf("round %d: the deadline is reported more than once: %v", round, err)
		}
		if _, err := ct.CreateObject(ctx, fmt.Sprintf("after-%d", round), props); err != nil {
			t.Fatalf("create after round %d: %v", round, err)
		}
	}
}
