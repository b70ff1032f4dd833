package stage_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// rawCaller makes typed calls on connections of its own to each server,
// as a client does, so that a test can send one request twice.
type rawCaller []*rpc.Conn

func (c rawCaller) Call(ctx context.Context, rank int, m wire.Method, req, resp wire.Message) error {
	rep, err := c[rank].Call(ctx, m, req.Marshal(nil), nil, nil)
	if err != nil {
		return err
	}
	return resp.Unmarshal(rep.Header)
}

func dialAll(t *testing.T, ctx context.Context, tmpdir string) rawCaller {
	t.Helper()
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := cluster.SecretIn(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	var c rawCaller
	for _, s := range list.Servers {
		conn, err := rpc.Dial(ctx, s.Addr, rpc.DialOptions{Secret: secret, ClientName: "remove-again"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		c = append(c, conn)
	}
	return c
}

// A removal of a prefix whose answer was lost, sent again after the
// producer produced under the prefix (a path again, and a new one), leaves
// those produces: each server's removal names the produces its listing
// gave, as the client sends it. Before, the copy removed a page of
// whatever the prefix held by then, acknowledged produces included.
func TestStagePrefixRemoveSentAgainSparesALaterProduce(t *testing.T) {
	sc := stageUp(t)
	ctx := e2e.Ctx(t, time.Minute)
	const ns = "again"
	for i, p := range []string{"d/a.dat", "d/b.dat", "d/c.dat", "keep.dat"} {
		writeFile(t, sc.prodA, p, randBytes(uint64(70+i), 500+i))
	}
	sc.produceIn(t, ns, "d/a.dat", "d/b.dat", "keep.dat")

	calls := wire.Stub{Caller: dialAll(t, ctx, sc.tmpdir)}
	type removal struct {
		rank int
		q    wire.StageRemoveReq
	}
	var removals []removal
	for rank := range calls.Caller.(rawCaller) {
		page, err := calls.StageList(ctx, rank, &wire.StageListReq{Version: wire.StageVersion, Namespace: ns, Prefix: "d/"})
		if err != nil {
			t.Fatal(err)
		}
		if page.Next != "" {
			t.Fatalf("server %d: a listing of two records takes more than a page", rank)
		}
		if len(page.Records) > 0 {
			removals = append(removals, removal{rank, wire.StageRemoveReq{Version: wire.StageVersion, Namespace: ns, Prefix: "d/",
				Produces: wire.StageProduces(page.Records)}})
		}
	}
	removeAll := func() (n uint64) {
		t.Helper()
		for _, r := range removals {
			got, err := calls.StageRemove(ctx, r.rank, &r.q)
			if err != nil {
				t.Fatal(err)
			}
			n += got.N
		}
		return n
	}
	if n := removeAll(); n != 2 {
		t.Fatalf("the removal of d/ removed %d records, want 2", n)
	}
	// Produced after the removal was made, and acknowledged; then the
	// removal, whose answer (say) never came, is sent again.
	sc.produceIn(t, ns, "d/a.dat", "d/c.dat")
	if n := removeAll(); n != 0 {
		t.Fatalf("the removal sent again removed %d records, want none", n)
	}
	out := sc.stageRun(t, nil, "ls", "--namespace", ns)
	if !regexpLine(out, "d/a.dat", "1") || !regexpLine(out, "d/c.dat", "1") || !regexpLine(out, "keep.dat", "1") || strings.Contains(out, "d/b.dat") {
		t.Fatalf("pdc stage ls after the removal sent again:\n%s", out)
	}
	// The client's own removal, by pages of one, takes them.
	c := e2e.Connect(t, sc.tmpdir, client.WithHost("node-b"), client.WithNamespace(ns), client.WithPageSize(1))
	if n, err := c.RemoveStagedPrefix(ctx, "d/"); err != nil || n != 2 {
		t.Fatalf("RemoveStagedPrefix d/: %d, %v; want 2", n, err)
	}
	if out := sc.stageRun(t, nil, "ls", "--namespace", ns); !regexpLine(out, "keep.dat", "1") || strings.Contains(out, "d/") {
		t.Fatalf("pdc stage ls after RemoveStagedPrefix:\n%s", out)
	}
}
