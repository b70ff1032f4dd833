package search_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/region"
)

// queryBoth runs q through the index (as the planner chooses) and by a
// scan, checks that both agree, and returns the ids.
func queryBoth(t *testing.T, c *client.Client, q string) []uint64 {
	t.Helper()
	ctx := e2e.Ctx(t, time.Minute)
	idx, err := c.Query(ctx, q)
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	scan, err := c.Query(ctx, q, client.ScanOnly())
	if err != nil {
		t.Fatalf("query %q by scan: %v", q, err)
	}
	a, b := ids(idx), ids(scan)
	if !slices.Equal(a, b) {
		t.Fatalf("query %q: the index found %d objects %v, the scan %d %v", q, len(a), a, len(b), b)
	}
	return a
}

func ids(ms []client.Match) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// The DART test cases of PDC's dart_attr_dist_test, across processes with
// four servers: after a restart, after kill -9 of every server, after the
// cluster shrinks to three servers, and after every tag is deleted.
func TestSearchDARTCases(t *testing.T) {
	tmpdir := e2e.Up(t, 4)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	one, objs := createDARTObjects(ctx, t, c)
	cases := dartCases(t, one, objs)
	checkDARTCases(t, tmpdir, cases, "after the puts")

	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, "up", "-n", "4", "--tmpdir", tmpdir, "--datadir", datadir)
	checkDARTCases(t, tmpdir, cases, "after a restart")

	e2e.KillAll(t, tmpdir)
	e2e.MustRun(t, "up", "-n", "4", "--tmpdir", tmpdir, "--datadir", datadir)
	checkDARTCases(t, tmpdir, cases, "after kill -9 and a restart")

	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, "up", "-n", "3", "--tmpdir", tmpdir, "--datadir", datadir)
	checkDARTCases(t, tmpdir, cases, "after shrinking to 3 servers")

	// Delete every tag: every query finds nothing, by index and by scan.
	c = e2e.Connect(t, tmpdir)
	deleteDARTTags(ctx, t, c, len(objs))
	checkDARTEmpty(t, tmpdir, cases, "after deleting every tag")
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, "up", "-n", "4", "--tmpdir", tmpdir, "--datadir", datadir)
	checkDARTEmpty(t, tmpdir, cases, "after deleting every tag and a restart")
}

// dartCase is a query of the DART cases and the ids it must find.
type dartCase struct {
	q    string
	want []uint64
}

// createDARTObjects creates the objects of the DART cases and tags them:
// one with abcd=1234, and 1000 each with strNNNstr=strNNNstr and
// intkey=NNN.
func createDARTObjects(ctx context.Context, t *testing.T, c *client.Client) (one *client.Object, objs []*client.Object) {
	t.Helper()
	ct, _, err := c.CreateContainer(ctx, "dart", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	one, err = ct.CreateObject(ctx, "abcd-object", client.ObjectProps{Dims: []uint64{1}, Type: region.Int})
	if err != nil {
		t.Fatal(err)
	}
	if err := one.PutTag(ctx, "abcd", client.String("1234")); err != nil {
		t.Fatal(err)
	}
	specs := make([]client.ObjectSpec, 1000)
	for i := range specs {
		specs[i] = client.ObjectSpec{Name: fmt.Sprintf("o%03d", i), Props: client.ObjectProps{Dims: []uint64{1}, Type: region.Int}}
	}
	objs, err = ct.CreateObjects(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	var puts []client.TagPut
	for i, o := range objs {
		s := fmt.Sprintf("str%03dstr", i)
		puts = append(puts, client.TagPut{Object: o, Name: s, Value: client.String(s)},
			client.TagPut{Object: o, Name: "intkey", Value: client.Int64(int64(i))})
	}
	if err := c.PutTags(ctx, puts); err != nil {
		t.Fatal(err)
	}
	return one, objs
}

// dartCases are the queries of the DART cases, with the ids they find
// among the objects createDARTObjects made.
func dartCases(t *testing.T, one *client.Object, objs []*client.Object) []dartCase {
	t.Helper()
	idOf := func(is ...int) []uint64 {
		var out []uint64
		for _, i := range is {
			out = append(out, objs[i].ID())
		}
		slices.Sort(out)
		return out
	}
	span := func(lo, hi int) []int {
		var out []int
		for i := lo; i <= hi; i++ {
			out = append(out, i)
		}
		return out
	}
	var suffix09, infix09 []int
	for i := range 1000 {
		s := fmt.Sprintf("%03d", i)
		if strings.HasSuffix(s, "09") {
			suffix09 = append(suffix09, i)
		}
		if strings.Contains(s, "09") {
			infix09 = append(infix09, i)
		}
	}
	cases := []dartCase{
		{"abcd=1234", []uint64{one.ID()}},
		{"ab*=12*", []uint64{one.ID()}},
		{"*cd=*34", []uint64{one.ID()}},
		{"*bc*=*23*", []uint64{one.ID()}},
		{"str109str", idOf(109)},
		{"str109str=str109str", idOf(109)},
		{"str09*", idOf(span(90, 99)...)},
		{"*09str", idOf(suffix09...)},
		{"*09*", idOf(infix09...)},
		{"*=*09str", idOf(suffix09...)},
		{"intkey=109", idOf(109)},
		{"intkey=90..99", idOf(span(90, 99)...)},
		{"intkey=..2", idOf(0, 1, 2)},
		{"intkey=998..", idOf(998, 999)},
	}
	if len(suffix09) != 10 || len(infix09) != 20 {
		t.Fatalf("the cases expect 10 and 20 ids, not %d and %d", len(suffix09), len(infix09))
	}
	return cases
}

// checkDARTCases checks every case, by index and by scan, from a fresh
// client, and two through pdc query in another process.
func checkDARTCases(t *testing.T, tmpdir string, cases []dartCase, when string) {
	t.Helper()
	c := e2e.Connect(t, tmpdir) // a fresh client: nothing cached
	for _, k := range cases {
		if got := queryBoth(t, c, k.q); !slices.Equal(got, k.want) {
			t.Fatalf("%s: query %q found %d objects %v, want %d %v", when, k.q, len(got), got, len(k.want), k.want)
		}
	}
	// Another process, through the index alone.
	out := e2e.MustRun(t, "query", "--tmpdir", tmpdir, "--index", "--ids", "*09*")
	if n := len(strings.Fields(out)); n != 20 {
		t.Fatalf("%s: pdc query --index '*09*' printed %d ids:\n%s", when, n, out)
	}
	out = e2e.MustRun(t, "query", "--tmpdir", tmpdir, "str109str")
	if !strings.Contains(out, "o109") || !strings.Contains(out, "1 object") {
		t.Fatalf("%s: pdc query str109str printed:\n%s", when, out)
	}
}

// deleteDARTTags deletes every tag createDARTObjects put on the abcd
// object and the nobj others.
func deleteDARTTags(ctx context.Context, t *testing.T, c *client.Client, nobj int) {
	t.Helper()
	if err := mustOpen(t, c, "abcd-object").DeleteTag(ctx, "abcd"); err != nil {
		t.Fatal(err)
	}
	// Opened in one batch (the opens are not under test here; one at a
	// time they were 1000 calls more, and 1000 closes).
	names := make([]string, nobj)
	for i := range names {
		names[i] = fmt.Sprintf("o%03d", i)
	}
	opened, err := c.OpenObjects(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range opened {
		if err := o.DeleteTag(ctx, fmt.Sprintf("str%03dstr", i)); err != nil {
			t.Fatal(err)
		}
		if err := o.DeleteTag(ctx, "intkey"); err != nil {
			t.Fatal(err)
		}
	}
}

// checkDARTEmpty checks no case finds anything, by index or by scan.
func checkDARTEmpty(t *testing.T, tmpdir string, cases []dartCase, when string) {
	c := e2e.Connect(t, tmpdir)
	for _, k := range cases {
		if got := queryBoth(t, c, k.q); len(got) != 0 {
			t.Fatalf("%s: query %q still finds %v", when, k.q, got)
		}
	}
}

func mustOpen(t *testing.T, c *client.Client, name string) *client.Object {
	t.Helper()
	o, err := c.OpenObject(e2e.Ctx(t, 30*time.Second), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close(context.Background()) })
	return o
}

func TestSearchBadInput(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	c := e2e.Connect(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	ct, _, err := c.CreateContainer(ctx, "bad", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	o, err := ct.CreateObject(ctx, "o", client.ObjectProps{Dims: []uint64{1}, Type: region.Int})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.PutTag(ctx, "name", client.String("text")); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ q, says string }{
		{"", "empty query"},
		{"a*b", "misplaced *"},
		{"name=1..5", "matches only numeric tags"},
		{"name>5", "unknown operator"},
		{"name!=5", "unknown operator"},
		{strings.Repeat("k", 300), "over the limit"},
		{"k=" + strings.Repeat("v", 5000), "over the limit"},
		{"k=9..1", "empty range"},
	} {
		for _, opt := range []client.QueryOption{client.ScanOnly(), client.IndexOnly()} {
			_, err := c.Query(ctx, b.q, opt)
			if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), b.says) {
				t.Errorf("query %.40q: %v; want an invalid-argument error saying %q", b.q, err, b.says)
			}
		}
	}
	r := e2e.Run(t, nil, "query", "--tmpdir", tmpdir, "a*b")
	if r.Err == nil || !strings.Contains(r.Stderr, "misplaced *") {
		t.Errorf("pdc query a*b: %v, stderr %q", r.Err, r.Stderr)
	}
	// The servers keep serving.
	if got := queryBoth(t, c, "name=te*"); !slices.Equal(got, []uint64{o.ID()}) {
		t.Fatalf("name=te* after bad queries: %v", got)
	}
}

// A property test: random tags (text and numbers, overwritten and deleted)
// on objects spread over four servers, and random queries of every form;
// the index, the scan and a model in the test agree on every query.
func TestSearchIndexEqualsScan(t *testing.T) {
	tmpdir := e2e.Up(t, 4)
	c := e2e.Connect(t, tmpdir)
	ctx := e2e.Ctx(t, 2*time.Minute)
	ct, _, err := c.CreateContainer(ctx, "prop", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	word := func(alpha string, lo, hi int) string {
		n := lo + rng.IntN(hi-lo+1)
		b := make([]byte, n)
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return string(b)
	}
	const nobj = 150
	specs := make([]client.ObjectSpec, nobj)
	for i := range specs {
		specs[i] = client.ObjectSpec{Name: fmt.Sprintf("p%03d", i), Props: client.ObjectProps{Dims: []uint64{1}, Type: region.Int}}
	}
	objs, err := ct.CreateObjects(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	model := tagModel{}
	keys := []string{"a", "ab", "abc", "b", "ba", "cab", "x_y", "key", "k", "kk"}
	newValue := func() client.TagValue {
		switch rng.IntN(4) {
		case 0:
			return client.Int64(int64(rng.IntN(40) - 10))
		case 1:
			return client.Float64(float64(rng.IntN(20)) / 4)
		case 2:
			return client.String(word("ab12", 0, 7) + "\x00") // a C string
		}
		return client.String(word("abc12.", 1, 6))
	}
	for round := range 3 {
		putRandomTags(ctx, t, c, rng, word, newValue, objs, keys, model)
		// Delete some tags and, in the last round, some objects.
		deleteRandomTags(ctx, t, rng, objs, model, round == 2)
		checkIndexEqualsScan(ctx, t, c, rng, word, keys, model, round)
	}
}

// putRandomTags puts 300 random tags, on random objects under random or
// known keys, in one call, and in the model.
func putRandomTags(ctx context.Context, t *testing.T, c *client.Client, rng *rand.Rand, word func(string, int, int) string,
	newValue func() client.TagValue, objs []*client.Object, keys []string, model tagModel) {
	t.Helper()
	var puts []client.TagPut
	for range 300 {
		i := rng.IntN(len(objs))
		k := keys[rng.IntN(len(keys))]
		if rng.IntN(3) == 0 {
			k = word("abk", 1, 4)
		}
		v := newValue()
		puts = append(puts, client.TagPut{Object: objs[i], Name: k, Value: v})
	}
	if err := c.PutTags(ctx, puts); err != nil {
		t.Fatal(err)
	}
	for _, p := range puts {
		model.put(p)
	}
}

// deleteRandomTags deletes a tag of each of 40 random objects and, if
// objectsToo, the first 10 objects, in the store and the model.
func deleteRandomTags(ctx context.Context, t *testing.T, rng *rand.Rand, objs []*client.Object, model tagModel, objectsToo bool) {
	t.Helper()
	for range 40 {
		i := rng.IntN(len(objs))
		m := model[objs[i].ID()]
		for k := range m {
			if err := objs[i].DeleteTag(ctx, k); err != nil {
				t.Fatal(err)
			}
			delete(m, k)
			break
		}
	}
	if objectsToo {
		for i := 0; i < 10; i++ {
			if err := objs[i].Delete(ctx); err != nil {
				t.Fatal(err)
			}
			delete(model, objs[i].ID())
		}
	}
}

// checkIndexEqualsScan checks 150 random queries find, by index and by
// scan, what the model holds; a range over text tags is refused.
func checkIndexEqualsScan(ctx context.Context, t *testing.T, c *client.Client, rng *rand.Rand, word func(string, int, int) string,
	keys []string, model tagModel, round int) {
	t.Helper()
	for range 150 {
		q := randomQuery(rng, word, keys)
		want, textRange := model.want(t, q)
		if textRange {
			for _, opt := range []client.QueryOption{client.ScanOnly(), client.IndexOnly()} {
				if _, err := c.Query(ctx, q, opt); !errors.Is(err, pdc.ErrInvalid) {
					if errors.Is(err, pdc.ErrUnimplemented) {
						continue
					}
					t.Fatalf("query %q over text tags: %v, want an invalid-argument error", q, err)
				}
			}
			continue
		}
		if got := queryBoth(t, c, q); !slices.Equal(got, want) {
			t.Fatalf("round %d: query %q found %v, the model %v", round, q, got, want)
		}
	}
}

// tagModel is what the tags are: object id -> tag name -> value.
type tagModel map[uint64]map[string]client.TagValue

func (m tagModel) put(p client.TagPut) {
	if m[p.Object.ID()] == nil {
		m[p.Object.ID()] = map[string]client.TagValue{}
	}
	m[p.Object.ID()][p.Name] = p.Value
}

// want returns the ids that query q must find, sorted, and whether q is a
// range that meets text tags only (which is refused).
func (m tagModel) want(t *testing.T, q string) (ids []uint64, textRange bool) {
	t.Helper()
	pq, err := tagindex.Parse(q)
	if err != nil {
		t.Fatalf("generated query %q: %v", q, err)
	}
	sawText, sawNum := false, false
	for id, tags := range m {
		for k, v := range tags {
			if !pq.Key.Match(k) {
				continue
			}
			val := tagindex.ValueOf(v.Type, v.Value)
			if val.Num != nil {
				sawNum = true
			} else {
				sawText = true
			}
			if ok, _ := pq.MatchValue(k, val); ok {
				ids = append(ids, id)
				break
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), pq.Range && sawText && !sawNum
}

// randomQuery makes a query of a random form from the keys and alphabets
// the property test's tags use.
func randomQuery(rng *rand.Rand, word func(string, int, int) string, keys []string) string {
	frag := func(s string) string {
		if s == "" {
			return "a"
		}
		i := rng.IntN(len(s))
		j := i + 1 + rng.IntN(len(s)-i)
		return s[i:j]
	}
	pattern := func(lit string) string {
		switch rng.IntN(5) {
		case 0:
			return "*"
		case 1:
			return lit + "*"
		case 2:
			return "*" + lit
		case 3:
			return "*" + lit + "*"
		}
		return lit
	}
	key := pattern(frag(keys[rng.IntN(len(keys))]))
	if key == "*" && rng.IntN(2) == 0 {
		key = keys[rng.IntN(len(keys))]
	}
	switch rng.IntN(5) {
	case 0:
		return key
	case 1:
		lo, hi := rng.IntN(30)-12, rng.IntN(30)-5
		if lo > hi {
			lo, hi = hi, lo
		}
		switch rng.IntN(3) {
		case 0:
			return key + "=.." + strconv.Itoa(hi)
		case 1:
			return key + "=" + strconv.Itoa(lo) + ".."
		}
		return fmt.Sprintf("%s=%d..%d", key, lo, hi)
	case 2:
		return key + "=" + strconv.Itoa(rng.IntN(30)-10)
	}
	v := pattern(frag(word("abc12.", 1, 5)))
	if v == "*" {
		v = word("abc12.", 1, 3)
	}
	// ".." would make it a range.
	return key + "=" + strings.ReplaceAll(v, "..", ".a")
}

// allGather is an in-process MPI_Allgather for the ranks of a test.
type allGather struct {
	mu    sync.Mutex
	cond  *sync.Cond
	size  int
	round int
	parts [][]byte
	n     int
	out   [][]byte
}

func newAllGather(size int) *allGather {
	g := &allGather{size: size, parts: make([][]byte, size)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *allGather) rank(r int) client.AllGather {
	return func(ctx context.Context, part []byte) ([][]byte, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		round := g.round
		g.parts[r] = part
		g.n++
		if g.n == g.size {
			g.out, g.parts, g.n = g.parts, make([][]byte, g.size), 0
			g.round++
			g.cond.Broadcast()
		}
		for g.round == round {
			g.cond.Wait()
		}
		return g.out, nil
	}
}

// Three ranks query together, each asking a share of the servers: every
// rank gets the whole answer, with names, by index and by scan.
func TestSearchCollective(t *testing.T) {
	tmpdir := e2e.Up(t, 4)
	c := e2e.Connect(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	ct, _, err := c.CreateContainer(ctx, "coll", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	specs := make([]client.ObjectSpec, 200)
	for i := range specs {
		specs[i] = client.ObjectSpec{Name: fmt.Sprintf("c%03d", i), Props: client.ObjectProps{Dims: []uint64{1}, Type: region.Int}}
	}
	objs, err := ct.CreateObjects(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	var puts []client.TagPut
	for i, o := range objs {
		puts = append(puts, client.TagPut{Object: o, Name: fmt.Sprintf("k%d", i%7), Value: client.String(fmt.Sprintf("v%03d", i))},
			client.TagPut{Object: o, Name: "n", Value: client.Int64(int64(i))})
	}
	if err := c.PutTags(ctx, puts); err != nil {
		t.Fatal(err)
	}
	const size = 3
	clients := make([]*client.Client, size)
	for r := range clients {
		clients[r] = e2e.Connect(t, tmpdir)
	}
	for _, q := range []string{"k3", "k*=v1*", "*3=*9", "*=*0*", "n=10..60", "n=7"} {
		for _, opt := range []client.QueryOption{client.WithNames(), client.ScanOnly()} {
			want, err := c.Query(ctx, q, opt, client.WithNames())
			if err != nil || len(want) == 0 {
				t.Fatalf("query %q: %d matches, %v", q, len(want), err)
			}
			g := newAllGather(size)
			got := make([][]client.Match, size)
			errs := make([]error, size)
			var wg sync.WaitGroup
			for r := range size {
				wg.Go(func() {
					got[r], errs[r] = clients[r].QueryCollective(ctx, q, r, size, g.rank(r), opt, client.WithNames())
				})
			}
			wg.Wait()
			for r := range size {
				if errs[r] != nil || !slices.Equal(got[r], want) {
					t.Fatalf("query %q: rank %d got %d matches (%v), want %d", q, r, len(got[r]), errs[r], len(want))
				}
			}
		}
	}
}

// Without the index queries scan; without suffix trees infix queries scan;
// turning suffix-tree mode on at a restart rebuilds the index, which then
// answers infix queries.
func TestSearchIndexSettings(t *testing.T) {
	tmpdir := e2e.Up(t, 2, "--index=false")
	datadir := e2e.ServerDataDir(t, tmpdir)
	c := e2e.Connect(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	ct, _, err := c.CreateContainer(ctx, "settings", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for i := range 20 {
		o, err := ct.CreateObject(ctx, fmt.Sprint("s", i), client.ObjectProps{Dims: []uint64{1}, Type: region.Int})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.PutTag(ctx, "color", client.String(fmt.Sprintf("dark-%02d-blue", i))); err != nil {
			t.Fatal(err)
		}
		want = append(want, o.ID())
	}
	slices.Sort(want)
	if got := queryBoth(t, c, "color=*blue*"); !slices.Equal(got, want) {
		t.Fatalf("without the index: %v", got)
	}
	if _, err := c.Query(ctx, "color=dark*", client.IndexOnly()); !errors.Is(err, pdc.ErrUnimplemented) {
		t.Fatalf("index-only query without an index: %v", err)
	}

	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", datadir, "--dart-suffix-tree=false")
	c = e2e.Connect(t, tmpdir)
	if got, err := c.Query(ctx, "color=dark*", client.IndexOnly()); err != nil || !slices.Equal(ids(got), want) {
		t.Fatalf("index built at restart, prefix: %v, %v", ids(got), err)
	}
	if _, err := c.Query(ctx, "*=*blue*", client.IndexOnly()); !errors.Is(err, pdc.ErrUnimplemented) {
		t.Fatalf("index-only infix query without suffix trees: %v", err)
	}
	if got := queryBoth(t, c, "*=*-1*"); len(got) != 10 {
		t.Fatalf("infix without suffix trees found %d", len(got))
	}

	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, "up", "-n", "3", "--tmpdir", tmpdir, "--datadir", datadir)
	c = e2e.Connect(t, tmpdir)
	if got, err := c.Query(ctx, "*=*blue*", client.IndexOnly()); err != nil || !slices.Equal(ids(got), want) {
		t.Fatalf("suffix trees built at restart: %v, %v", ids(got), err)
	}
}

// Tag puts are acknowledged before their index entries reach the servers
// that hold them; a query from another client right after finds every one
// all the same (it fences the outboxes first), and so do deletes.
func TestSearchSeesEveryAcknowledgedPut(t *testing.T) {
	tmpdir := e2e.Up(t, 4)
	ctx := e2e.Ctx(t, 2*time.Minute)
	writer, reader := e2e.Connect(t, tmpdir), e2e.Connect(t, tmpdir)
	ct, _, err := writer.CreateContainer(ctx, "fence", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	specs := make([]client.ObjectSpec, n)
	for i := range specs {
		specs[i] = client.ObjectSpec{Name: fmt.Sprintf("f%05d", i), Props: client.ObjectProps{Dims: []uint64{1}, Type: region.Int}}
	}
	objs, err := ct.CreateObjects(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	var puts []client.TagPut
	for i, o := range objs {
		puts = append(puts, client.TagPut{Object: o, Name: "fence-label", Value: client.String(fmt.Sprintf("a-rather-long-label-%05d", i))})
	}
	for round := range 2 {
		if err := writer.PutTags(ctx, puts); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"fence-label=*label*", "fence-label=a-rather*", "fence-label=*-label-*"} {
			got, err := reader.Query(ctx, q, client.IndexOnly())
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != n {
				t.Fatalf("round %d: %q found %d objects right after the puts were acknowledged; want %d", round, q, len(got), n)
			}
		}
		for i, o := range objs {
			if i%2 == 0 {
				if err := o.DeleteTag(ctx, "fence-label"); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, err := reader.Query(ctx, "fence-label=*label*", client.IndexOnly())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n/2 {
			t.Fatalf("round %d: found %d objects right after half the tags were deleted; want %d", round, len(got), n/2)
		}
	}
}
