package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/batch"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// Match is an object a query found.
type Match struct {
	ID uint64
	// Name is set when the query asked for names (WithNames).
	Name string
}

// QueryOption changes how a query runs.
type QueryOption func(*queryOptions)

type queryOptions struct {
	names bool
	mode  queryMode
}

type queryMode int

const (
	modeAuto  queryMode = iota // the index when it can answer, else a scan
	modeIndex                  // the index only
	modeScan                   // a scan only
)

// WithNames makes a query return the objects' names too.
func WithNames() QueryOption { return func(o *queryOptions) { o.names = true } }

// IndexOnly makes a query use the DART index, failing with
// pdc.ErrUnimplemented when the index cannot answer it (PDC's
// search_obj_ref_through_dart).
func IndexOnly() QueryOption { return func(o *queryOptions) { o.mode = modeIndex } }

// ScanOnly makes a query scan every metadata server's tags, without the
// index (PDC's query_kvtag).
func ScanOnly() QueryOption { return func(o *queryOptions) { o.mode = modeScan } }

// errNoIndex says the servers keep no index able to answer a query.
var errNoIndex = errors.New("pdc: no index for this query")

// queryState is what the client learned about the servers' index.
type queryState struct {
	mu       sync.Mutex
	noIndex  bool // a server answered that it keeps no index
	noSuffix bool // a server answered that it keeps no suffix trees
}

// Query finds the objects with a tag matching q (see package tagindex for
// the language: KEY, KEY=VALUE with exact, prefix*, *suffix or *infix* on
// either side, KEY=LO..HI for numbers). Results are deduplicated and sorted
// by id. With the DART index on (the default) exact, prefix, suffix and
// infix queries ask one or a few servers; other queries, and all of them
// without the index, ask every metadata server to scan its tags, in
// parallel. Both give the same answer. Errors: pdc.ErrInvalid for a bad
// query (and for a range over keys that hold only text), errors of the
// servers asked.
func (c *Client) Query(ctx context.Context, q string, opts ...QueryOption) ([]Match, error) {
	var o queryOptions
	for _, f := range opts {
		f(&o)
	}
	pq, err := tagindex.Parse(q)
	if err != nil {
		return nil, err
	}
	ms := c.metaServers()
	if len(ms) == 0 {
		return nil, fmt.Errorf("query %q: the cluster has no metadata server: %w", q, pdc.ErrUnavailable)
	}
	all := make([]int, len(ms))
	for i := range all {
		all[i] = i
	}
	r, err := c.queryPart(ctx, pq, q, o, all, 0, 1)
	if err != nil {
		return nil, err
	}
	return c.finish(ctx, pq, q, o, r)
}

// queryPart runs this rank's part of a query: of the servers a step asks,
// those at positions p with p % size == rank (all of them for one rank).
// servers are the metadata indexes a scan asks.
func (c *Client) queryPart(ctx context.Context, pq *tagindex.Query, q string, o queryOptions, servers []int, rank, size int) (*tagindex.Result, error) {
	if o.mode != modeScan {
		r, err := c.indexQuery(ctx, pq, q, o, rank, size)
		switch {
		case err == nil:
			return r, nil
		case !errors.Is(err, errNoIndex):
			return nil, err
		case o.mode == modeIndex:
			return nil, fmt.Errorf("query %q: the servers keep no index that can answer it (start them with the index on; infix queries need --dart-suffix-tree): %w", q, pdc.ErrUnimplemented)
		}
	}
	var mine []int
	for p, s := range servers {
		if p%size == rank {
			mine = append(mine, s)
		}
	}
	return c.scanQuery(ctx, q, o, mine)
}

// finish checks a range query's flags, sorts and names the result.
func (c *Client) finish(ctx context.Context, pq *tagindex.Query, q string, o queryOptions, r *tagindex.Result) ([]Match, error) {
	if pq.Range && r.Flags&wire.QuerySawText != 0 && r.Flags&wire.QuerySawNumber == 0 {
		return nil, fmt.Errorf("query %q: the tags of keys matching %q hold text, and a range (LO..HI) matches only numeric tags: %w",
			q, pq.Key.String(), pdc.ErrInvalid)
	}
	slices.Sort(r.IDs)
	r.IDs = slices.Compact(r.IDs)
	out := make([]Match, len(r.IDs))
	for i, id := range r.IDs {
		out[i].ID = id
	}
	if !o.names {
		return out, nil
	}
	missing := map[uint64]int{}
	for i := range out {
		if n, ok := r.Names[out[i].ID]; ok {
			out[i].Name = n
		} else {
			missing[out[i].ID] = i
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	ids := make([]uint64, 0, len(missing))
	for id := range missing {
		ids = append(ids, id)
	}
	names, err := c.objectNames(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("query %q: names: %w", q, err)
	}
	for i, id := range ids {
		out[missing[id]].Name = names[i]
	}
	return out, nil
}

// objectNames returns the names of objects by id ("" for objects deleted
// meanwhile).
func (c *Client) objectNames(ctx context.Context, ids []uint64) ([]string, error) {
	keys := make([]uint32, len(ids))
	for i, id := range ids {
		keys[i] = placement.KeyOf(id)
	}
	res, err := batch.Objects(ctx, (*clusterView)(c), wire.MethodObjOpen, keys, func(int) int { return 16 }, func(idx []int) wire.ObjBatch {
		b := wire.ObjBatch{Opens: make([]wire.ObjKey, len(idx))}
		for j, i := range idx {
			b.Opens[j] = wire.ObjKey{ID: ids[i], Peek: true}
		}
		return b
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ids))
	for i := range res {
		out[i] = res[i].Meta.Name
	}
	return out, nil
}

// queryCall asks the metadata server of index one step of a query.
func (c *Client) queryCall(ctx context.Context, index int, tq *wire.TagQuery) (wire.TagQueryResult, []uint64, []string, error) {
	rank := c.metaServers()[index]
	var res wire.TagQueryResult
	conn, err := c.conn(ctx, rank)
	if err != nil {
		return res, nil, nil, err
	}
	rep, err := conn.Call(ctx, wire.MethodTagQuery, tq.Marshal(nil), nil, nil)
	if err != nil {
		return res, nil, nil, err
	}
	if err := res.Unmarshal(rep.Header); err != nil {
		return res, nil, nil, fmt.Errorf("%s: tag_query: %w", conn.Label(), err)
	}
	ids, strs, err := wire.ParseQueryPayload(&res, rep.Payload)
	if err != nil {
		return res, nil, nil, fmt.Errorf("%s: tag_query: %w", conn.Label(), err)
	}
	return res, ids, strs, nil
}

// scanQuery asks the given metadata servers to scan their tags.
func (c *Client) scanQuery(ctx context.Context, q string, o queryOptions, servers []int) (*tagindex.Result, error) {
	r := &tagindex.Result{Scanned: true}
	var mu sync.Mutex
	err := batch.FanOut(servers, func(index int) error {
		res, ids, names, err := c.queryCall(ctx, index, &wire.TagQuery{Query: q, Step: uint32(tagindex.StepScan), Names: o.names})
		if err != nil {
			return err
		}
		mu.Lock()
		r.Add(ids, names, res.Flags)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	return r, nil
}

// indexQuery runs a query's index plan (this rank's part of it); errNoIndex
// when the plan is a scan or a server keeps no index for it.
func (c *Client) indexQuery(ctx context.Context, pq *tagindex.Query, q string, o queryOptions, rank, size int) (*tagindex.Result, error) {
	c.query.mu.Lock()
	noIndex, noSuffix := c.query.noIndex, c.query.noSuffix
	c.query.mu.Unlock()
	if noIndex {
		return nil, errNoIndex
	}
	plan := tagindex.For(len(c.metaServers())).Plan(pq, !noSuffix)
	if plan.Scan {
		return nil, errNoIndex
	}
	var mine []int
	for p, s := range plan.Servers {
		if p%size == rank {
			mine = append(mine, s)
		}
	}
	if len(mine) == 0 {
		// A rank of a collective query with no server of the plan to
		// ask: it looks nowhere, so it waits for no delivery (a nil need
		// would make it wait for every one, and fail the query during
		// a cut that no server of the plan is behind).
		return &tagindex.Result{}, nil
	}
	// A plan's second step looks where the first step's keys lead.
	need := mine
	if plan.Then {
		need = nil
	}
	if err := c.syncIndex(ctx, need); err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	run := &indexRun{c: c, q: q, noSuffix: noSuffix, r: &tagindex.Result{}}
	var keys []string
	err := batch.FanOut(mine, func(index int) error {
		strs, err := run.step(ctx, index, plan.First, plan.Terms)
		if err != nil {
			return err
		}
		if plan.Then {
			run.mu.Lock()
			keys = append(keys, strs...)
			run.mu.Unlock()
		}
		return nil
	})
	if err == nil && plan.Then && !run.unsupported && len(keys) > 0 {
		err = run.byKeys(ctx, keys)
	}
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	if run.unsupported {
		if c.dropIndexPlan(pq, noSuffix) {
			return c.indexQuery(ctx, pq, q, o, rank, size)
		}
		return nil, errNoIndex
	}
	return run.r, nil
}

// indexRun is one run of an index plan: its steps' results go in r.
type indexRun struct {
	c        *Client
	q        string
	noSuffix bool

	mu          sync.Mutex
	r           *tagindex.Result
	unsupported bool // a server keeps no index the plan needs
}

// step runs a step of the plan on the metadata server of index and
// returns the texts it found.
func (run *indexRun) step(ctx context.Context, index int, st tagindex.Step, terms []string) ([]string, error) {
	res, ids, strs, err := run.c.queryCall(ctx, index, &wire.TagQuery{Query: run.q, Step: uint32(st), Terms: terms, NoSuffix: run.noSuffix})
	if err != nil {
		return nil, err
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	if res.Unsupported {
		run.unsupported = true
		return nil, nil
	}
	run.r.Add(ids, nil, res.Flags)
	return strs, nil
}

// byKeys asks for the keys found by a first step, at the servers that
// hold their entries.
func (run *indexRun) byKeys(ctx context.Context, keys []string) error {
	part := tagindex.For(len(run.c.metaServers()))
	byServer := map[int][]string{}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		byServer[part.Owner(k)] = append(byServer[part.Owner(k)], k)
	}
	servers := make([]int, 0, len(byServer))
	for s := range byServer {
		servers = append(servers, s)
	}
	return batch.FanOut(servers, func(index int) error {
		ks := byServer[index]
		for start := 0; start < len(ks); start += limits.MaxQueryTerms {
			if _, err := run.step(ctx, index, tagindex.StepByKey, ks[start:min(start+limits.MaxQueryTerms, len(ks))]); err != nil {
				return err
			}
		}
		return nil
	})
}

// dropIndexPlan notes that a server could not run an index plan, and
// reports whether to try once more. A plan through the suffix trees may
// fail for want of them alone: it is tried once more without (an infix
// value can still go by an exact key, a suffix value by the reversed
// texts). Otherwise the servers keep no index.
func (c *Client) dropIndexPlan(pq *tagindex.Query, noSuffix bool) (retry bool) {
	retry = !noSuffix && (pq.Key.Kind == tagindex.Infix || pq.Value.Kind == tagindex.Infix || pq.Value.Kind == tagindex.Suffix)
	c.query.mu.Lock()
	defer c.query.mu.Unlock()
	if retry {
		c.query.noSuffix = true
	} else {
		c.query.noIndex = true
	}
	return retry
}

// ---- explicit DART calls (PDC's insert/delete_obj_ref_into/from_dart)

// SyncIndex returns once every metadata server has delivered the index
// updates of the tag changes it acknowledged before the call. Servers
// acknowledge a tag put or delete before its index entries reach the
// servers that hold them, so that a put costs about what it costs without
// the index; every indexed query syncs first, so it finds every tag
// acknowledged before it, from any process.
//
// A server that is down fails the sync at once (ErrUnavailable). A server
// this client reaches that another could not deliver to (the two cut off
// from each other, or it restarted at an address the other has not read
// yet) is waited for, with the sync tried again after growing pauses,
// until ctx ends: then it fails with ErrUnavailable naming both, rather
// than let a query miss what waits for it.
func (c *Client) SyncIndex(ctx context.Context) error {
	return c.syncIndex(ctx, nil)
}

// syncIndex is SyncIndex for a query that looks only at the metadata
// servers (by index) in need; nil: at every one.
func (c *Client) syncIndex(ctx context.Context, need []int) error {
	meta := c.metaServers()
	start := time.Now()
	for pause := syncPause; ; pause = min(2*pause, syncPauseMax) {
		var mu sync.Mutex
		var waiting []string
		err := batch.FanOut(meta, func(rank int) error {
			rep, err := c.calls().IndexFence(ctx, rank)
			if err != nil {
				return err
			}
			for _, d := range rep.Undelivered {
				if d >= uint64(len(meta)) || (need != nil && !slices.Contains(need, int(d))) {
					continue
				}
				mu.Lock()
				waiting = append(waiting, fmt.Sprintf("rank %d to rank %d", rank, meta[d]))
				mu.Unlock()
			}
			return nil
		})
		if err != nil || len(waiting) == 0 {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			slices.Sort(waiting)
			return fmt.Errorf("tag index updates acknowledged by metadata servers still wait to be delivered (%s) after %v: %w",
				strings.Join(waiting, ", "), time.Since(start).Round(time.Millisecond), pdc.ErrUnavailable)
		}
	}
}

// The pauses between the tries of a sync that waits for deliveries
// between servers.
const (
	syncPause    = 5 * time.Millisecond
	syncPauseMax = 200 * time.Millisecond
)

// IndexInsert adds index entries that make object id found by queries on
// key and the text value, as PDC_Client_insert_obj_ref_into_dart does. Tags
// put with PutTag are indexed already; this is for PDC programs that call
// it after PDCobj_put_tag, and is idempotent. Like a query it first waits
// for the index updates of tag changes acknowledged before it (SyncIndex,
// for the servers it writes to), so that none arrives after it and undoes
// it; while one cannot be delivered it fails with pdc.ErrUnavailable when
// ctx ends.
func (c *Client) IndexInsert(ctx context.Context, key, value string, id uint64) error {
	return c.indexRef(ctx, key, value, id, false)
}

// IndexDelete removes the index entries of key and the text value for
// object id, every suffix entry with them, as
// PDC_Client_delete_obj_ref_from_dart does; the tag itself stays. It
// waits as IndexInsert does.
func (c *Client) IndexDelete(ctx context.Context, key, value string, id uint64) error {
	return c.indexRef(ctx, key, value, id, true)
}

func (c *Client) indexRef(ctx context.Context, key, value string, id uint64, del bool) error {
	what := "insert into"
	if del {
		what = "delete from"
	}
	if key == "" || len(key) > limits.MaxTagName || len(value) > limits.MaxTagValue {
		return fmt.Errorf("%s the index: key %.40q and value of %d bytes: want a key of 1 to %d bytes and a value of at most %d: %w",
			what, key, len(value), limits.MaxTagName, limits.MaxTagValue, pdc.ErrInvalid)
	}
	c.query.mu.Lock()
	suffix := !c.query.noSuffix
	c.query.mu.Unlock()
	raw := []byte(value)
	ops := tagindex.ObjectEntries(key, int32(region.String), raw, tagindex.ValueOf(region.String, raw), id, suffix, del)
	if !del {
		ops = append(ops, tagindex.DictEntries(key, suffix)...)
	}
	part := tagindex.For(len(c.metaServers()))
	byServer := map[int][]wire.IndexOp{}
	for _, op := range ops {
		d, err := part.EntryOwner(op.Key)
		if err != nil {
			return err
		}
		byServer[d] = append(byServer[d], wire.IndexOp{Key: op.Key, Value: op.Value, Del: op.Del})
	}
	servers := make([]int, 0, len(byServer))
	for s := range byServer {
		servers = append(servers, s)
	}
	// These go to the entries' servers directly, while a tag change
	// acknowledged before may still have its entries for them in an
	// outbox: delivered after, it would undo this (a removal after a put
	// came back once a cut between two servers healed). The fence
	// orders them.
	if err := c.syncIndex(ctx, servers); err != nil {
		return fmt.Errorf("%s the index: %q=%q for object %d: %w", what, key, value, id, err)
	}
	err := batch.FanOut(servers, func(index int) error {
		m := wire.IndexOps{Version: tagindex.EntryVersion, Ops: byServer[index]}
		return c.calls().IndexApply(ctx, c.metaServers()[index], &m)
	})
	if err != nil {
		return fmt.Errorf("%s the index: %q=%q for object %d: %w", what, key, value, id, err)
	}
	return nil
}

// ---- the collective form (PDC's _mpi variants)

// AllGather gives every rank of a parallel program every rank's part, in
// rank order (MPI_Allgather of variable-sized byte strings). Every rank
// calls it the same number of times.
type AllGather func(ctx context.Context, part []byte) ([][]byte, error)

// QueryCollective is Query for the ranks of a parallel program that query
// together: each rank asks its share of the servers, and the parts are
// gathered with gather so that every rank returns the whole result. Every
// rank must call it with the same query and options.
func (c *Client) QueryCollective(ctx context.Context, q string, rank, size int, gather AllGather, opts ...QueryOption) ([]Match, error) {
	if size < 1 || rank < 0 || rank >= size || gather == nil {
		return nil, fmt.Errorf("collective query: rank %d of %d: %w", rank, size, pdc.ErrInvalid)
	}
	var o queryOptions
	for _, f := range opts {
		f(&o)
	}
	pq, err := tagindex.Parse(q)
	if err != nil {
		return nil, err
	}
	all := make([]int, len(c.metaServers()))
	for i := range all {
		all[i] = i
	}
	// Every rank takes the same path: if any rank had to scan, all scan.
	r, perr := c.queryPart(ctx, pq, q, o, all, rank, size)
	parts, err := gather(ctx, tagindex.AppendPart(nil, r, perr != nil, o.names))
	if err != nil {
		return nil, fmt.Errorf("collective query %q: gather: %w", q, err)
	}
	merged, scanned, err := tagindex.MergeParts(parts)
	if err != nil {
		return nil, fmt.Errorf("collective query %q: %w", q, err)
	}
	if perr != nil {
		return nil, perr
	}
	if scanned && !merged.Scanned && o.mode != modeScan {
		// Some ranks used the index and others scanned: scan everywhere.
		o.mode = modeScan
		r, perr = c.queryPart(ctx, pq, q, o, all, rank, size)
		if parts, err = gather(ctx, tagindex.AppendPart(nil, r, perr != nil, o.names)); err != nil {
			return nil, fmt.Errorf("collective query %q: gather: %w", q, err)
		}
		if merged, _, err = tagindex.MergeParts(parts); err != nil {
			return nil, fmt.Errorf("collective query %q: %w", q, err)
		}
		if perr != nil {
			return nil, perr
		}
	}
	return c.finish(ctx, pq, q, o, merged)
}
