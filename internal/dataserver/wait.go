package dataserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

func (s *Service) wait(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.DataIDs
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	return s.collect(ctx, req.Client, m.IDs, false)
}

// collect waits for the transfers ids of client and answers with how each
// ended and the bytes of the reads. Collected transfers are forgotten. If
// ctx ends first, nothing is forgotten and the client may wait again.
func (s *Service) collect(ctx context.Context, client string, ids []uint64, withIDs bool) (*rpc.Response, error) {
	ts := make([]*transfer, len(ids))
	s.mu.Lock()
	for i, id := range ids {
		ts[i] = s.lookup(client, id)
	}
	s.mu.Unlock()
	for _, t := range ts {
		if t == nil {
			continue
		}
		if l := t.lead(); l.lazy.Load() == lazyWaiting {
			// Still without budget: read it now, into the answer.
			for _, d := range l.deps {
				select {
				case <-d.done:
				case <-ctx.Done():
					return nil, fmt.Errorf("waiting for transfer %d (object %d region %v): %w", t.id, t.item.Obj, t.box, ctxErr(ctx, ctx.Err()))
				}
			}
			if l.lazy.CompareAndSwap(lazyWaiting, lazyClaimed) {
				s.complete(l, s.do(l))
			}
		}
		select {
		case <-t.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for transfer %d (object %d region %v): %w", t.id, t.item.Obj, t.box, ctxErr(ctx, ctx.Err()))
		}
	}
	res := wire.DataResults{Items: make([]wire.DataResult, len(ids))}
	if withIDs {
		res.IDs = ids
	}
	var payload [][]byte
	var held []*transfer
	s.mu.Lock()
	for i, t := range ts {
		r := &res.Items[i]
		if t == nil || s.mu.transfers[t.id] != t {
			// Unknown, or collected meanwhile by another wait.
			r.Code = wire.CodeNotFound
			r.Message = fmt.Sprintf("transfer %d not found on this server: never started, or already waited", ids[i])
			continue
		}
		delete(s.mu.transfers, t.id)
		if t.err != nil {
			r.Code = wire.CodeOf(t.err)
			r.Message = t.err.Error()
			if !t.item.Write {
				held = append(held, t)
			}
			continue
		}
		if !t.item.Write {
			r.Size = uint64(len(t.data))
			payload = append(payload, t.data)
			held = append(held, t)
		}
	}
	s.mu.Unlock()
	resp := rpc.Respond(&res)
	resp.Payload = payload
	if len(held) > 0 {
		resp.Done = func() {
			for _, t := range held {
				s.release(t)
			}
		}
	}
	return resp, nil
}

// status reports where transfers stand without waiting. A completed write
// is forgotten once reported; a completed read stays until it is waited,
// since its bytes are collected by the wait.
func (s *Service) status(_ context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.DataIDs
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	res := wire.DataResults{Items: make([]wire.DataResult, len(m.IDs))}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, id := range m.IDs {
		r := &res.Items[i]
		t := s.lookup(req.Client, id)
		if t == nil {
			r.State = wire.StateNotFound
			continue
		}
		select {
		case <-t.done:
		default:
			r.State = wire.StatePending
			continue
		}
		r.State = wire.StateComplete
		if t.err != nil {
			r.Code, r.Message = wire.CodeOf(t.err), t.err.Error()
		}
		if t.item.Write {
			delete(s.mu.transfers, id)
		}
	}
	return rpc.Respond(&res), nil
}

func (s *Service) flush(_ context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.IDArg
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	if err := s.store.Flush(m.ID); err != nil {
		return nil, err
	}
	return &rpc.Response{}, nil
}

func (s *Service) delete(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.IDArg
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	// Writes still queued would bring the data back after it is gone.
	s.mu.Lock()
	var pending []*transfer
	for w := range s.mu.writes[m.ID] {
		pending = append(pending, w)
	}
	s.mu.Unlock()
	for _, w := range pending {
		select {
		case <-w.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("object %d: waiting for its queued writes before deleting: %w", m.ID, ctxErr(ctx, ctx.Err()))
		}
	}
	if err := s.store.Delete(m.ID); err != nil {
		return nil, err
	}
	s.mu.Lock()
	delete(s.mu.layouts, m.ID)
	s.mu.Unlock()
	return &rpc.Response{}, nil
}

// ctxErr turns a context's end into pdc's sentinel.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return pdc.ErrTimeout
	}
	return pdc.ErrCanceled
}
