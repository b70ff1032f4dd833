package server

import (
	"testing"

	"github.com/pdcgo/pdc/internal/cluster"
)

// Two servers restarted at new addresses: the refresh for the first
// adopts the new list, which has both; the refresh for the second must
// still see that its pool dials the dead address, or tombstones for it
// are never delivered and a data server never again reaches that
// metadata server. (Compared with the list kept, it saw no change.)
func restartedLists(t *testing.T) (dir string, old, cur *cluster.List) {
	dir = t.TempDir()
	mk := func(a1, a2 string) *cluster.List {
		return &cluster.List{Size: 3, Servers: []cluster.Server{
			{Rank: 0, Addr: "127.0.0.1:1", Roles: "both"},
			{Rank: 1, Addr: a1, Roles: "both"},
			{Rank: 2, Addr: a2, Roles: "both"},
		}}
	}
	old, cur = mk("127.0.0.1:11", "127.0.0.1:12"), mk("127.0.0.1:21", "127.0.0.1:22")
	if err := cluster.WriteList(dir, cur); err != nil { // ranks 1 and 2 restarted
		t.Fatal(err)
	}
	return dir, old, cur
}

func TestDataPeersRefreshAfterTwoRestarts(t *testing.T) {
	dir, old, cur := restartedLists(t)
	p := newDataPeers(dir, nil, old)
	defer p.Close()
	for _, r := range []int{1, 2} {
		if _, err := p.pool(r); err != nil {
			t.Fatal(err)
		}
	}
	if !p.refresh(1) {
		t.Fatal("refresh of rank 1 saw no change")
	}
	changed := p.refresh(2)
	pl, err := p.pool(2)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Addr() != cur.Servers[2].Addr {
		t.Fatalf("rank 2 restarted at %s; after refresh (changed=%v) its pool still dials %s", cur.Servers[2].Addr, changed, pl.Addr())
	}
}

func TestMetaPeersRefreshAfterTwoRestarts(t *testing.T) {
	dir, old, cur := restartedLists(t)
	p := newMetaPeers(dir, nil, old)
	defer p.Close()
	for _, i := range []int{1, 2} {
		if _, err := p.pool(i); err != nil {
			t.Fatal(err)
		}
	}
	if !p.refresh(1) {
		t.Fatal("refresh of index 1 saw no change")
	}
	changed := p.refresh(2)
	pl, err := p.pool(2)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Addr() != cur.Servers[2].Addr {
		t.Fatalf("rank 2 restarted at %s; after refresh (changed=%v) its pool still dials %s", cur.Servers[2].Addr, changed, pl.Addr())
	}
}
