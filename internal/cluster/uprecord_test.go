package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
)

func TestUpRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadUpRecord(dir); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("no record: %v, want ErrNotFound", err)
	}
	cfg := LocalConfig{Binary: "/bin/pdc", N: 3, TmpDir: dir, DataDir: "/data", Unix: true, Listen: "0.0.0.0:0", Roles: "data",
		Args: []string{"--durability", "sync"}, Timeout: 42 * time.Second,
		RankArgs: func(rank int) []string {
			if rank == 1 {
				return []string{"--host", "b"}
			}
			return nil
		}}
	if err := WriteUpRecord(dir, cfg.Record()); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadUpRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := rec.Local("/bin/pdc", dir)
	if got.N != 3 || got.DataDir != "/data" || !got.Unix || got.Listen != "0.0.0.0:0" || got.Roles != "data" || got.Timeout != 42*time.Second ||
		!reflect.DeepEqual(got.Args, cfg.Args) {
		t.Fatalf("read back %+v, wrote %+v", got, cfg)
	}
	for r := range 3 {
		if a, b := got.RankArgs(r), cfg.RankArgs(r); len(a) != len(b) || len(a) > 0 && !reflect.DeepEqual(a, b) {
			t.Fatalf("rank %d args %q, want %q", r, a, b)
		}
	}
	// A torn record is refused, not half-used.
	path := filepath.Join(dir, UpFile)
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, b[:len(b)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadUpRecord(dir); !errors.Is(err, pdc.ErrChecksum) {
		t.Fatalf("torn record: %v, want ErrChecksum", err)
	}
}
