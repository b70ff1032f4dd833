package metaserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// A store written by the build before the storage engine became
// internal/metastore (e96cc59) opens under this one with everything in
// it: testdata/format1 holds a container "box" and objects obj-0..obj-19,
// each with key=value-i and k(i%3)=shared, in a store closed cleanly and
// in one whose process was killed (its changes only in the log, replayed
// at open). pdc.wal is cut after its last record: the rest of the file
// is the log's zeroed preallocation.
func TestOpensAStoreOfTheLastFormat(t *testing.T) {
	for _, mode := range []string{"closed", "crashed"} {
		t.Run(mode, func(t *testing.T) {
			c := &testCluster{t: t, down: map[int]bool{}, dirs: []string{copyStore(t, filepath.Join("testdata/format1", mode))}}
			c.open()
			t.Cleanup(c.close)
			resp, err := c.svcs[0].contGet(context.Background(), &rpc.Request{Header: (&wire.ContKey{Name: "box"}).Marshal(nil)})
			if err != nil {
				t.Fatalf("container box: %v", err)
			}
			var m wire.ContainerMeta
			if err := m.Unmarshal(resp.Header); err != nil || m.Name != "box" {
				t.Fatalf("container box reads as %+v (%v)", m, err)
			}
			for _, scan := range []bool{false, true} {
				for i := range 20 {
					if got := c.query(fmt.Sprintf("key=value-%d", i), scan); len(got) != 1 {
						t.Fatalf("key=value-%d (scan %v) finds %v, want one object", i, scan, got)
					}
				}
				if got := c.query("k1=shared", scan); len(got) != 7 {
					t.Fatalf("k1=shared (scan %v) finds %d objects, want 7", scan, len(got))
				}
			}
			// And it takes new objects, with ids not handed out before.
			ids := map[uint64]bool{}
			for _, id := range c.query("key=*", true) {
				ids[id] = true
			}
			if id := c.create("new-object"); ids[id] {
				t.Fatalf("the new object got id %d, which an old one has", id)
			}
		})
	}
}

// copyStore copies the store in src to a new directory.
func copyStore(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
