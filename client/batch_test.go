package client_test

import (
	"bytes"
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
// index, and the duplicates alone fail. Names of 1000 bytes make a
// request's 256 KiB hold some 250 objects, so that 3,600 of them make
// some 7 requests per server (as 57,844 short names did, at the race
// detector's cost of 50 s per run).
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
	const n = 3600
	pad := strings.Repeat("p", 990)
	specs := make([]client.ObjectSpec, n)
	names := make([]string, n)
	for i := range specs {
		names[i] = fmt.Sprintf("obj%06d-%s", i, pad)
		specs[i] = client.ObjectSpec{Name: names[i], Props: props}
	}
	// Two made beforehand, so that their creates in the batch fail.
	dups := []int{n - 7, n*7/10 + 3}
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
		// Some 5 requests' worth (at 256 KiB each): a deadline can end
		// the call between any two of them.
		specs := make([]client.ObjectSpec, 2*client.MaxBatch)
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

// TestBatchesOfLongNames creates and opens, in one call each, objects
// whose names and app names are long: a chunk of them is bounded in bytes
// as well as in items, and a server answers opens in parts that fit a
// reply, the client asking again for the rest. Before, 3000 such objects
// made a request, then a reply, of several MiB: "frame header of ...
// bytes exceeds the limit"; 1000 of them (2 MiB, some 8 requests and
// pages) exceed it as well.
func TestBatchesOfLongNames(t *testing.T) {
	srv := startServers(t, t.TempDir(), 1)
	defer srv.stop()
	c := srv.connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ct, _, err := c.CreateContainer(ctx, "long", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	app := strings.Repeat("a", 1000)
	props := client.ObjectProps{Dims: []uint64{4}, Type: region.Int, AppName: app}
	specs := make([]client.ObjectSpec, n)
	names := make([]string, n)
	for i := range specs {
		names[i] = fmt.Sprintf("%04d-%s", i, strings.Repeat("n", 1000))
		specs[i] = client.ObjectSpec{Name: names[i], Props: props}
	}
	objs, err := ct.CreateObjects(ctx, specs)
	if err != nil {
		t.Fatalf("create %d objects with long names: %v", n, err)
	}
	// Again: every create fails, each with a message naming its object.
	if _, err := ct.CreateObjects(ctx, specs); !errors.Is(err, pdc.ErrExists) {
		t.Fatalf("create them again: %v", err)
	}
	opened, err := c.OpenObjects(ctx, names, client.WithIdentity(0, app))
	if err != nil {
		t.Fatalf("open %d objects with long names: %v", n, err)
	}
	for i, o := range opened {
		if o.ID() != objs[i].ID() || o.Info().Props.AppName != app {
			t.Fatalf("%d: opened %d (%q), created %d", i, o.ID(), o.Info().Props.AppName[:8], objs[i].ID())
		}
	}
	list, err := ct.Objects(ctx)
	if err != nil || len(list) != n {
		t.Fatalf("list: %d objects, %v", len(list), err)
	}

	// Short names, records of 60 KiB (their tags string): the opens fit a
	// request, their answers do not fit one reply.
	big := client.ObjectProps{Dims: []uint64{4}, Type: region.Int, Tags: strings.Repeat("t", 60<<10)}
	specs = specs[:200]
	names = names[:200]
	for i := range specs {
		names[i] = fmt.Sprint("big", i)
		specs[i] = client.ObjectSpec{Name: names[i], Props: big}
	}
	if _, err := ct.CreateObjects(ctx, specs); err != nil {
		t.Fatal(err)
	}
	opened, err = c.OpenObjects(ctx, names)
	if err != nil {
		t.Fatalf("open 200 objects of 60 KiB records: %v", err)
	}
	for i, o := range opened {
		if o.Name() != names[i] || len(o.Info().Props.Tags) != 60<<10 {
			t.Fatalf("%d: opened %q with %d bytes of tags", i, o.Name(), len(o.Info().Props.Tags))
		}
	}
}

// TestPutTagsOfLargeValues puts, in one call, more bytes of tags than one
// request holds: the client sends them in chunks bounded in bytes. Before,
// 200 values of 32 KiB made one request of 6.4 MiB, which the server
// refused, dropping the connection; 50 (1.6 MiB, past the 1 MiB a server
// accepts: 7 chunks) do as well.
func TestPutTagsOfLargeValues(t *testing.T) {
	srv := startServers(t, t.TempDir(), 1)
	defer srv.stop()
	c := srv.connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ct, _, err := c.CreateContainer(ctx, "tags", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	o, err := ct.CreateObject(ctx, "o", client.ObjectProps{Dims: []uint64{4}, Type: region.Int})
	if err != nil {
		t.Fatal(err)
	}
	var puts []client.TagPut
	for i := range 50 {
		puts = append(puts, client.TagPut{Object: o, Name: fmt.Sprint("t", i), Value: client.Bytes(bytes.Repeat([]byte{byte(i)}, 32<<10))})
	}
	if err := c.PutTags(ctx, puts); err != nil {
		t.Fatalf("put 50 tags of 32 KiB: %v", err)
	}
	v, err := o.GetTag(ctx, "t49")
	if err != nil || len(v.Value) != 32<<10 || v.Value[0] != 49 {
		t.Fatalf("tag t49: %d bytes, %v", len(v.Value), err)
	}
}
