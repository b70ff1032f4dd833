package metaserver

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/staging"
	"github.com/pdcgo/pdc/internal/wire"
)

// Staged files: the ownership record of each produced file lives here, on
// the metadata server that owns hash(path), under 'F' + path in the
// default namespace (where every record stored before namespaces is) and
// 'f' + namespace + 0 + path in any other: the path alone places it, so a
// path has one server in every namespace. Consumers that ask for a file
// not produced yet wait on the server (stageWaits) until a produce of it
// commits, or their deadline passes.
//
// A produce's record is applied (visible to readers) before its fsync
// under sync durability, and stays applied when that fsync fails
// (metastore.ErrUnsynced): a power loss may then take it back, and the
// path's next produce would get its version again for other bytes. So a
// consumer is given a record only once it is durable (stages.unsure):
// no version a consumer saw is ever handed out again.

func keyStage(ns, path string) []byte { return append(stagePrefix(ns), path...) }

// stagePrefix is the prefix of the keys of namespace ns's records.
func stagePrefix(ns string) []byte {
	if ns == "" {
		return []byte{'F'}
	}
	k := append([]byte{'f'}, ns...)
	return append(k, 0)
}

// stagePathOfKey is the path of a staged record's key ('F' or 'f').
func stagePathOfKey(k []byte) ([]byte, bool) {
	switch {
	case len(k) > 1 && k[0] == 'F':
		return k[1:], true
	case len(k) > 1 && k[0] == 'f':
		if i := bytes.IndexByte(k, 0); i > 1 {
			return k[i+1:], true
		}
	}
	return nil, false
}

// waitKey names a path of a namespace among the waits.
func waitKey(ns, path string) string { return ns + "\x00" + path }

// stageSubject is the subject (touching) of path's record in namespace
// ns: a removal records it from before its commit is applied until the
// commit returns, and a read that finds no record waits for it.
func stageSubject(ns, path string) uint64 { return nameSubject('s', waitKey(ns, path), 0) }

// checkStageRequest refuses a request of a staging version this build does
// not speak, or a bad namespace. Version 0 is a client from before
// namespaces: its files are in the default namespace.
func checkStageRequest(what string, v uint32, ns string) error {
	if v != 0 && (v < wire.StageVersionNamespaces || v > wire.StageVersion) {
		return fmt.Errorf("%s request of staging version %d; this server speaks versions %d to %d: %w", what, v, wire.StageVersionNamespaces, wire.StageVersion, pdc.ErrVersion)
	}
	if v == 0 && ns != "" {
		return fmt.Errorf("%s request of staging version 0 names namespace %q: %w", what, ns, pdc.ErrInvalid)
	}
	return staging.CheckNamespace(ns)
}

// stages serves the records of staged files.
type stages struct {
	*core
	// mu orders the version bumps of staged files' records: two
	// produces of one path get different versions.
	mu     sync.Mutex
	waits  stageWaits
	unsure unsureStages
	// producedFiles and producedBytes count the files recorded by
	// produces since start, and the sizes they recorded (metrics).
	producedFiles, producedBytes atomic.Uint64
}

func newStages(c *core) *stages {
	s := &stages{core: c}
	s.waits.init()
	s.unsure.byKey = map[string]*unsureProduce{}
	return s
}

// stageWaits wakes the consumers waiting for a path: each path being
// waited for has a channel that the next produce of it closes.
type stageWaits struct {
	mu      sync.Mutex
	byPath  map[string]*stageWait // guarded by mu
	stopped bool                  // guarded by mu
	stop    chan struct{}         // closed by stopStageWaits
}

type stageWait struct {
	ch      chan struct{}
	waiters int
}

func (w *stageWaits) init() {
	w.byPath = map[string]*stageWait{}
	w.stop = make(chan struct{})
}

// watch returns the channel the next produce of path closes, and a
// function to call once the caller stops watching.
func (w *stageWaits) watch(path string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sw := w.byPath[path]
	if sw == nil {
		sw = &stageWait{ch: make(chan struct{})}
		w.byPath[path] = sw
	}
	sw.waiters++
	return sw.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		sw.waiters--
		if sw.waiters == 0 && w.byPath[path] == sw {
			delete(w.byPath, path)
		}
	}
}

// produced wakes the waiters of path.
func (w *stageWaits) produced(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sw := w.byPath[path]; sw != nil {
		close(sw.ch)
		delete(w.byPath, path)
	}
}

// StopStageWaits ends every wait for a produce, now and later, with
// ErrUnavailable: the server is shutting down, and a consumer's wait must
// not hold up its shutdown.
func (s *Service) StopStageWaits() { s.stages.stopWaits() }

func (s *stages) stopWaits() {
	s.waits.mu.Lock()
	defer s.waits.mu.Unlock()
	if !s.waits.stopped {
		s.waits.stopped = true
		close(s.waits.stop)
	}
}

// unsureStages holds the paths (by waitKey) whose last produce is applied
// but not known to be durable: its fsync has not returned, or failed and
// nothing has made up for it since.
type unsureStages struct {
	mu     sync.Mutex
	byKey  map[string]*unsureProduce // guarded by mu
	failed int                       // entries of failed produces; guarded by mu
	n      atomic.Int64              // len(byKey), read without mu
}

// unsureProduce is one produce commit whose fsync is awaited.
type unsureProduce struct {
	done chan struct{} // closed once the produce's fsync returned
	// failed is set before done is closed: the fsync failed, and the
	// record stays applied.
	failed bool
	// covers are the failed produces committed before this one: its
	// successful fsync makes them durable too (the log is synced in
	// order).
	covers map[string]*unsureProduce
	// replaced are the marks this one took the place of, put back if
	// its commit is not applied (notApplied, set before done is closed).
	replaced   map[string]*unsureProduce
	notApplied bool
}

// How a produce's commit ended, for unsureStages.finish.
const (
	produceSynced     = iota // applied and durable
	produceUnsynced          // applied, its fsync failed
	produceNotApplied        // nothing applied
)

// add marks keys as being produced by a commit about to be applied. It is
// called under stages.mu, before the commit, so that a reader that sees
// the commit's records sees the mark.
func (u *unsureStages) add(keys []string) *unsureProduce {
	p := &unsureProduce{done: make(chan struct{})}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.failed > 0 {
		p.covers = map[string]*unsureProduce{}
		for k, q := range u.byKey {
			if q.failed {
				p.covers[k] = q
			}
		}
	}
	for _, k := range keys {
		if q := u.byKey[k]; q != nil {
			if q.failed {
				u.failed--
			}
			if p.replaced == nil {
				p.replaced = map[string]*unsureProduce{}
			}
			p.replaced[k] = q
		}
		u.byKey[k] = p
	}
	u.n.Store(int64(len(u.byKey)))
	return p
}

// finish ends p's wait. Synced, its keys and those it covers are
// durable; unsynced, its keys stay marked, as failed; not applied, the
// marks it replaced that still stand are put back.
func (u *unsureStages) finish(keys []string, p *unsureProduce, how int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch how {
	case produceUnsynced:
		p.failed = true
		for _, k := range keys {
			if u.byKey[k] == p {
				u.failed++
			}
		}
	case produceSynced:
		for _, k := range keys {
			u.dropLocked(k, p)
		}
		for k, q := range p.covers {
			u.dropLocked(k, q)
		}
	case produceNotApplied:
		p.notApplied = true
		for _, k := range keys {
			u.dropLocked(k, p)
			if u.byKey[k] == nil {
				u.restoreLocked(k, p.replaced[k])
			}
		}
		u.n.Store(int64(len(u.byKey)))
		p.covers = nil
		close(p.done)
		return // replaced is kept: a later produce may restore p's
	}
	p.covers, p.replaced = nil, nil
	close(p.done)
}

// restoreLocked puts q's mark back on key: the mark a produce whose
// commit was not applied replaced, if q's record may still not be
// durable. It requires u.mu.
func (u *unsureStages) restoreLocked(key string, q *unsureProduce) {
	for q != nil {
		select {
		case <-q.done:
			switch {
			case q.failed:
				u.failed++
				u.byKey[key] = q
				return
			case q.notApplied:
				q = q.replaced[key] // what it replaced
			default:
				return // durable
			}
		default: // its finish drops or keeps it
			u.byKey[key] = q
			return
		}
	}
}

// settled drops p's mark on key once a Settle made it durable.
func (u *unsureStages) settled(key string, p *unsureProduce) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.dropLocked(key, p)
}

// dropLocked removes key's mark if it is p's. It requires u.mu.
func (u *unsureStages) dropLocked(key string, p *unsureProduce) {
	if u.byKey[key] != p {
		return
	}
	if p.failed {
		u.failed--
	}
	delete(u.byKey, key)
	u.n.Store(int64(len(u.byKey)))
}

// get returns the produce whose durability key's record waits for, or nil.
func (u *unsureStages) get(key string) *unsureProduce {
	if u.n.Load() == 0 {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byKey[key]
}

// awaitDurable returns once what was read of path (waitKey key) before
// p, the produce unsure of it then (get), was seen is durable: once p's
// fsync returns, and if it failed, once Settle has made it durable. A
// record read before p's commit is durable then too: the log is synced in
// order, and Settle makes everything applied durable. An error means the
// record cannot be answered: the store cannot sync (wrapping
// metastore.ErrUnsynced), or ctx ended, or the server is shutting down.
func (s *stages) awaitDurable(ctx context.Context, path, key string, p *unsureProduce) error {
	for p != nil {
		select {
		case <-p.done:
		case <-ctx.Done():
			return fmt.Errorf("staged file %q: its produce's fsync: %w", path, pdc.CtxErr(ctx))
		case <-s.waits.stop:
			return fmt.Errorf("staged file %q: the metadata server is shutting down: %w", path, pdc.ErrUnavailable)
		}
		switch {
		case p.notApplied:
			// It made nothing durable: the mark it replaced is back, if
			// that is still unsure.
			p = s.unsure.get(key)
		case p.failed:
			// Within ctx: settling is a commit, which a stalled disk
			// keeps from returning.
			if err := s.st.SettleContext(ctx); err != nil {
				return fmt.Errorf("staged file %q: its last produce is not known to be durable: %w", path, err)
			}
			s.unsure.settled(key, p)
			return nil
		default:
			return nil
		}
	}
	return nil
}

// loadDurable is loadStage of a record a consumer may be given: one
// known to be durable (awaitDurable). The record is the one read first,
// so that produces of the path following each other cannot keep it
// waiting. No record (nil) is answered once that is durable too: it may
// be a removal's still in its fsync, or whose sync failed, which a power
// loss takes back, and "not produced" would then have been answered for
// a record the store holds again.
func (s *stages) loadDurable(ctx context.Context, ns, path string) (*wire.StageRecord, error) {
	key := waitKey(ns, path)
	r, err := s.loadStage(ns, path)
	if err != nil {
		return nil, err
	}
	if p := s.unsure.get(key); p != nil {
		if err := s.awaitDurable(ctx, path, key, p); err != nil {
			return nil, err
		}
	}
	if r == nil {
		// After the read: a removal it saw recorded itself before its
		// commit was applied (touching.wait).
		what := func() string { return "staged file " + path + inNamespace(ns) }
		if err := s.readDurably(ctx, what, nil, stageSubject(ns, path)); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (s *stages) loadStage(ns, path string) (*wire.StageRecord, error) {
	v, ok, err := s.st.Get(keyStage(ns, path))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	var r wire.StageRecord
	if err := r.Unmarshal(v); err != nil {
		return nil, fmt.Errorf("stored record of staged file %q: %w", path, pdc.ErrCorrupt)
	}
	return &r, nil
}

func (s *stages) ownsStage(path string) error {
	if err := staging.CheckRel(path); err != nil {
		return err
	}
	return s.owns(placement.Key(path, 0), "staged file %q", path)
}

// stageProduce records produced files, each with the version after the
// one stored, and wakes their waiting consumers once the records are as
// durable as the server promises.
func (s *stages) stageProduce(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var in wire.StageBatch
	if err := decode(req, &in); err != nil {
		return nil, err
	}
	if len(in.Records) == 0 || len(in.Records) > limits.MaxBatchItems {
		return nil, fmt.Errorf("produce batch of %d files; want 1 to %d: %w", len(in.Records), limits.MaxBatchItems, pdc.ErrInvalid)
	}
	for i := range in.Records {
		r := &in.Records[i]
		if err := s.ownsStage(r.Path); err != nil {
			return nil, err
		}
		if err := checkStageRequest("produce", in.Version, r.Namespace); err != nil {
			return nil, err
		}
		if r.Host == "" {
			return nil, fmt.Errorf("staged file %q: no owner host: %w", r.Path, pdc.ErrInvalid)
		}
		if err := checkInline(r); err != nil {
			return nil, err
		}
	}
	// Versions are read, bumped and written under one lock, so that two
	// produces of one path get different versions.
	s.mu.Lock()
	b := s.st.NewBatch()
	defer b.Close()
	now := time.Now().UnixNano()
	// The last version of each path (by waitKey) and when it was produced.
	type last struct {
		version  uint64
		produced int64
	}
	next := map[string]last{}
	for i := range in.Records {
		r := &in.Records[i]
		l, seen := next[waitKey(r.Namespace, r.Path)]
		if !seen {
			old, err := s.loadStage(r.Namespace, r.Path)
			if err != nil {
				s.mu.Unlock()
				return nil, err
			}
			if old != nil {
				l = last{old.Version, old.Produced}
			}
		}
		r.Version = l.version + 1
		if r.Produced == 0 {
			r.Produced = now
		}
		// A later version is produced later (consumers tell a newer copy
		// by both, staging.LaterProduce), even where the clock is behind
		// the one that stamped the last: stepped back, or another
		// server's before a resize moved the record here.
		if r.Produced <= l.produced {
			r.Produced = l.produced + 1
		}
		next[waitKey(r.Namespace, r.Path)] = last{r.Version, r.Produced}
		b.Set(keyStage(r.Namespace, r.Path), r.Marshal(nil))
	}
	keys := make([]string, 0, len(next))
	for k := range next {
		keys = append(keys, k)
	}
	// Readers answer the records only once durable (awaitDurable).
	p := s.unsure.add(keys)
	wait, err := s.st.CommitApply(b)
	s.mu.Unlock()
	if err != nil {
		s.unsure.finish(keys, p, produceNotApplied)
		return nil, err
	}
	how := produceSynced
	if err = wait(); err != nil {
		how = produceUnsynced
	}
	s.unsure.finish(keys, p, how)
	// The waiters are woken also when the fsync failed: the records are
	// applied, and a waiter, settling them, gets them or the error.
	for _, k := range keys {
		s.waits.produced(k)
	}
	if err != nil {
		return nil, err
	}
	for i := range in.Records {
		s.producedFiles.Add(1)
		s.producedBytes.Add(in.Records[i].Size)
	}
	in.Version = wire.StageVersion
	// The producer has the bytes: only the versions go back.
	for i := range in.Records {
		in.Records[i].Data = nil
	}
	return rpc.Respond(&in), nil
}

// checkInline refuses a record whose inline bytes could not be the file
// it describes: too many, not Size of them, or not matching its CRC. A
// consume installs them without asking the owner, so they are checked
// before they are stored, as well as by the consumer.
func checkInline(r *wire.StageRecord) error {
	switch {
	case len(r.Data) == 0:
		return nil
	case r.Format < wire.StageFormatInline:
		return fmt.Errorf("staged file %q: record format %d carries no data, but has %d bytes: %w", r.Path, r.Format, len(r.Data), pdc.ErrInvalid)
	case len(r.Data) > wire.StageInlineMax:
		return fmt.Errorf("staged file %q: %d bytes inline; at most %d: %w", r.Path, len(r.Data), wire.StageInlineMax, pdc.ErrTooLarge)
	case uint64(len(r.Data)) != r.Size:
		return fmt.Errorf("staged file %q: %d bytes inline for a file of %d: %w", r.Path, len(r.Data), r.Size, pdc.ErrInvalid)
	case crc32.Checksum(r.Data, staging.Table) != r.CRC:
		return fmt.Errorf("staged file %q: its inline bytes do not match its CRC-32C %08x: %w", r.Path, r.CRC, pdc.ErrChecksum)
	}
	return nil
}

// stageLookup answers a staged file's record at once.
func (s *stages) stageLookup(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.StageKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	if err := s.ownsStage(k.Path); err != nil {
		return nil, err
	}
	if err := checkStageRequest("lookup", k.Version, k.Namespace); err != nil {
		return nil, err
	}
	r, err := s.loadDurable(ctx, k.Namespace, k.Path)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("staged file %q has not been produced%s: %w", k.Path, inNamespace(k.Namespace), pdc.ErrNotFound)
	}
	return rpc.Respond(r), nil
}

// stageWait answers a staged file's record once a version newer than
// k.After exists, waiting on the server (not polled) until a produce of it
// commits or the caller's deadline passes. Where the path's version is
// k.After or older, or it has no record, that is its next produce.
func (s *stages) stageWait(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.StageKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	if err := s.ownsStage(k.Path); err != nil {
		return nil, err
	}
	if err := checkStageRequest("wait", k.Version, k.Namespace); err != nil {
		return nil, err
	}
	// seen is the record the wait found first, of version After or
	// older, or none: any record produced after it answers too, so that
	// the next produce of a path whose record was removed (versions count
	// from 1 again) ends the wait.
	var seen *wire.StageRecord
	for first := true; ; first = false {
		// Watch before reading, so that a produce committing in between
		// is not missed.
		ch, done := s.waits.watch(waitKey(k.Namespace, k.Path))
		r, err := s.loadDurable(ctx, k.Namespace, k.Path)
		if err != nil || (r != nil && (r.Version > k.After || !first && otherRecord(seen, r))) {
			done()
			if err != nil {
				return nil, err
			}
			return rpc.Respond(r), nil
		}
		if first {
			seen = r
		}
		select {
		case <-ch:
			done()
		case <-ctx.Done():
			done()
			if k.After > 0 {
				return nil, fmt.Errorf("staged file %q: no version after %d was produced%s in time: %w", k.Path, k.After, inNamespace(k.Namespace), pdc.CtxErr(ctx))
			}
			return nil, fmt.Errorf("staged file %q was not produced%s in time: %w", k.Path, inNamespace(k.Namespace), pdc.CtxErr(ctx))
		case <-s.waits.stop:
			done()
			return nil, fmt.Errorf("waiting for staged file %q: the metadata server is shutting down: %w", k.Path, pdc.ErrUnavailable)
		}
	}
}

// otherRecord reports whether r is another produce than seen (nil: none).
func otherRecord(seen, r *wire.StageRecord) bool {
	return seen == nil || r.Version != seen.Version || r.Produced != seen.Produced
}

// inNamespace names a namespace in a message: nothing for the default one.
func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return fmt.Sprintf(" in namespace %q", ns)
}

// stageList answers a page of the records of a namespace held here, in
// path order, resuming after the client's cursor: the server keeps nothing
// between pages, and every answer is bounded in records and bytes.
func (s *stages) stageList(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	var q wire.StageListReq
	if err := decode(req, &q); err != nil {
		return nil, err
	}
	if err := checkStageRequest("list", q.Version, q.Namespace); err != nil {
		return nil, err
	}
	if q.Version == 0 {
		return nil, fmt.Errorf("list request of staging version 0: %w", pdc.ErrVersion)
	}
	out := wire.StageList{Version: wire.StageVersion}
	limit, size := pageLimit(q.Limit, pageRecords), 0
	err := s.scanStage(q.Namespace, q.Prefix, q.After, func(path string, v []byte) (bool, error) {
		if path == "" {
			out.Next = "" // the end
			return false, nil
		}
		if len(out.Records) >= limit || size >= pageBytes {
			return false, nil
		}
		var r wire.StageRecord
		if err := r.Unmarshal(v); err != nil {
			return false, fmt.Errorf("stored record of staged file %q: %w", path, pdc.ErrCorrupt)
		}
		size += len(v) - len(r.Data) + 8
		r.Data = nil // a listing describes the files; a consume gets them
		out.Records = append(out.Records, r)
		out.Next = path
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	// A listed version is one a consumer may name (--newer-than), and a
	// path left out is one it takes for not produced: the page is
	// answered once what it saw is durable, the produces it lists and the
	// removals that left paths out (which it cannot name), as the other
	// listings are.
	if err := s.scanDurably(ctx, func() string { return "list staged files" + inNamespace(q.Namespace) }); err != nil {
		return nil, err
	}
	return rpc.Respond(&out), nil
}

// scanStage calls fn on the records of namespace ns held here whose paths
// start with prefix and sort after after, in path order, until fn says
// stop. The cursor (StageList.Next) is cleared when the scan ran out of
// records rather than being stopped.
func (s *stages) scanStage(ns, prefix, after string, fn func(path string, v []byte) (bool, error)) error {
	p := keyStage(ns, prefix)
	lo := p
	if after != "" {
		if !strings.HasPrefix(after, prefix) {
			return fmt.Errorf("list resumes after %q, outside the prefix %q: %w", after, prefix, pdc.ErrInvalid)
		}
		lo = append(keyStage(ns, after), 0) // the first key past after
	}
	it, err := s.st.NewIter(lo, prefixEnd(p))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		path, _ := stagePathOfKey(it.Key())
		more, err := fn(string(path), it.Value())
		if err != nil {
			return err
		}
		if !more {
			return it.Error()
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	_, err = fn("", nil) // the end: fn clears its cursor
	return err
}

// stageRemove removes the record of one path (only the produce named, if
// the request names one), or under a prefix (every path of the namespace
// with All) the produces named, or without names a bounded page of the
// records, in one commit.
// Waiting consumers are not woken: a removed path is one not produced,
// which they wait for.
func (s *stages) stageRemove(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	var q wire.StageRemoveReq
	if err := decode(req, &q); err != nil {
		return nil, err
	}
	if err := checkStageRequest("remove", q.Version, q.Namespace); err != nil {
		return nil, err
	}
	if q.Version == 0 {
		return nil, fmt.Errorf("remove request of staging version 0: %w", pdc.ErrVersion)
	}
	whole := q.All || q.Prefix != ""
	switch {
	case whole == (q.Path != ""):
		return nil, fmt.Errorf("remove: want one path, a prefix, or all of a namespace: %w", pdc.ErrInvalid)
	case q.All && q.Prefix != "":
		return nil, fmt.Errorf("remove: all of a namespace, or a prefix, not both: %w", pdc.ErrInvalid)
	case whole && (q.Record != 0 || q.Produced != 0):
		return nil, fmt.Errorf("remove: a produce is named for one path only, not a prefix: %w", pdc.ErrInvalid)
	case !whole && len(q.Produces) > 0:
		return nil, fmt.Errorf("remove: produces are named for a prefix or all of a namespace, not one path: %w", pdc.ErrInvalid)
	case len(q.Produces) > pageRecords:
		return nil, fmt.Errorf("remove: %d produces named, at most %d: %w", len(q.Produces), pageRecords, pdc.ErrInvalid)
	case len(q.Produces) > 0 && (q.After != "" || q.Limit != 0):
		return nil, fmt.Errorf("remove: a removal naming its produces has no page (After, Limit): %w", pdc.ErrInvalid)
	case !whole:
		if err := s.ownsStage(q.Path); err != nil {
			return nil, err
		}
	}
	// Under the lock of produces, so that a version is never taken from
	// a record this removal is deleting.
	s.mu.Lock()
	b := s.st.NewBatch()
	defer b.Close()
	out := wire.StageRemoved{Version: wire.StageVersion}
	// The records removed, for the readers that find none (loadDurable):
	// recorded only with sync durability (touching).
	var touched []uint64
	var err error
	if !whole {
		var r *wire.StageRecord
		// A removal naming a produce removes that one only: a copy of it
		// sent again after the path was produced again must not remove
		// the later, acknowledged produce.
		if r, err = s.loadStage(q.Namespace, q.Path); r != nil && (q.Record == 0 || !otherRecord(&wire.StageRecord{Version: q.Record, Produced: q.Produced}, r)) {
			b.Delete(keyStage(q.Namespace, q.Path))
			out.N = 1
			if s.touches.on {
				touched = append(touched, stageSubject(q.Namespace, q.Path))
			}
		}
	} else if len(q.Produces) > 0 {
		// Those the client listed, each only while it is that produce: a
		// copy of the request sent again after a path under the prefix was
		// produced (again) leaves that later, acknowledged produce, where
		// a page of the prefix would take it.
		seen := make(map[string]bool, len(q.Produces))
		for i := range q.Produces {
			p := &q.Produces[i]
			if !strings.HasPrefix(p.Path, q.Prefix) {
				err = fmt.Errorf("remove: produce of %q named, outside the prefix %q: %w", p.Path, q.Prefix, pdc.ErrInvalid)
				break
			}
			if p.Path == "" || seen[p.Path] {
				continue
			}
			seen[p.Path] = true
			var r *wire.StageRecord
			if r, err = s.loadStage(q.Namespace, p.Path); err != nil {
				break
			}
			if r == nil || otherRecord(&wire.StageRecord{Version: p.Record, Produced: p.Produced}, r) {
				continue
			}
			b.Delete(keyStage(q.Namespace, p.Path))
			out.N++
			if s.touches.on {
				touched = append(touched, stageSubject(q.Namespace, p.Path))
			}
		}
	} else {
		limit := pageLimit(q.Limit, pageRecords)
		err = s.scanStage(q.Namespace, q.Prefix, q.After, func(path string, _ []byte) (bool, error) {
			if int(out.N) >= limit {
				return false, nil
			}
			out.Next = path
			if path != "" {
				b.Delete(keyStage(q.Namespace, path))
				out.N++
				if s.touches.on {
					touched = append(touched, stageSubject(q.Namespace, path))
				}
			}
			return true, nil
		})
	}
	if err != nil || b.Empty() {
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		// Nothing to remove (or only another produce than the one
		// named): removed perhaps by this request's first copy, still
		// in its fsync or whose sync failed, which this answer
		// acknowledges. Which one it cannot tell: it waits for every
		// change applied (scanDurably).
		if err := s.scanDurably(ctx, func() string { return "remove staged records" }); err != nil {
			return nil, err
		}
		return rpc.Respond(&out), nil
	}
	// Until the commit returns, the removal may not outlive a power loss:
	// a reader that finds no record waits for it.
	tc := s.touches.begin(touched...)
	defer s.touches.end(tc)
	wait, err := s.st.CommitApply(b)
	s.mu.Unlock()
	if err == nil {
		err = wait()
	}
	if err != nil {
		return nil, err
	}
	return rpc.Respond(&out), nil
}
