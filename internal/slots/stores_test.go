package slots

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// node is a server of a start for CheckStores: its rank, host and data
// dir, the stores it finds there (rank -> id; an id ending in "+" is an
// adopted one), the record it finds, and the ranks it abandons.
type node struct {
	host, dir string
	stores    map[int]string
	record    *Stores
	abandon   []uint64
}

func startOf(nodes ...node) []Server {
	out := make([]Server, len(nodes))
	for i, n := range nodes {
		inv := wire.SlotInventory{DirID: "id-" + n.dir, Path: "/data/" + n.dir, Abandon: n.abandon}
		for r, id := range n.stores {
			id, adopted := strings.CutSuffix(id, "+")
			inv.MetaStores = append(inv.MetaStores, wire.MetaStoreSeen{Rank: uint64(r), ID: id, Adopted: adopted})
		}
		if n.record != nil {
			inv.Stores = EncodeStores(*n.record)
		}
		out[i] = Server{Rank: i, Data: true, Meta: true, Host: n.host, Inventory: inv}
	}
	return out
}

func have(rank int, id, host string) StoreEntry {
	return StoreEntry{Rank: rank, ID: id, Epoch: 1, Host: host, Path: "/data/" + host, DirID: "id-" + host}
}

func TestCheckStoresFirstStartExpectsNothing(t *testing.T) {
	p, err := CheckStores(startOf(node{host: "a", dir: "a", stores: map[int]string{0: "X0"}}, node{host: "b", dir: "b", stores: map[int]string{1: "X1"}}))
	if err != nil || len(p.Abandoned) > 0 {
		t.Fatalf("a first start: %v, abandoned %v", err, p.Abandoned)
	}
	want := Stores{Epoch: 1, Have: []StoreEntry{have(0, "X0", "a"), have(1, "X1", "b")}}
	if !reflect.DeepEqual(p.Before, want) {
		t.Fatalf("record %+v, want %+v", p.Before, want)
	}
	want.Epoch = 2
	want.Have[0].Epoch, want.Have[1].Epoch = 2, 2
	if !reflect.DeepEqual(p.After, want) {
		t.Fatalf("record after the moves %+v, want %+v", p.After, want)
	}
}

// The hole: a full start on node a only does not see node b's store.
func TestCheckStoresRefusesAStoreNoServerSees(t *testing.T) {
	rec := &Stores{Epoch: 1, Have: []StoreEntry{have(0, "X0", "a"), have(1, "X1", "b")}}
	// -n 2 --hosts a: rank 1 on node a made a new, empty store there.
	for _, start := range [][]Server{
		startOf(node{host: "a", dir: "a", stores: map[int]string{0: "X0", 1: "NEW"}, record: rec}, node{host: "a", dir: "a", stores: map[int]string{0: "X0", 1: "NEW"}, record: rec}),
		startOf(node{host: "a", dir: "a", stores: map[int]string{0: "X0"}, record: rec}),
	} {
		_, err := CheckStores(start)
		if !errors.Is(err, pdc.ErrInvalid) {
			t.Fatalf("a start without node b's store: %v", err)
		}
		for _, want := range []string{"meta-1 (id X1)", "host b", "/data/b/meta-1", "the start is refused", "--abandon-store", "move the store", "on the node that holds"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("the refusal does not say %q: %v", want, err)
			}
		}
		if strings.Contains(err.Error(), "meta-0") {
			t.Fatalf("the refusal names store 0, which is here: %v", err)
		}
	}
	// The store moved into node a's data dir (under another rank's
	// name, even) is found by its id.
	if _, err := CheckStores(startOf(node{host: "a", dir: "a", stores: map[int]string{0: "X0", 1: "X1"}, record: rec})); err != nil {
		t.Fatalf("with the store moved to node a: %v", err)
	}
}

func TestCheckStoresAbandon(t *testing.T) {
	rec := &Stores{Epoch: 3, Have: []StoreEntry{have(0, "X0", "a"), have(1, "X1", "b")}}
	a := node{host: "a", dir: "a", stores: map[int]string{0: "X0", 1: "NEW"}, record: rec, abandon: []uint64{1}}
	p, err := CheckStores(startOf(a, a))
	if err != nil {
		t.Fatal(err)
	}
	next, ab := p.After, p.Abandoned
	gone := have(1, "X1", "b")
	gone.Epoch = 4
	if !reflect.DeepEqual(ab, []StoreEntry{gone}) || !reflect.DeepEqual(next.Abandoned, []StoreEntry{gone}) {
		t.Fatalf("abandoned %+v, record %+v", ab, next)
	}
	if next.Epoch != 5 || len(next.Have) != 2 || next.Have[1].ID != "NEW" {
		t.Fatalf("record after abandoning: %+v", next)
	}
	// The next start forgets it: nothing expected of it, even without
	// the flag.
	a = node{host: "a", dir: "a", stores: map[int]string{0: "X0", 1: "NEW"}, record: &next}
	if _, err := CheckStores(startOf(a, a)); err != nil {
		t.Fatalf("after abandoning: %v", err)
	}
	// Node b comes back with the abandoned store, its data dir with the
	// older record that still expects it: the newest record wins, and
	// the store is refused, not taken back beside store NEW.
	b := node{host: "b", dir: "b", stores: map[int]string{1: "X1"}, record: rec}
	_, err = CheckStores(startOf(a, b))
	if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "meta-1 (id X1) in data dir /data/b (rank 1, host b") ||
		!strings.Contains(err.Error(), "was abandoned") || !strings.Contains(err.Error(), "second copy") {
		t.Fatalf("the abandoned store back: %v", err)
	}
	// Moved aside (not a store any more), or once adopted, it is no
	// trouble.
	b.stores = map[int]string{1: "X1+"}
	if _, err := CheckStores(startOf(a, b)); err != nil {
		t.Fatalf("the abandoned store renamed: %v", err)
	}
	// --abandon-store of a store that is here does nothing.
	a.abandon = []uint64{0, 1}
	p, err = CheckStores(startOf(a, a))
	if err != nil || len(p.Abandoned) > 0 || len(p.After.Have) != 2 || len(p.After.Abandoned) != 1 {
		t.Fatalf("abandoning stores that are here: %v, %+v", err, p)
	}
}

// A resize to fewer metadata ranks adopts a store: the record written
// before the moves keeps it, and once renamed it is expected no more; the
// record written after the moves has it no more.
func TestCheckStoresFollowsAdoption(t *testing.T) {
	rec := &Stores{Epoch: 1, Have: []StoreEntry{have(0, "X0", "a"), have(1, "X1", "a"), have(2, "X2", "a")}}
	d := node{host: "a", dir: "a", stores: map[int]string{0: "X0", 1: "X1", 2: "X2"}, record: rec}
	p, err := CheckStores(startOf(d, d))
	if err != nil || len(p.Before.Have) != 3 || len(p.After.Have) != 2 || p.After.Have[1].ID != "X1" {
		t.Fatalf("shrinking: %v, %+v", err, p)
	}
	// A start killed once store 2 was adopted and renamed, before the
	// record after the moves was written: store 2 is found renamed.
	d.stores = map[int]string{0: "X0", 1: "X1", 2: "X2+"}
	for _, r := range []*Stores{rec, &p.Before, &p.After} {
		d.record = r
		q, err := CheckStores(startOf(d, d))
		if err != nil {
			t.Fatalf("after the adoption: %v", err)
		}
		if len(q.Before.Have) != 2 || q.Before.Have[0].ID != "X0" || q.Before.Have[1].ID != "X1" {
			t.Fatalf("after the adoption, the record is %+v", q.Before)
		}
	}
	// Once the record after the moves is written, the renamed store may
	// be anywhere, or gone.
	d.stores, d.record = map[int]string{0: "X0", 1: "X1"}, &p.After
	if _, err := CheckStores(startOf(d, d)); err != nil {
		t.Fatalf("the adopted store gone: %v", err)
	}
	// Nodes swapped (--hosts b,a): each rank opens a new store, and
	// adopts the other rank's store on its node.
	rec = &Stores{Epoch: 1, Have: []StoreEntry{have(0, "X0", "a"), have(1, "X1", "b")}}
	b := node{host: "b", dir: "b", stores: map[int]string{0: "N0", 1: "X1"}, record: rec}
	a := node{host: "a", dir: "a", stores: map[int]string{0: "X0", 1: "N1"}, record: rec}
	p, err = CheckStores(startOf(b, a))
	if err != nil || len(p.Before.Have) != 4 || len(p.After.Have) != 2 {
		t.Fatalf("nodes swapped: %v, %+v", err, p)
	}
	ids := map[string]int{}
	for _, e := range p.After.Have {
		ids[e.ID] = e.Rank
	}
	if !reflect.DeepEqual(ids, map[string]int{"N0": 0, "N1": 1}) {
		t.Fatalf("nodes swapped: the record after the moves has %v", ids)
	}
}

// Without a record (data dirs of an older build), a start goes on as
// before: nothing is expected, and a store without an identity is not
// recorded.
func TestCheckStoresOlderDataDirs(t *testing.T) {
	p, err := CheckStores(startOf(node{host: "a", dir: "a", stores: map[int]string{0: "X0", 3: ""}}))
	if err != nil || len(p.Before.Have) != 1 {
		t.Fatalf("%v, %+v", err, p)
	}
}

func TestStoresFile(t *testing.T) {
	d := NewDataDir(nil, t.TempDir())
	if b, err := d.Stores(); err != nil || b != nil {
		t.Fatalf("no file: %q, %v", b, err)
	}
	s := Stores{Epoch: 7, Have: []StoreEntry{have(0, "X0", "a"), {Rank: 1 << 20}}, Abandoned: []StoreEntry{have(3, "X3", "nodé")}}
	if err := d.SetStores(EncodeStores(s)); err != nil {
		t.Fatal(err)
	}
	b, err := d.Stores()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeStores("f", b)
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("read back %+v, %v; want %+v", got, err, s)
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x10
		if _, err := DecodeStores("f", c); err == nil {
			t.Fatalf("byte %d flipped: decoded", i)
		}
	}
	if _, err := DecodeStores("f", b[:len(b)-1]); !errors.Is(err, pdc.ErrCorrupt) {
		t.Fatalf("torn: %v", err)
	}
}
