package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/wire"
)

// checkMetaStore refuses a rank that rejoins with another store than the
// one the cluster knows it by, and lets every other start through: the
// same store, a list from before store ids, a data-only server, a
// cluster that is not running (a new start places ranks anew).
func TestCheckMetaStore(t *testing.T) {
	ctx := context.Background()
	// Each case is a server of rank with its own data dir and tmpdir, a
	// store made there for storeRank, and a list that says the cluster
	// serves every rank from store want ("same": the one made).
	type setup struct {
		rank      int
		storeRank int // -1: no store
		roles     wire.Role
		running   bool // rank 0 rejoins a cluster that serves
		want      string
	}
	run := func(t *testing.T, s setup) (*proc, error) {
		t.Helper()
		cfg := Config{Rank: s.rank, Size: 2, TmpDir: t.TempDir(), DataDir: t.TempDir(), Roles: s.roles}
		var have string
		if s.storeRank >= 0 {
			if err := os.MkdirAll(metaDir(cfg), 0o700); err != nil {
				t.Fatal(err)
			}
			id, _, err := metastore.EnsureIdentity(nil, metaDir(cfg), s.storeRank)
			if err != nil {
				t.Fatal(err)
			}
			have = id.ID
		}
		want := s.want
		if want == "same" {
			want = have
		}
		// Nothing answers at these addresses: a list that only rank 0's
		// rejoin reads as running (p.running), as probe found it.
		list := &cluster.List{Size: 2, Servers: []cluster.Server{
			{Rank: 0, Addr: "unix:" + filepath.Join(cfg.TmpDir, "gone-0"), Roles: "both", MetaStore: want},
			{Rank: 1, Addr: "unix:" + filepath.Join(cfg.TmpDir, "gone-1"), Roles: "both", MetaStore: want},
		}}
		if err := cluster.WriteList(cfg.TmpDir, list); err != nil {
			t.Fatal(err)
		}
		p := &proc{cfg: cfg}
		if s.running {
			p.running = list
		}
		return p, p.checkMetaStore(ctx)
	}
	for _, c := range []struct {
		name    string
		s       setup
		refused string // "" when the start goes on
	}{
		{"rank 0 with its store", setup{rank: 0, storeRank: 0, roles: wire.RoleBoth, running: true, want: "same"}, ""},
		{"rank 0 without a store", setup{rank: 0, storeRank: -1, roles: wire.RoleBoth, running: true, want: "0123456789abcdef0123456789abcdef"}, "has no metadata store of rank 0"},
		{"rank 0 with another store", setup{rank: 0, storeRank: 0, roles: wire.RoleBoth, running: true, want: "0123456789abcdef0123456789abcdef"}, "has another store"},
		{"rank 0 with a store of rank 1", setup{rank: 0, storeRank: 1, roles: wire.RoleBoth, running: true, want: "same"}, "made for rank 1"},
		{"rank 0 of a new cluster", setup{rank: 0, storeRank: -1, roles: wire.RoleBoth, want: "0123456789abcdef0123456789abcdef"}, ""},
		{"rank 0, a list from before store ids", setup{rank: 0, storeRank: -1, roles: wire.RoleBoth, running: true, want: ""}, ""},
		{"rank 0, data only", setup{rank: 0, storeRank: -1, roles: wire.RoleData, running: true, want: "0123456789abcdef0123456789abcdef"}, ""},
		{"rank 1 with its store", setup{rank: 1, storeRank: 1, roles: wire.RoleBoth, want: "same"}, ""},
		{"rank 1 without a store, none of the list answers", setup{rank: 1, storeRank: -1, roles: wire.RoleBoth, want: "0123456789abcdef0123456789abcdef"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := run(t, c.s)
			if c.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), c.refused) {
				t.Fatalf("got %v, want a refusal saying %q", err, c.refused)
			}
			for _, w := range []string{"rank 0's metadata", p.cfg.DataDir, c.s.want, "--datadir"} {
				if w != "same" && !strings.Contains(err.Error(), w) {
					t.Fatalf("the refusal does not say %q: %v", w, err)
				}
			}
		})
	}
	// A store whose identity cannot be read is not taken for a missing
	// one, nor given a new identity.
	t.Run("a torn identity", func(t *testing.T) {
		cfg := Config{Rank: 0, Size: 2, TmpDir: t.TempDir(), DataDir: t.TempDir(), Roles: wire.RoleBoth}
		if err := os.MkdirAll(metaDir(cfg), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(metaDir(cfg), metastore.IdentityFile), []byte("pdcmsid\x00\x01"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := &proc{cfg: cfg, running: &cluster.List{Size: 2, Servers: []cluster.Server{
			{Rank: 0, Addr: "unix:/nonexistent/0", Roles: "both", MetaStore: "0123456789abcdef0123456789abcdef"},
			{Rank: 1, Addr: "unix:/nonexistent/1", Roles: "both"},
		}}}
		if err := p.checkMetaStore(ctx); !errors.Is(err, pdc.ErrCorrupt) {
			t.Fatalf("got %v, want pdc.ErrCorrupt", err)
		}
	})
}
