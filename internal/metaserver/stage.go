package metaserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/staging"
	"github.com/pdcgo/pdc/internal/wire"
)

// Staged files: the ownership record of each produced file lives here, on
// the metadata server that owns hash(path), under 'F' + path. Consumers
// that ask for a file not produced yet wait on the server (stageWaits)
// until a produce of it commits, or their deadline passes.

func keyStage(path string) []byte { return append([]byte{'F'}, path...) }

// stages serves the records of staged files.
type stages struct {
	*core
	// mu orders the version bumps of staged files' records: two
	// produces of one path get different versions.
	mu    sync.Mutex
	waits stageWaits
}

func newStages(c *core) *stages {
	s := &stages{core: c}
	s.waits.init()
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

func (s *stages) loadStage(path string) (*wire.StageRecord, error) {
	v, ok, err := s.st.Get(keyStage(path))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	var r wire.StageRecord
	if err := r.Unmarshal(v); err != nil {
		return nil, fmt.Errorf("stored record of staged file %s: %w", path, pdc.ErrCorrupt)
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
		if r.Host == "" {
			return nil, fmt.Errorf("staged file %s: no owner host: %w", r.Path, pdc.ErrInvalid)
		}
	}
	// Versions are read, bumped and written under one lock, so that two
	// produces of one path get different versions.
	s.mu.Lock()
	b := s.st.NewBatch()
	defer b.Close()
	now := time.Now().UnixNano()
	next := map[string]uint64{}
	for i := range in.Records {
		r := &in.Records[i]
		v, seen := next[r.Path]
		if !seen {
			old, err := s.loadStage(r.Path)
			if err != nil {
				s.mu.Unlock()
				return nil, err
			}
			if old != nil {
				v = old.Version
			}
		}
		r.Version = v + 1
		next[r.Path] = r.Version
		if r.Produced == 0 {
			r.Produced = now
		}
		b.Set(keyStage(r.Path), r.Marshal(nil))
	}
	wait, err := s.st.CommitApply(b)
	s.mu.Unlock()
	if err == nil {
		err = wait()
	}
	if err != nil {
		return nil, err
	}
	for p := range next {
		s.waits.produced(p)
	}
	return rpc.Respond(&in), nil
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
	r, err := s.loadStage(k.Path)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("staged file %s has not been produced: %w", k.Path, pdc.ErrNotFound)
	}
	return rpc.Respond(r), nil
}

// stageWait answers a staged file's record once a version newer than
// k.After exists, waiting on the server (not polled) until a produce of it
// commits or the caller's deadline passes.
func (s *stages) stageWait(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.StageKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	if err := s.ownsStage(k.Path); err != nil {
		return nil, err
	}
	for {
		// Watch before reading, so that a produce committing in between
		// is not missed.
		ch, done := s.waits.watch(k.Path)
		r, err := s.loadStage(k.Path)
		if err != nil || (r != nil && r.Version > k.After) {
			done()
			if err != nil {
				return nil, err
			}
			return rpc.Respond(r), nil
		}
		select {
		case <-ch:
			done()
		case <-ctx.Done():
			done()
			if k.After > 0 {
				return nil, fmt.Errorf("staged file %s: no version after %d was produced in time: %w", k.Path, k.After, pdc.CtxErr(ctx))
			}
			return nil, fmt.Errorf("staged file %s was not produced in time: %w", k.Path, pdc.CtxErr(ctx))
		case <-s.waits.stop:
			done()
			return nil, fmt.Errorf("waiting for staged file %s: the metadata server is shutting down: %w", k.Path, pdc.ErrUnavailable)
		}
	}
}
