package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/slots"
	"github.com/pdcgo/pdc/internal/wire"
)

// metaDir is the dir of the metadata store of cfg's rank.
func metaDir(cfg Config) string { return filepath.Join(cfg.DataDir, fmt.Sprintf("meta-%d", cfg.Rank)) }

// checkMetaStore refuses a metadata rank that rejoins the running cluster
// without the store it served: restarted on another node, whose
// node-local data dir has no store of that rank (or another one), it
// would open an empty store and answer "not found" for every object the
// real one holds; data servers would then refuse those objects' data,
// and `pdc fsck --remove` would delete it. The server list says which
// store each rank serves (cluster.Server.MetaStore); this runs before the
// store is opened, so that a refused start makes no empty store.
//
// Only a rejoin is checked. A start of the whole cluster places ranks
// anew, and moves or adopts the stores it finds (0004, 0013): there the
// list is of a dead cluster. So a mismatch is refused only if some
// server of the list still answers, and a rank that finds its own store
// pays for no probe.
func (p *proc) checkMetaStore(ctx context.Context) error {
	cfg := p.cfg
	if cfg.Roles&wire.RoleMetadata == 0 {
		return nil
	}
	list := p.running // rank 0: the cluster it rejoins, if any
	if cfg.Rank != 0 {
		l, err := p.clusterDir().ReadList()
		if err != nil {
			return nil // none (a new cluster), or not ours: the rendezvous says
		}
		list = l
	}
	if list == nil || list.Size != cfg.Size || cfg.Rank >= len(list.Servers) {
		return nil
	}
	want := list.Servers[cfg.Rank].MetaStore
	if want == "" {
		return nil // served by a build from before store ids
	}
	dir := metaDir(cfg)
	found, err := metastore.ReadIdentity(cfg.FS, dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err == nil && found.ID == want && found.Rank == cfg.Rank {
		return nil
	}
	if cfg.Rank != 0 {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		live := cluster.LiveServers(pctx, list)
		cancel()
		if len(live) == 0 {
			return nil
		}
		for _, m := range live {
			if m.Rank == cfg.Rank {
				return nil // still served: the registration says so, and by whom
			}
		}
	}
	var have string
	switch {
	case err != nil:
		have = fmt.Sprintf("has no metadata store of rank %d (no %s in %s)", cfg.Rank, metastore.IdentityFile, dir)
	case found.Rank != cfg.Rank:
		have = fmt.Sprintf("has store %s in %s, made for rank %d", found.ID, dir, found.Rank)
	default:
		have = fmt.Sprintf("has another store, %s, in %s", found.ID, dir)
	}
	return fmt.Errorf("rank %d's metadata is in store %s (the cluster running in %s says so), and data dir %s %s: "+
		"started with it, rank %d would answer \"not found\" for every object, container and tag of that store. "+
		"Was it restarted on another node than the one whose data dir holds its store? "+
		"Start rank %d there, or with --datadir pointing at that data dir (the one whose meta-%d/%s names store %s); "+
		"to go on without that store, deliberately, stop the cluster (`pdc down --tmpdir %s`) and start it anew: "+
		"a start of the whole cluster takes the stores its servers find and leaves the others where they are: %w",
		cfg.Rank, want, cfg.TmpDir, cfg.DataDir, have, cfg.Rank, cfg.Rank, cfg.Rank, metastore.IdentityFile, want, cfg.TmpDir, pdc.ErrInvalid)
}

// clusterDir is the cluster's tmpdir on the server's FS, before the
// Server exists.
func (p *proc) clusterDir() cluster.Dir { return cluster.Dir{Path: p.cfg.TmpDir, FS: p.cfg.FS} }

// storesServed returns an error naming every metadata store that the
// cluster's record (in this server's data dir, written at the start)
// says the cluster has and no metadata server of the running cluster
// serves: the data of its objects would look orphaned to a scrub, and
// `pdc fsck --remove` would delete it. A start refuses such a store
// (slots.CheckStores) and a rank rejoining without its store refuses to
// start (checkMetaStore), so this is a second line: it guards the
// removal, which cannot be undone.
func (p *proc) storesServed() error {
	d := slots.NewDataDir(p.cfg.FS, p.cfg.DataDir)
	b, err := d.Stores()
	if err != nil || b == nil {
		return err // none: a cluster of an older build, as before
	}
	path := filepath.Join(p.cfg.DataDir, "metadata-stores")
	rec, err := slots.DecodeStores(path, b)
	if err != nil {
		return err
	}
	served := map[string]bool{}
	if p.s != nil {
		p.s.mu.Lock()
		list := p.s.mu.list
		p.s.mu.Unlock()
		if list != nil {
			for _, m := range list.Servers {
				served[m.MetaStore] = true
			}
		}
	}
	var unserved []string
	for _, e := range rec.Have {
		if !served[e.ID] {
			unserved = append(unserved, fmt.Sprintf("meta-%d (id %s, last seen in data dir %s on host %s)", e.Rank, e.ID, e.Path, e.Host))
		}
	}
	if len(unserved) == 0 {
		return nil
	}
	return fmt.Errorf("the cluster records (%s) metadata stores that no metadata server of it serves: %s; "+
		"the data of their objects would look orphaned. Restart the cluster with them (a full start finds them, or names what is missing): %w",
		path, strings.Join(unserved, "; "), pdc.ErrUnavailable)
}
