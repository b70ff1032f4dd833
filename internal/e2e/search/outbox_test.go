package search_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/region"
)

// destinations returns the servers other than self that hold entries of
// ops.
func destinations(p *tagindex.Partition, self int, ops ...[]tagindex.Op) map[int]bool {
	out := map[int]bool{}
	for _, o := range ops {
		for _, op := range o {
			d, err := p.EntryOwner(op.Key)
			if err != nil {
				panic(err)
			}
			if d != self {
				out[d] = true
			}
		}
	}
	return out
}

// killRank kills the server of rank with SIGKILL and waits for it to go.
func killRank(t *testing.T, tmpdir string, rank int) {
	t.Helper()
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Servers {
		if s.Rank != rank {
			continue
		}
		if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), s.PID); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no server of rank %d in %s", rank, tmpdir)
}

// An older change that a restart delivers again must not undo a newer one.
// Object o on server S gets tag k=A and then k=B while server E is down.
// The first change has entries on servers D and E, the second only on D:
// D applies both and S deletes the second's outbox record, while the
// first's stays for E. When S restarts, it delivers the first record again.
// D must not apply it a second time after the newer change: that would
// bring back the entries of A, which B deleted, and queries for A would
// find o.
func TestRedeliveryKeepsNewerChanges(t *testing.T) {
	tmpdir := e2e.Up(t, 3)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "redeliver", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	o, err := ct.CreateObject(ctx, "redelivered", client.ObjectProps{Dims: []uint64{1}, Type: region.Int})
	if err != nil {
		t.Fatal(err)
	}
	self := o.Info().Server
	p := tagindex.For(3)
	// Find a key and two values that route as the scenario needs. Values
	// of one repeated letter have every suffix on one server (D); so does
	// the key's K entry, while its dictionary entries reach E.
	var key, a, b string
	var d, e int
	found := false
	for l := byte('a'); l <= 'z' && !found; l++ {
		va, vb := strings.Repeat(string(l), 4), strings.Repeat(string(l), 6)
		entries := func(v string, del bool) []tagindex.Op {
			raw := []byte(v)
			return tagindex.ObjectEntries(key, int32(region.String), raw, tagindex.ValueOf(region.String, raw), o.ID(), true, del)
		}
		for i := 0; i < 26*26 && !found; i++ {
			key = fmt.Sprintf("%c%c%c-key", l, 'a'+i%26, 'a'+i/26)
			first := destinations(p, self, entries(va, false), tagindex.DictEntries(key, true))
			second := destinations(p, self, entries(va, true), entries(vb, false))
			dk, err := p.EntryOwner(tagindex.KeyPrefix(key))
			if err != nil {
				t.Fatal(err)
			}
			if dk == self || p.Owner(va) != dk || len(second) != 1 || !second[dk] {
				continue
			}
			for cand := range first {
				if cand != dk {
					a, b, d, e, found = va, vb, dk, cand, true
				}
			}
		}
	}
	if !found {
		t.Fatal("no key and values route as this test needs")
	}
	t.Logf("object on server %d, key %q: %q then %q; D=%d, E=%d", self, key, a, b, d, e)

	killRank(t, tmpdir, e)
	if err := o.PutTag(ctx, key, client.String(a)); err != nil {
		t.Fatal(err)
	}
	if err := o.PutTag(ctx, key, client.String(b)); err != nil {
		t.Fatal(err)
	}
	// The fence fails at E, but it returns only once S has tried every
	// change at its servers: D has both.
	if err := c.SyncIndex(ctx); err == nil {
		t.Fatal("the index fence succeeded with a server down")
	}
	c.Close()
	e2e.MustRun(t, "down", "--tmpdir", tmpdir, "--timeout", "20s")
	e2e.MustRun(t, "up", "-n", "3", "--tmpdir", tmpdir, "--datadir", datadir)
	c2 := e2e.Connect(t, tmpdir)
	for _, q := range []string{key + "=" + a, "*=" + a, key + "=" + b, "*=" + b} {
		want := []uint64{}
		if q[len(q)-len(b):] == b {
			want = []uint64{o.ID()}
		}
		if got := queryBoth(t, c2, q); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("after the restart, %q finds %v, want %v", q, got, want)
		}
	}
}

// The index equals the tags after every round of: a server killed, tags
// put and deleted on the objects of the others (their index updates for it
// wait in the outboxes, some delivered elsewhere, some not), every server
// killed at once, and all started again. Values repeat and change, so
// that redelivered updates meet newer ones.
func TestIndexSurvivesCrashesWithAServerDown(t *testing.T) {
	tmpdir := e2e.Up(t, 3)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 3*time.Minute)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	word := func(alpha string, lo, hi int) string {
		b := make([]byte, lo+rng.IntN(hi-lo+1))
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return string(b)
	}
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "crashes", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const nobj = 120
	specs := make([]client.ObjectSpec, nobj)
	for i := range specs {
		specs[i] = client.ObjectSpec{Name: fmt.Sprintf("c%03d", i), Props: client.ObjectProps{Dims: []uint64{1}, Type: region.Int}}
	}
	objs, err := ct.CreateObjects(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "ab", "abc", "b", "ba", "cab", "key", "k"}
	model := tagModel{}
	// Three rounds, each with another server down: every rank's outbox
	// records wait for it once (four rounds of a random rank covered
	// fewer for sure).
	for round := range 3 {
		down := round
		killRank(t, tmpdir, down)
		t.Logf("round %d: server %d down", round, down)
		var live []*client.Object
		for _, o := range objs {
			if o.Info().Server != down {
				live = append(live, o)
			}
		}
		for batch := range 3 {
			putAndDeleteTags(ctx, t, c, rng, word, live, keys, model, round)
			if batch == 1 {
				// Let the live servers take what is theirs: the records for
				// the dead one stay, some of their parts applied.
				_ = c.SyncIndex(ctx)
			}
		}
		c.Close()
		e2e.KillAll(t, tmpdir)
		e2e.MustRun(t, "up", "-n", "3", "--tmpdir", tmpdir, "--datadir", datadir)
		c = e2e.Connect(t, tmpdir)
		for i := range objs {
			objs[i] = mustOpen(t, c, objs[i].Name())
		}
		checkQueriesMatchModel(t, c, rng, word, keys, model, round, down)
	}
}

// putAndDeleteTags puts 100 random tags on the live objects in one call,
// then deletes a tag of each of 15 random live objects, keeping the model
// in step.
func putAndDeleteTags(ctx context.Context, t *testing.T, c *client.Client, rng *rand.Rand, word func(string, int, int) string,
	live []*client.Object, keys []string, model tagModel, round int) {
	t.Helper()
	var puts []client.TagPut
	for range 100 {
		v := client.String(word("abc12", 1, 5))
		if rng.IntN(4) == 0 {
			v = client.Int64(int64(rng.IntN(20)))
		}
		puts = append(puts, client.TagPut{Object: live[rng.IntN(len(live))], Name: keys[rng.IntN(len(keys))], Value: v})
	}
	if err := c.PutTags(ctx, puts); err != nil {
		t.Fatalf("round %d: put on the live servers: %v", round, err)
	}
	for _, p := range puts {
		model.put(p)
	}
	for range 15 {
		o := live[rng.IntN(len(live))]
		for k := range model[o.ID()] {
			if err := o.DeleteTag(ctx, k); err != nil {
				t.Fatal(err)
			}
			delete(model[o.ID()], k)
			break
		}
	}
}

// checkQueriesMatchModel checks 60 random queries, each by index and by
// scan, find what the model holds.
func checkQueriesMatchModel(t *testing.T, c *client.Client, rng *rand.Rand, word func(string, int, int) string,
	keys []string, model tagModel, round, down int) {
	t.Helper()
	for range 60 {
		q := randomQuery(rng, word, keys)
		want, textRange := model.want(t, q)
		if textRange {
			continue
		}
		if got := queryBoth(t, c, q); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("round %d (server %d was down): %q found %v, the model %v", round, down, q, got, want)
		}
	}
}
