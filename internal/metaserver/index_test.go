package metaserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/outbox"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/postings"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// testCluster is n metadata services in one process whose outboxes reach
// each other through fakePeers.
type testCluster struct {
	t    *testing.T
	dirs []string
	svcs []*Service

	mu   sync.Mutex
	down map[int]bool // guarded by mu: indexes that refuse index updates
	// gate, if set, holds index updates for gated until it is closed.
	gate  chan struct{}
	gated int
	// atGate, if set, hears of each index update held at gate.
	atGate chan struct{}

	flushBytes int // Config.IndexFlushBytes
	// fs holds the file systems of servers not on the operating
	// system's, by index: their dirs are paths in it.
	fs map[int]vfs.FS
}

func newTestCluster(t *testing.T, n int) *testCluster {
	return newTestClusterFlushing(t, n, 0)
}

// newTestClusterFlushing makes servers that write their index entries to
// disk runs once flushBytes of them are in memory (0: the default).
func newTestClusterFlushing(t *testing.T, n, flushBytes int) *testCluster {
	c := &testCluster{t: t, down: map[int]bool{}, flushBytes: flushBytes}
	for range n {
		c.dirs = append(c.dirs, t.TempDir())
	}
	c.open()
	t.Cleanup(c.close)
	return c
}

func (c *testCluster) open() {
	c.svcs = make([]*Service, len(c.dirs))
	for i, d := range c.dirs {
		cp := c.t.TempDir()
		if c.fs[i] != nil {
			cp = d + "-checkpoints"
		}
		s, err := Open(Config{Dir: d, CheckpointDir: cp, FS: c.fs[i], Logger: slog.New(slog.DiscardHandler), IndexFlushBytes: c.flushBytes})
		if err != nil {
			c.t.Fatal(err)
		}
		c.svcs[i] = s
	}
	for i, s := range c.svcs {
		s.SetPlacement(i, len(c.svcs))
		s.MovesDone()
	}
	for _, s := range c.svcs {
		if err := s.StartIndex(context.Background(), fakePeers{c}); err != nil {
			c.t.Fatal(err)
		}
		s.SetReady()
	}
}

func (c *testCluster) close() {
	for _, s := range c.svcs {
		if s != nil {
			s.Close()
		}
	}
	c.svcs = nil
}

func (c *testCluster) setDown(i int, down bool) {
	c.mu.Lock()
	c.down[i] = down
	c.mu.Unlock()
}

type fakePeers struct{ c *testCluster }

func (p fakePeers) Call(ctx context.Context, index int, m wire.Method, hdr []byte) error {
	p.c.mu.Lock()
	down := p.c.down[index]
	gate, atGate := p.c.gate, p.c.atGate
	p.c.mu.Unlock()
	if gate != nil && index == p.c.gated {
		if atGate != nil {
			select {
			case atGate <- struct{}{}:
			default:
			}
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if down {
		return fmt.Errorf("index %d is down: %w", index, pdc.ErrUnavailable)
	}
	if _, err := p.c.svcs[index].indexApply(ctx, &rpc.Request{Method: m, Header: hdr}); err != nil {
		// As the wire brings it: the server answered.
		return &pdc.ServerError{Server: fmt.Sprint("index ", index), Method: m.String(), Msg: err.Error(), Err: err}
	}
	return nil
}

func (c *testCluster) owner(name string) *Service {
	return c.svcs[placement.Owner(placement.Key(name, 0), len(c.svcs))]
}

func (c *testCluster) create(name string) uint64 {
	resp, err := c.owner(name).objCreate(context.Background(), createReq(name))
	if err != nil {
		c.t.Fatal(err)
	}
	var res wire.ObjResults
	if err := res.Unmarshal(resp.Header); err != nil || res.Items[0].Code != 0 {
		c.t.Fatalf("create %s: %v %+v", name, err, res.Items)
	}
	return res.Items[0].Meta.ID
}

func (c *testCluster) put(id uint64, key, value string) {
	if err := c.tryPut(id, key, value); err != nil {
		c.t.Fatal(err)
	}
}

func (c *testCluster) tryPut(id uint64, key, value string) error {
	b := wire.TagBatch{Puts: []wire.TagPut{{ID: id, Name: key, Type: int32(region.String), Value: []byte(value)}}}
	svc := c.svcs[placement.OwnerOfID(id, len(c.svcs))]
	resp, err := svc.tagPut(context.Background(), &rpc.Request{Header: b.Marshal(nil)})
	if err != nil {
		return err
	}
	var res wire.TagResults
	if err := res.Unmarshal(resp.Header); err != nil || res.Codes[0] != 0 {
		return fmt.Errorf("put %s: %v %v", key, err, res.Messages)
	}
	return nil
}

// del deletes a tag of an object.
func (c *testCluster) del(id uint64, key string) {
	k := wire.TagKey{ID: id, Name: key}
	svc := c.svcs[placement.OwnerOfID(id, len(c.svcs))]
	if _, err := svc.tagDelete(context.Background(), &rpc.Request{Header: k.Marshal(nil)}); err != nil {
		c.t.Fatal(err)
	}
}

// putAll puts tags (object id -> key, value) with one request per server:
// each server commits its part at once, as one outbox record.
func (c *testCluster) putAll(ids []uint64, key func(int) string, value func(int) string) {
	byOwner := map[int]*wire.TagBatch{}
	for i, id := range ids {
		o := placement.OwnerOfID(id, len(c.svcs))
		if byOwner[o] == nil {
			byOwner[o] = &wire.TagBatch{}
		}
		byOwner[o].Puts = append(byOwner[o].Puts, wire.TagPut{ID: id, Name: key(i), Type: int32(region.String), Value: []byte(value(i))})
	}
	for o, b := range byOwner {
		resp, err := c.svcs[o].tagPut(context.Background(), &rpc.Request{Header: b.Marshal(nil)})
		if err != nil {
			c.t.Fatal(err)
		}
		var res wire.TagResults
		if err := res.Unmarshal(resp.Header); err != nil {
			c.t.Fatal(err)
		}
		for i, code := range res.Codes {
			if code != 0 {
				c.t.Fatalf("put %s on %d: %s", b.Puts[i].Name, b.Puts[i].ID, res.Messages[i])
			}
		}
	}
}

// step asks server i one step of q.
func (c *testCluster) step(i int, q string, st tagindex.Step, terms ...string) ([]uint64, []string) {
	tq := wire.TagQuery{Query: q, Step: uint32(st), Terms: terms, NoSuffix: !c.svcs[i].ix.suffix}
	resp, err := c.svcs[i].tagQuery(context.Background(), &rpc.Request{Header: tq.Marshal(nil)})
	if err != nil {
		c.t.Fatal(err)
	}
	var res wire.TagQueryResult
	if err := res.Unmarshal(resp.Header); err != nil {
		c.t.Fatal(err)
	}
	ids, strs, err := wire.ParseQueryPayload(&res, resp.Payload[0])
	if err != nil {
		c.t.Fatal(err)
	}
	return ids, strs
}

// query runs q's index plan (as the client does: after fencing every
// outbox), or a scan.
func (c *testCluster) query(q string, scan bool) []uint64 {
	for _, s := range c.svcs {
		if _, err := s.indexFence(context.Background(), &rpc.Request{}); err != nil {
			c.t.Fatal(err)
		}
	}
	return c.lookup(q, scan)
}

// lookup is query without the fences before it.
func (c *testCluster) lookup(q string, scan bool) []uint64 {
	pq, err := tagindex.Parse(q)
	if err != nil {
		c.t.Fatal(err)
	}
	plan := tagindex.For(len(c.svcs)).Plan(pq, true)
	var out []uint64
	if scan || plan.Scan {
		for i := range c.svcs {
			ids, _ := c.step(i, q, tagindex.StepScan)
			out = append(out, ids...)
		}
	} else {
		for _, i := range plan.Servers {
			ids, keys := c.step(i, q, plan.First, plan.Terms...)
			out = append(out, ids...)
			for _, k := range keys {
				ids, _ := c.step(tagindex.For(len(c.svcs)).Owner(k), q, tagindex.StepByKey, k)
				out = append(out, ids...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// A server that holds index entries is down when a tag is put: the owner
// acknowledges the put, keeps the update in its outbox across a restart
// (with the other server still down), and delivers it once the other server
// is back; then the index finds the tag.
func TestOutboxSurvivesRestartUntilDelivered(t *testing.T) {
	c := newTestCluster(t, 2)
	// An object and a key whose K entry lives on the other server.
	id, key := c.createWithRemoteKey(0)
	other := tagindex.For(2).Owner(key)
	c.setDown(other, true)
	c.put(id, key, "value")
	q := key + "=value"
	if got := c.query(q, true); !slices.Equal(got, []uint64{id}) {
		t.Fatalf("scan: %v", got)
	}
	if got := c.query(q, false); len(got) != 0 {
		t.Fatalf("the index found %v while its server was down", got)
	}

	// Restart everything with the server still down: the record stays.
	c.close()
	c.open()
	if got := c.query(q, false); len(got) != 0 {
		t.Fatalf("the index found %v while its server was down", got)
	}
	c.close()
	c.setDown(other, false)
	c.open() // start delivers the outbox before serving
	if got := c.query(q, false); !slices.Equal(got, []uint64{id}) {
		t.Fatalf("after the server came back the index finds %v, want [%d]", got, id)
	}
	// Delivered records are gone once the deliverers have stopped, and so
	// are their marks.
	c.close()
	wantOutboxesEmpty(t, c.dirs)
}

// TestRedeliveryKeepsNewerChanges: a part of an outbox record that its
// server applied is marked, so that a restart does not deliver it again
// after newer changes of the same entries (which it would undo); marks go
// with their record. Object o on server S gets k=A, then k=B, while server
// E is down: the first change has entries on D and E, the second only on
// D. (The same scenario runs across processes in internal/e2e/search.)
func TestRedeliveryKeepsNewerChanges(t *testing.T) {
	c := newTestCluster(t, 3)
	p := tagindex.For(3)
	dests := func(self int, ops ...[]tagindex.Op) map[int]bool {
		out := map[int]bool{}
		for _, o := range ops {
			for _, op := range o {
				if d, _ := p.EntryOwner(op.Key); d != self {
					out[d] = true
				}
			}
		}
		return out
	}
	var id uint64
	var key, a, b string
	var e int
	for i := 0; id == 0 && i < 26*26*26; i++ {
		l := byte('a' + i%26)
		name, k := fmt.Sprint("o", i), fmt.Sprintf("%c%c%c-key", l, 'a'+(i/26)%26, 'a'+i/676)
		self := placement.Owner(placement.Key(name, 0), 3)
		va, vb := strings.Repeat(string(l), 4), strings.Repeat(string(l), 6)
		ents := func(v string, del bool) []tagindex.Op {
			return tagindex.ObjectEntries(k, int32(region.String), []byte(v), tagindex.ValueOf(region.String, []byte(v)), 1, true, del)
		}
		second := dests(self, ents(va, true), ents(vb, false))
		d := p.Owner(k)
		if d == self || p.Owner(va) != d || len(second) != 1 || !second[d] {
			continue
		}
		for cand := range dests(self, ents(va, false), tagindex.DictEntries(k, true)) {
			if cand != d {
				key, a, b, e = k, va, vb, cand
				id = c.create(name)
				break
			}
		}
	}
	if id == 0 {
		t.Fatal("no key and values route as this test needs")
	}
	c.setDown(e, true)
	c.put(id, key, a)
	c.put(id, key, b)
	c.query(key+"="+b, true) // fences: D has both changes
	// The crash stops the deliverers first: what they acknowledged is in
	// the store. E is still down, so nothing changes the outbox after.
	c.crashAndReopen()
	if marks := c.keys([]byte{'q'}); len(marks) != 1 {
		t.Fatalf("%d outbox marks, want 1 (D's part of the first record)", len(marks))
	}
	c.setDown(e, false)
	for _, q := range []string{key + "=" + a, "*=" + a, key + "=" + b, "*=" + b} {
		want := []uint64(nil)
		if strings.HasSuffix(q, "="+b) {
			want = []uint64{id}
		}
		for _, scan := range []bool{false, true} {
			if got := c.query(q, scan); !slices.Equal(got, want) {
				t.Fatalf("after the restart, %q (scan %v) finds %v, want %v", q, scan, got, want)
			}
		}
	}
	// E's part may wait for a retry: a start delivers it before serving.
	// Closing waits for the deliverers, which delete what they delivered.
	c.close()
	c.open()
	c.close()
	wantOutboxesEmpty(t, c.dirs)
}

// storedKeys counts the keys with prefix p in the stores of dirs, which
// no service has open.
func storedKeys(t *testing.T, dirs []string, p byte) int {
	t.Helper()
	n := 0
	for _, d := range dirs {
		st, err := metastore.Open(metastore.Options{Dir: d, CacheBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		it, err := st.NewIter(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.SeekGE([]byte{p}); ok && it.Key()[0] == p; ok = it.Next() {
			n++
		}
		it.Close()
		st.Close()
	}
	return n
}

// Index entries and waiting outbox records move to their new servers when
// the cluster grows; the index then answers as a scan does.
func TestIndexMovesWithTheCluster(t *testing.T) {
	c := newTestCluster(t, 2)
	ids := map[string]uint64{}
	for i := range 60 {
		name := fmt.Sprint("o", i)
		ids[name] = c.create(name)
	}
	c.setDown(1, true) // leave some updates in the outbox
	for i := range 30 {
		name := fmt.Sprint("o", i)
		c.put(ids[name], fmt.Sprintf("k%02d", i%7), fmt.Sprintf("v%03d", i))
	}
	// The rest in one commit per server: records of many objects, which
	// the move splits among their new owners.
	var rest []uint64
	for i := 30; i < 60; i++ {
		rest = append(rest, ids[fmt.Sprint("o", i)])
	}
	c.putAll(rest, func(i int) string { return fmt.Sprintf("k%02d", (i+30)%7) }, func(i int) string { return fmt.Sprintf("v%03d", i+30) })
	c.close()
	c.setDown(1, false)

	// Grow to three: open the old stores and a new one, and move.
	c.dirs = append(c.dirs, t.TempDir())
	svcs := make([]*Service, 3)
	for i, d := range c.dirs {
		s, err := Open(Config{Dir: d, CheckpointDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		s.SetPlacement(i, 3)
		svcs[i] = s
	}
	c.svcs = svcs
	ctx := context.Background()
	for _, s := range svcs {
		_, err := s.MoveForeign(ctx, func(ctx context.Context, index int, kvs *wire.KVBatch) error {
			return svcs[index].importKVs(kvs)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range svcs {
		s.MovesDone()
	}
	for _, s := range svcs {
		if err := s.StartIndex(ctx, fakePeers{c}); err != nil {
			t.Fatal(err)
		}
		s.SetReady()
	}
	for _, q := range []string{"k03", "k0*", "*3", "*0*=*1*", "k01=v*", "*=v05*", "*=*7", "k02=v002", "*=*00*", "*=v04*", "*=*5"} {
		scan, idx := c.query(q, true), c.query(q, false)
		if !slices.Equal(scan, idx) || len(scan) == 0 {
			t.Fatalf("after growing to 3 servers, %q: scan %v, index %v", q, scan, idx)
		}
	}
	// Every value is found, one by one.
	for i := range 60 {
		q := fmt.Sprintf("*=v%03d", i)
		if got := c.query(q, false); !slices.Equal(got, []uint64{ids[fmt.Sprint("o", i)]}) {
			t.Fatalf("after growing to 3 servers, %q: index %v, want [%d]", q, got, ids[fmt.Sprint("o", i)])
		}
	}
}

// Tag puts are acknowledged before their index updates are delivered, but
// only up to the outbox's bound: with a server that holds them stalled,
// the backlog never grows past outbox.MaxBacklog by more than one put, and the
// puts go on once the server takes updates again.
func TestOutboxBacklogIsBounded(t *testing.T) {
	c := newTestCluster(t, 2)
	gate := make(chan struct{})
	c.mu.Lock()
	c.gate, c.gated = gate, 1
	c.mu.Unlock()
	owner := c.svcs[0]
	var ids []uint64
	for i := 0; len(ids) < 50; i++ {
		name := fmt.Sprintf("bl%d", i)
		if c.owner(name) == owner {
			ids = append(ids, c.create(name))
		}
	}
	const puts = 1200
	type put struct {
		backlog, size int
		err           error
	}
	done, stop := make(chan put), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range puts {
			v := fmt.Sprintf("%04d-", i) + strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 5)
			err := c.tryPut(ids[i%len(ids)], "long-value", v)
			b := owner.ix.ob.Stats().Backlog
			select {
			case done <- put{b, len(v) * (len(v) + 64), err}:
			case <-stop:
				return
			}
		}
	}()
	released := false
	defer func() {
		close(stop)
		if !released {
			close(gate)
		}
		wg.Wait()
	}()
	most, n := 0, 0
	for n < puts {
		select {
		case p, ok := <-done:
			if !ok {
				t.Fatalf("the writer stopped after %d puts", n)
			}
			if p.err != nil {
				t.Fatal(p.err)
			}
			n++
			most = max(most, p.backlog)
			if p.backlog > outbox.MaxBacklog+p.size {
				t.Fatalf("put %d returned with %d bytes in the outbox; the bound is %d", n, p.backlog, outbox.MaxBacklog)
			}
		case <-time.After(500 * time.Millisecond):
			// The writer is held: let the stalled server take updates.
			if !released {
				close(gate)
				released = true
			}
		}
	}
	if !released || most < outbox.MaxBacklog/2 {
		t.Fatalf("the puts never filled the outbox (most %d bytes, released %v): the test proves nothing", most, released)
	}
	if got := c.query("long-value=*xyz0123*", false); len(got) != len(ids) {
		t.Fatalf("found %d objects after the backlog drained; want %d", len(got), len(ids))
	}
}

// TestIndexRunsOnDiskSurviveRestart: with a small flush size, index
// entries go to runs on disk and are merged there; overwrites and deletes
// hide older entries across runs; after a restart every query through the
// index still equals the scan.
func TestIndexRunsOnDiskSurviveRestart(t *testing.T) {
	c := newTestClusterFlushing(t, 2, 8<<10)
	var ids []uint64
	for i := range 300 {
		ids = append(ids, c.create(fmt.Sprint("o", i)))
	}
	for round := range 3 {
		c.putAll(ids, func(i int) string { return fmt.Sprintf("k%d", i%5) },
			func(i int) string { return fmt.Sprintf("v%d-%03d", round, i) })
	}
	for _, id := range ids[:100] {
		c.del(id, fmt.Sprintf("k%d", slices.Index(ids, id)%5))
	}
	runs := 0
	for _, s := range c.svcs {
		runs += s.ix.post.Stats().DiskRuns
	}
	if runs < 2 {
		t.Fatalf("%d runs on disk; the test wants the index to flush", runs)
	}
	queries := []string{"k1", "k*", "*1", "k2=v2*", "*=v2-1*", "*=*-2*", "*=*9", "k3=v2-003", "*=v0*", "*=v1*"}
	check := func(when string) {
		for _, q := range queries {
			scan, idx := c.query(q, true), c.query(q, false)
			if !slices.Equal(scan, idx) {
				t.Fatalf("%s, %q: scan %v, index %v", when, q, scan, idx)
			}
		}
		if got := c.query("*=v2-1*", false); len(got) != 100 {
			t.Fatalf("%s: *=v2-1* found %d objects, want 100", when, len(got))
		}
		if got := c.query("*=v0*", false); len(got) != 0 {
			t.Fatalf("%s: overwritten values found: %v", when, got)
		}
	}
	check("before the restart")
	c.close()
	c.open()
	check("after the restart")
}

// recordOfThree returns an object id owned by each of 3 servers, and the
// index operations of 3000 tags on them: 2940 on server 1's (a part of
// several pieces), 30 on each of the others'.
func recordOfThree() (owned [3]uint64, ops postings.Ops) {
	for key := uint32(1); owned[0] == 0 || owned[1] == 0 || owned[2] == 0; key++ {
		owned[placement.Owner(key, 3)] = placement.ID(key, 1)
	}
	big := strings.Repeat("v", 200)
	for i := range 3000 {
		id := owned[1]
		if i%100 == 0 {
			id = owned[2]
		} else if i%100 == 1 {
			id = owned[0]
		}
		v := fmt.Sprintf("%s%05d", big, i)
		tagindex.WriteObjectEntries(&ops, "k", int32(region.String), []byte(v), tagindex.ValueOf(region.String, []byte(v)), id, false, false)
	}
	return owned, ops
}

// entriesOf counts the entries of o that name object id.
func entriesOf(o *postings.Ops, id uint64) (n int) {
	_ = o.Each(func(ek, _ []byte, _ bool, _ []byte) error {
		if got, _ := tagindex.EntryObject(ek); got == id {
			n++
		}
		return nil
	})
	return n
}

// TestMoveKeepsARecordUntilEveryPartIsSent: an outbox record of objects
// now owned by two other servers and this one is sent in parts, pieces of
// at most migrateBytes; while a part cannot be sent the record stays
// whole, and once every part is sent only this server's part stays.
func TestMoveKeepsARecordUntilEveryPartIsSent(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), CheckpointDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetPlacement(0, 3)
	owned, ops := recordOfThree()
	k := outbox.RecordKey(7, 0)
	put := func(v []byte) {
		b := s.st.NewBatch()
		defer b.Close()
		b.Set(k, v)
		if err := s.st.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
	rec := (&wire.IndexOps{Version: wire.IndexOpsPacked, Packed: ops.Bytes()}).Marshal(nil)
	put(rec)

	got := map[int]*postings.Ops{1: {}, 2: {}}
	down := true
	send := func(ctx context.Context, index int, kvs *wire.KVBatch) error {
		if index == 2 && down {
			return fmt.Errorf("server 2 down: %w", pdc.ErrUnavailable)
		}
		size := 0
		for i, key := range kvs.Keys {
			size += len(key) + len(kvs.Values[i])
			if key[0] != 'Q' {
				continue
			}
			part, err := recordOps(kvs.Values[i])
			if err != nil {
				return err
			}
			got[index].Append(&part)
		}
		if size > 2*migrateBytes {
			t.Errorf("an import of %d bytes", size)
		}
		return nil
	}
	if _, err := s.MoveForeign(context.Background(), send); err == nil {
		t.Fatal("the move should fail while server 2 is down")
	}
	if v, ok, err := s.st.Get(k); err != nil || !ok || !bytes.Equal(v, rec) {
		t.Fatalf("the record changed or went although its part for server 2 was not sent (ok %v, err %v)", ok, err)
	}
	down = false
	got[1].Reset()
	if _, err := s.MoveForeign(context.Background(), send); err != nil {
		t.Fatal(err)
	}
	count := entriesOf
	if n := count(got[1], owned[1]); n != 2940*3 || got[1].Len() != n {
		t.Fatalf("server 1 got %d entries of its object (%d in all), want %d", n, got[1].Len(), 2940*3)
	}
	if n := count(got[2], owned[2]); n != 30*3 || got[2].Len() != n {
		t.Fatalf("server 2 got %d entries of its object (%d in all), want %d", n, got[2].Len(), 30*3)
	}
	v, ok, err := s.st.Get(k)
	if err != nil || !ok {
		t.Fatalf("this server's part is gone (ok %v, err %v)", ok, err)
	}
	left, err := recordOps(v)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(&left, owned[0]); n != 30*3 || left.Len() != n {
		t.Fatalf("%d entries stay here, %d of them this server's object's; want %d", left.Len(), n, 30*3)
	}
}

// TestMoveDropsAppliedParts: entries of an outbox record that a server
// applied under the old count (marked) are neither sent nor kept by a move
// to a new count, and the marks go with the old record.
func TestMoveDropsAppliedParts(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), CheckpointDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetPlacement(0, 3)
	id := objectOf(0, 3) // stays on server 0
	ops := valueEntries(id, 200)
	old := tagindex.For(2)
	applied, kept := 0, 0
	_ = ops.Each(func(ek, _ []byte, _ bool, _ []byte) error {
		if o, _ := old.EntryOwnerOf(ek); o == 1 {
			applied++
		} else {
			kept++
		}
		return nil
	})
	if applied == 0 || kept == 0 {
		t.Fatalf("the record should have entries of both old servers: %d and %d", applied, kept)
	}
	k := outbox.RecordKey(7, 0)
	b := s.st.NewBatch()
	b.Set(k, (&wire.IndexOps{Version: wire.IndexOpsPacked, Packed: ops.Bytes()}).Marshal(nil))
	b.Set(outbox.MarkKey(7, 1), binary.BigEndian.AppendUint32(nil, 2))
	if err := s.st.Commit(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	sent := 0
	send := func(ctx context.Context, index int, kvs *wire.KVBatch) error {
		for _, key := range kvs.Keys {
			if key[0] == 'Q' {
				sent++
			}
		}
		return nil
	}
	if _, err := s.MoveForeign(context.Background(), send); err != nil {
		t.Fatal(err)
	}
	if sent != 0 {
		t.Fatalf("%d record pieces were sent for an object that stays", sent)
	}
	v, ok, err := s.st.Get(k)
	if err != nil || !ok {
		t.Fatalf("the record's unapplied part is gone (ok %v, err %v)", ok, err)
	}
	left, err := recordOps(v)
	if err != nil {
		t.Fatal(err)
	}
	_ = left.Each(func(ek, _ []byte, _ bool, _ []byte) error {
		if o, _ := old.EntryOwnerOf(ek); o == 1 {
			t.Fatalf("entry %q, applied by server 1 before the move, is still in the record", ek)
		}
		return nil
	})
	if left.Len() != kept {
		t.Fatalf("the record keeps %d entries, want %d", left.Len(), kept)
	}
	if _, ok, _ := s.st.Get(outbox.MarkKey(7, 1)); ok {
		t.Fatal("the mark of the old count outlived the move")
	}
}

// objectOf returns an object id that server owner holds among count.
func objectOf(owner, count int) uint64 {
	for key := uint32(1); ; key++ {
		if placement.Owner(key, count) == owner {
			return placement.ID(key, 1)
		}
	}
}

// valueEntries returns the index entries (suffix-tree mode) of n string
// tags of object id, with values whose suffixes start with many letters.
func valueEntries(id uint64, n int) postings.Ops {
	var ops postings.Ops
	for i := range n {
		v := fmt.Sprintf("%c%c-value-%03d", 'a'+i%26, 'a'+(i/26)%26, i)
		tagindex.WriteObjectEntries(&ops, "k", int32(region.String), []byte(v), tagindex.ValueOf(region.String, []byte(v)), id, true, false)
	}
	return ops
}

// TestIndexApplyRefusesMalformedEntries: an entry from the network that no
// query could decode is refused before it is stored.
func TestIndexApplyRefusesMalformedEntries(t *testing.T) {
	c := newTestCluster(t, 1)
	for _, k := range []string{"XKab", "XKab\x00\x07", "XVabc", "XSab\x00"} {
		var ops postings.Ops
		ops.Set([]byte(k), []byte{tagindex.EntryVersion})
		m := wire.IndexOps{Version: wire.IndexOpsPacked, Packed: ops.Bytes()}
		_, err := c.svcs[0].indexApply(context.Background(), &rpc.Request{Header: m.Marshal(nil)})
		if !errors.Is(err, pdc.ErrInvalid) {
			t.Fatalf("entry %q: %v, want ErrInvalid", k, err)
		}
	}
	if got := c.query("*", false); len(got) != 0 {
		t.Fatalf("found %v", got)
	}
}

// TestSuffixAndInfixOverEveryText: in suffix-tree mode a suffix or infix
// literal is found as a whole text (V), inside one (W, which skips the
// whole text) and in texts too long for the suffix tree (L on server 0).
func TestSuffixAndInfixOverEveryText(t *testing.T) {
	c := newTestCluster(t, 3)
	long := strings.Repeat("q", tagindex.MaxSuffixText) + "mid" + strings.Repeat("r", 20) + "xyz"
	vals := []string{"xyz", "axyz", "xyza", long, "mid", "amidb", "x", "yz", "zzz"}
	var ids []uint64
	for i := range vals {
		ids = append(ids, c.create(fmt.Sprint("t", i)))
	}
	c.putAll(ids, func(int) string { return "k" }, func(i int) string { return vals[i] })
	for q, want := range map[string][]int{
		"*=*xyz":   {0, 1, 3},
		"*=*yz":    {0, 1, 3, 7},
		"*=*z":     {0, 1, 3, 7, 8},
		"*=*xyz*":  {0, 1, 2, 3},
		"*=*mid*":  {3, 4, 5},
		"*=*x*":    {0, 1, 2, 3, 6},
		"k=*xyz":   {0, 1, 3},
		"k*=*mid*": {3, 4, 5},
	} {
		var wantIDs []uint64
		for _, i := range want {
			wantIDs = append(wantIDs, ids[i])
		}
		slices.Sort(wantIDs)
		scan, idx := c.query(q, true), c.query(q, false)
		if !slices.Equal(idx, wantIDs) || !slices.Equal(scan, wantIDs) {
			t.Errorf("%q: index %v, scan %v, want %v", q, idx, scan, wantIDs)
		}
	}
}

// TestSuffixStepOfTheOtherLayout: a suffix value step planned for the
// other layout (with suffix trees at the literal's servers, without at the
// reversed literal's) is refused as unsupported, never answered from the
// wrong entries.
func TestSuffixStepOfTheOtherLayout(t *testing.T) {
	c := newTestCluster(t, 1)
	id := c.create("o")
	c.put(id, "k", "abc")
	for _, noSuffix := range []bool{false, true} {
		tq := wire.TagQuery{Query: "*=*bc", Step: uint32(tagindex.StepByValue), NoSuffix: noSuffix}
		resp, err := c.svcs[0].tagQuery(context.Background(), &rpc.Request{Header: tq.Marshal(nil)})
		if err != nil {
			t.Fatal(err)
		}
		var res wire.TagQueryResult
		if err := res.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		if want := noSuffix; res.Unsupported != want || (!want && res.Count != 1) {
			t.Fatalf("planned without suffix trees %v: unsupported %v, %d found", noSuffix, res.Unsupported, res.Count)
		}
	}
}

// entriesByDest shows the entries of ops by the server of 3 they go to.
func entriesByDest(t *testing.T, ops postings.Ops) map[int][]string {
	out := map[int][]string{}
	_ = ops.Each(func(k, _ []byte, del bool, _ []byte) error {
		d, err := tagindex.For(3).EntryOwnerOf(k)
		if err != nil {
			t.Fatal(err)
		}
		out[d] = append(out[d], fmt.Sprintf("%v %q", del, k))
		return nil
	})
	return out
}

// batchValue returns a copy of the value b sets for key, or nil.
func batchValue(b metastore.Batch, key []byte) []byte {
	var v []byte
	r := b.Pebble().Reader()
	for {
		_, k, val, ok, err := r.Next()
		if err != nil || !ok {
			return v
		}
		if bytes.Equal(k, key) {
			v = bytes.Clone(val)
		}
	}
}

// TestOutboxRecordOfChangesBuildsTheirEntries: an outbox record holds tag
// changes, not their entries; loading it builds, for every other server,
// exactly the entries the commit queued for it, in the same order: a key's
// dictionary entries only with the change the commit sent them with (a
// bulk put of one key on many objects builds them once, not once per
// object), and none of the committing server's own entries.
func TestOutboxRecordOfChangesBuildsTheirEntries(t *testing.T) {
	str := func(v string) *wire.TagValue { return &wire.TagValue{Type: int32(region.String), Value: []byte(v)} }
	num := func(n int64) *wire.TagValue {
		return &wire.TagValue{Type: int32(region.Int64), Value: binary.LittleEndian.AppendUint64(nil, uint64(n))}
	}
	long := strings.Repeat("long-", tagindex.MaxSuffixText/4)
	var mixed []tagChange
	for i := range 40 {
		id := objectOf(i%3, 3)
		key := fmt.Sprintf("%c%c-key", 'a'+i%26, 'a'+(i/7)%26)
		mixed = append(mixed,
			tagChange{id: id, key: key, new: str(fmt.Sprintf("%c-value-%d", 'a'+i%26, i))},
			tagChange{id: id, key: key, old: str(fmt.Sprintf("old-%d", i)), new: str(fmt.Sprintf("new\x00%d", i))},
			tagChange{id: id, key: "n" + key, old: num(int64(i)), new: num(int64(-i))},
			tagChange{id: id, key: "gone", old: str(fmt.Sprintf("%d-gone", i))},
			tagChange{id: id, key: "same", old: str("x"), new: str("x")},
			tagChange{id: id, key: "long", new: str(long + fmt.Sprint(i))})
	}
	// One long key on many objects.
	var bulk []tagChange
	for i := range 1000 {
		bulk = append(bulk, tagChange{id: objectOf(i%3, 3) + uint64(i)<<32, key: strings.Repeat("k", 200), new: str(fmt.Sprint("v", i))})
	}
	byDest := func(ops postings.Ops) map[int][]string { return entriesByDest(t, ops) }
	for _, suffix := range []bool{true, false} {
		c := newTestCluster(t, 3)
		s := c.svcs[1]
		s.ix.suffix = suffix
		// The second time, the keys' dictionary entries are written.
		for _, changes := range [][]tagChange{mixed, mixed, bulk} {
			s.ix.mu.Lock()
			b := s.st.NewBatch()
			ixd := s.indexChanges(b, changes)
			s.ix.post.Abandon(ixd.local)
			s.ix.ob.Drop(ixd.recs)
			s.ix.mu.Unlock()
			if len(ixd.recs) != 1 {
				t.Fatalf("%d outbox records, want 1", len(ixd.recs))
			}
			stored := batchValue(b, outbox.RecordKey(ixd.recs[0].Seq(), 0))
			b.Close()
			var m wire.IndexOps
			if err := m.Unmarshal(stored); err != nil || m.Version != wire.IndexOpsChanges {
				t.Fatalf("stored record of version %d (%v), want %d", m.Version, err, wire.IndexOpsChanges)
			}
			loaded, err := recordOps(stored)
			if err != nil {
				t.Fatal(err)
			}
			// What the commit queued, by destination.
			var queued postings.Ops
			for i := range ixd.recs[0].Split() {
				queued.Append(&ixd.recs[0].Split()[i])
			}
			if len(stored) > len(queued.Bytes())/2 {
				t.Errorf("suffix %v: the record takes %d bytes, its entries %d", suffix, len(stored), len(queued.Bytes()))
			}
			want, got := byDest(queued), byDest(loaded)
			if len(want) != 2 || len(want[1]) != 0 {
				t.Fatalf("suffix %v: the commit queued entries for servers %v, want 0 and 2", suffix, slices.Collect(maps.Keys(want)))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("suffix %v: the loaded record builds %d/%d entries for servers 0/2 (own %d), the commit queued %d/%d",
					suffix, len(got[0]), len(got[2]), len(got[1]), len(want[0]), len(want[2]))
			}
		}
	}
}

// TestABatchThatSetsATagTwice: of several puts of one tag in one batch the
// last wins, in the store and in the index, whether the object has a few
// puts in the batch (found by their chain) or many (found by name).
func TestABatchThatSetsATagTwice(t *testing.T) {
	c := newTestCluster(t, 2)
	few, many := c.create("twice-few"), c.create("twice-many")
	put := func(id uint64, name, value string) wire.TagPut {
		return wire.TagPut{ID: id, Name: name, Type: int32(region.String), Value: []byte(value)}
	}
	// Both objects on one server, so that one batch holds them.
	svc := c.svcs[placement.OwnerOfID(few, 2)]
	if placement.OwnerOfID(many, 2) != placement.OwnerOfID(few, 2) {
		many = 0
		for i := 0; many == 0; i++ {
			if id := c.create(fmt.Sprint("twice-many", i)); placement.OwnerOfID(id, 2) == placement.OwnerOfID(few, 2) {
				many = id
			}
		}
	}
	b := wire.TagBatch{Puts: []wire.TagPut{put(few, "k1", "first-1"), put(few, "k2", "first-2"), put(few, "k1", "last-1")}}
	for round := range 3 {
		for i := range 3 * manyPuts {
			b.Puts = append(b.Puts, put(many, fmt.Sprint("n", i), fmt.Sprintf("round%d-%d", round, i)))
		}
	}
	b.Puts = append(b.Puts, put(few, "k2", "last-2"))
	if _, err := svc.tagPut(context.Background(), &rpc.Request{Header: b.Marshal(nil)}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"k1=first-1", "k2=first-2", "n3=round0-3", "n5=round1-5", "*=round0*", "*=round1*"} {
		for _, scan := range []bool{true, false} {
			if got := c.query(q, scan); len(got) != 0 {
				t.Fatalf("%s (scan %v) found %v: an earlier put of the batch", q, scan, got)
			}
		}
	}
	for q, want := range map[string]uint64{"k1=last-1": few, "k2=last-2": few, "n3=round2-3": many, "*=round2-1*": many} {
		for _, scan := range []bool{true, false} {
			if got := c.query(q, scan); !slices.Equal(got, []uint64{want}) {
				t.Fatalf("%s (scan %v) found %v, want [%d]", q, scan, got, want)
			}
		}
	}
}

// TestAFailedCommitWritesTheKeyDictionaryLater: a key's dictionary entries
// go with the first put of the key in a process; when that put's commit
// fails, or its sync does, the next put of the key writes them, so that
// queries on key patterns find it.
func TestAFailedCommitWritesTheKeyDictionaryLater(t *testing.T) {
	for _, how := range []string{"commit", "sync"} {
		// A key whose dictionary entries for the infix query live on the
		// other server: a failed sync drops only what goes to others.
		c := newTestCluster(t, 2)
		id := c.create("obj")
		owner := placement.OwnerOfID(id, 2)
		s := c.svcs[owner]
		key := ""
		for i := 0; key == ""; i++ {
			if k := fmt.Sprintf("z%cbra%d", 'a'+i%26, i); tagindex.For(2).Owner(k[1:]) != owner {
				key = k
			}
		}
		q := "*" + key[1:4] + "*=*"
		var restore func()
		if how == "commit" {
			restore = failCommits(t, s)
		} else {
			restore = failSyncs(s)
		}
		if err := c.tryPut(id, key, "v1"); err == nil {
			t.Fatalf("%s failing: the put succeeded", how)
		}
		restore()
		c.put(id, key, "v2")
		for _, scan := range []bool{true, false} {
			if got := c.query(q, scan); !slices.Equal(got, []uint64{id}) {
				t.Errorf("%s failed first: %s (scan %v) finds %v, want [%d]", how, q, scan, got, id)
			}
		}
	}
}

// TestEntriesSizeFollowsTheEntries: the estimate that sizes the buffers
// of a commit's entries stays within a small factor of them, texts too
// long for the suffix tree included (their entries grow with the text,
// not its square).
func TestEntriesSizeFollowsTheEntries(t *testing.T) {
	for _, suffix := range []bool{true, false} {
		for _, n := range []int{0, 1, 8, 60, tagindex.MaxSuffixText, tagindex.MaxSuffixText + 1, 1 << 10, MaxTagValueLen} {
			for _, k := range []int{1, 12, 200} {
				key := strings.Repeat("k", k)
				v := &wire.TagValue{Type: int32(region.String), Value: []byte(strings.Repeat("v", n))}
				var ops postings.Ops
				var w tagindex.EntryWriter
				changeOps(&w, &tagChange{id: 1, key: key, new: v}, suffix, false, &ops)
				actual, est := len(ops.Bytes()), entriesSize(k, n, suffix)
				if est < actual/2 || est > 3*actual {
					t.Errorf("suffix %v, key of %d bytes, value of %d: entries take %d bytes, entriesSize says %d", suffix, k, n, actual, est)
				}
			}
		}
	}
}
