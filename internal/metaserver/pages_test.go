package metaserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// page asks svc for a page of container cont's members.
func page(svc *Service, q wire.ObjPageReq) (*wire.ObjPage, error) {
	if q.Version == 0 {
		q.Version = wire.PageVersion
	}
	resp, err := svc.objPage(context.Background(), &rpc.Request{Header: q.Marshal(nil), Client: "c"})
	if err != nil {
		return nil, err
	}
	var p wire.ObjPage
	if err := p.Unmarshal(resp.Header); err != nil {
		return nil, err
	}
	return &p, nil
}

// createMany creates n objects named prefix+i in cont on server 0 of c,
// in batches, and returns their ids, ascending.
func createMany(t *testing.T, c *testCluster, cont uint64, prefix string, n int) []uint64 {
	t.Helper()
	var ids []uint64
	for start := 0; start < n; start += 4096 {
		var b wire.ObjBatch
		for i := start; i < min(start+4096, n); i++ {
			b.Creates = append(b.Creates, wire.ObjCreate{ContID: cont, Name: c.nameOn(0, fmt.Sprintf("%s%d-", prefix, i)),
				Props: wire.ObjectProps{Dims: []uint64{4}, Type: 1}})
		}
		resp, err := c.svcs[0].objCreate(context.Background(), &rpc.Request{Header: b.Marshal(nil), Client: "c"})
		if err != nil {
			t.Fatal(err)
		}
		var res wire.ObjResults
		if err := res.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Items {
			if r.Code != 0 {
				t.Fatal(r.Message)
			}
			ids = append(ids, r.Meta.ID)
		}
	}
	c.svcs[0].SessionEnded("c")
	slices.Sort(ids)
	return ids
}

// walkPages asks svc for the pages of q, each after the last, until the
// end, calling del (if not nil) with each, and returns the members they
// listed, those marked added, and how many pages it took.
func walkPages(t *testing.T, svc *Service, q wire.ObjPageReq, del func(p *wire.ObjPage)) (got, added []uint64, pages int) {
	t.Helper()
	for {
		p, err := page(svc, q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, m := range p.Items {
			got = append(got, m.ID)
		}
		got = append(got, p.IDs...)
		added = append(added, p.Added...)
		if del != nil {
			del(p)
		}
		if p.Next == 0 {
			return got, added, pages
		}
		if p.Next <= q.After {
			t.Fatalf("page after %d ends at %d", q.After, p.Next)
		}
		q.After = p.Next
	}
}

// countPages counts with the count pages of q, each after the last, and
// returns the total and the steps it took.
func countPages(t *testing.T, svc *Service, q wire.ObjPageReq) (total, steps int) {
	t.Helper()
	for {
		p, err := page(svc, q)
		if err != nil {
			t.Fatal(err)
		}
		total += int(p.N)
		steps++
		if p.Next == 0 {
			return total, steps
		}
		q.After = p.Next
	}
}

// Pages of records, of ids and of counts walk a server's part of a
// container in id order, each bounded, resuming where the last ended,
// whatever is deleted between them; members added by reference are
// listed and marked.
func TestObjPages(t *testing.T) {
	c := newTestCluster(t, 1)
	svc := c.svcs[0]
	ids := createMany(t, c, contA, "p", 10000)
	other := createMany(t, c, contB, "q", 3)
	if n, err := members(svc, wire.Members{ContID: contA, ObjIDs: other[:2]}); err != nil || n != 2 {
		t.Fatalf("add: %d, %v", n, err)
	}
	all := slices.Sorted(slices.Values(append(slices.Clone(ids), other[:2]...)))

	walk := func(q wire.ObjPageReq, del func(p *wire.ObjPage)) (got, added []uint64, pages int) {
		t.Helper()
		return walkPages(t, svc, q, del)
	}
	// Records: the server's bound and its byte budget.
	got, _, pages := walk(wire.ObjPageReq{ContID: contA}, nil)
	if !slices.Equal(got, all) || pages != 3 {
		t.Fatalf("records: %d of %d in %d pages", len(got), len(all), pages)
	}
	got, _, pages = walk(wire.ObjPageReq{ContID: contA, Limit: 1000}, nil)
	if !slices.Equal(got, all) || pages != 11 {
		t.Fatalf("records by 1000: %d in %d pages", len(got), pages)
	}
	// Ids, with the added ones marked.
	got, added, pages := walk(wire.ObjPageReq{ContID: contA, IDsOnly: true, Limit: 3000}, nil)
	if !slices.Equal(got, all) || !slices.Equal(added, slices.Sorted(slices.Values(other[:2]))) || pages != 4 {
		t.Fatalf("ids: %d, added %v (want %v), %d pages", len(got), added, other[:2], pages)
	}
	// Counts, in steps.
	total, steps := countPages(t, svc, wire.ObjPageReq{ContID: contA, Count: true, Limit: 4000})
	if total != len(all) || steps != 3 {
		t.Fatalf("count %d in %d steps, want %d in 3", total, steps, len(all))
	}
	// Deleting what each page listed (as a container delete does) does not
	// disturb the walk.
	got, _, _ = walk(wire.ObjPageReq{ContID: contA, IDsOnly: true, Limit: 777}, func(p *wire.ObjPage) {
		resp, err := svc.objPurge(context.Background(), &rpc.Request{
			Header: (&wire.ObjPurge{Version: wire.PageVersion, ContID: contA, IDs: p.IDs}).Marshal(nil)})
		if err != nil {
			t.Fatal(err)
		}
		var n wire.Count
		if err := n.Unmarshal(resp.Header); err != nil || int(n.N) != len(p.IDs)-len(p.Added) {
			t.Fatalf("purged %d of %d (%d added): %v", n.N, len(p.IDs), len(p.Added), err)
		}
	})
	if !slices.Equal(got, all) {
		t.Fatalf("walk while purging: %d of %d", len(got), len(all))
	}
	if p, err := page(svc, wire.ObjPageReq{ContID: contA, Count: true}); err != nil || p.N != 0 || p.Next != 0 {
		t.Fatalf("left after the purge: %+v, %v", p, err)
	}
	// The added objects lost only the membership.
	if p, err := page(svc, wire.ObjPageReq{ContID: contB, IDsOnly: true}); err != nil || len(p.IDs) != 3 {
		t.Fatalf("container B after A's purge: %+v, %v", p, err)
	}
	// Bad requests.
	if _, err := page(svc, wire.ObjPageReq{Version: 2, ContID: contA}); !errors.Is(err, pdc.ErrVersion) {
		t.Fatalf("version 2: %v", err)
	}
	if _, err := page(svc, wire.ObjPageReq{}); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("no container: %v", err)
	}
	if p, err := page(svc, wire.ObjPageReq{ContID: contB, After: ^uint64(0)}); err != nil || len(p.Items) != 0 || p.Next != 0 {
		t.Fatalf("after the last id: %+v, %v", p, err)
	}
}

// A purge of an open object fails and changes nothing, unless forced; a
// purge sent again changes nothing more.
func TestObjPurgeOpenAndAgain(t *testing.T) {
	c := newTestCluster(t, 1)
	svc := c.svcs[0]
	ids := createMany(t, c, contA, "o", 3)
	purge := func(force bool) (uint64, error) {
		resp, err := svc.objPurge(context.Background(), &rpc.Request{
			Header: (&wire.ObjPurge{Version: wire.PageVersion, ContID: contA, IDs: ids, Force: force}).Marshal(nil)})
		if err != nil {
			return 0, err
		}
		var n wire.Count
		return n.N, n.Unmarshal(resp.Header)
	}
	svc.opens.open("other", ids[1], contA)
	if _, err := purge(false); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("purge of an open object: %v", err)
	}
	if p, _ := page(svc, wire.ObjPageReq{ContID: contA, Count: true}); p.N != 3 {
		t.Fatalf("a refused purge deleted %d", 3-p.N)
	}
	if n, err := purge(true); err != nil || n != 3 {
		t.Fatalf("forced purge: %d, %v", n, err)
	}
	if n, err := purge(true); err != nil || n != 0 {
		t.Fatalf("purge again: %d, %v", n, err)
	}
}
