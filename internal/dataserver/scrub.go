package dataserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/regionstore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// ScrubOptions say what a scrub does beyond finding orphaned files.
type ScrubOptions struct {
	// Remove deletes orphaned files (their objects' metadata is gone).
	Remove bool
	// Verify checks every stored block of the other objects against its
	// checksum.
	Verify bool
	// Max bounds the orphans and corrupt blocks the report lists; the
	// counts are complete. Default 1000.
	Max int
}

// askBatch is how many ids one question to the metadata servers names.
const askBatch = 4096

// Scrub looks through the store's files: the files of objects whose
// metadata is gone (orphans: left by a delete that could not reach this
// server, or by a crash) are listed and, with opts.Remove, deleted; with
// opts.Verify every block of the others is checked against its checksum.
// Without Objects it cannot tell orphans and says so in the report.
func (s *Service) Scrub(ctx context.Context, opts ScrubOptions) (*wire.ScrubReport, error) {
	if opts.Max <= 0 {
		opts.Max = 1000
	}
	if err := s.awaitSlots(ctx); err != nil {
		return nil, err
	}
	if opts.Remove && s.cfg.RemoveGuard != nil {
		if err := s.cfg.RemoveGuard(); err != nil {
			return nil, fmt.Errorf("remove orphaned files: refused: %w", err)
		}
	}
	r := &scrubRun{s: s, opts: opts, rep: &wire.ScrubReport{}, byID: map[uint64][]heldFiles{}}
	stores, err := s.allStores()
	if err != nil {
		r.rep.Errors = append(r.rep.Errors, err.Error())
	}
	if err := r.list(stores); err != nil {
		return nil, err
	}
	r.findOrphans(ctx)
	r.reportOrphans(ctx)
	if !opts.Verify {
		return r.rep, nil
	}
	if err := r.verify(ctx); err != nil {
		return nil, err
	}
	return r.rep, nil
}

// heldFiles are an object's files in one store: an object's files may be
// in several of the server's slots.
type heldFiles struct {
	store *regionstore.Store
	files regionstore.ObjectFiles
}

// scrubRun is one scrub: the objects found, which are orphans, and the
// report.
type scrubRun struct {
	s      *Service
	opts   ScrubOptions
	rep    *wire.ScrubReport
	byID   map[uint64][]heldFiles
	ids    []uint64 // in order
	orphan []bool   // by place in ids
}

// list finds the objects the stores hold files of.
func (r *scrubRun) list(stores []*regionstore.Store) error {
	for _, st := range stores {
		files, err := st.Files()
		if err != nil {
			return err
		}
		for _, of := range files {
			if r.byID[of.Obj] == nil {
				r.ids = append(r.ids, of.Obj)
			}
			r.byID[of.Obj] = append(r.byID[of.Obj], heldFiles{st, of})
			r.rep.Bytes += uint64(of.Bytes)
		}
	}
	slices.Sort(r.ids)
	r.rep.Objects = uint64(len(r.ids))
	r.orphan = make([]bool, len(r.ids))
	return nil
}

// askWait bounds the wait for one answer about orphans.
const askWait = time.Minute

// findOrphans asks the metadata servers which of the objects are gone, in
// batches; a batch that cannot be asked about is reported and skipped.
//
// A metadata server that is stopped or wedged, rather than dead, takes
// the question and never answers. Each question is therefore bounded, by
// askWait and by half the time the caller has left, so that the report of
// what this server found (and which metadata server did not answer)
// reaches the caller before its deadline; after one goes unanswered the
// rest are not asked, each of them would wait as long.
func (r *scrubRun) findOrphans(ctx context.Context) {
	objs, ids, rep := r.s.cfg.Objects, r.ids, r.rep
	if objs == nil {
		rep.Errors = append(rep.Errors, "orphans not looked for: this server cannot ask the metadata servers")
	}
	for lo := 0; objs != nil && lo < len(ids); lo += askBatch {
		hi := min(lo+askBatch, len(ids))
		wait := askWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl)/2)
		}
		qctx, cancel := context.WithTimeout(ctx, wait)
		gone, err := objs.Gone(qctx, ids[lo:hi])
		unanswered := err != nil && qctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil && len(gone) != hi-lo {
			err = fmt.Errorf("asked about %d objects, told about %d: %w", hi-lo, len(gone), pdc.ErrInternal)
		}
		if unanswered {
			rep.Errors = append(rep.Errors, fmt.Sprintf("objects %d to %d of %d not checked for orphans: no answer within %v: %v",
				lo+1, len(ids), len(ids), wait.Round(time.Millisecond), err))
			return
		}
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("objects %d to %d of %d not checked for orphans: %v", lo+1, hi, len(ids), err))
			continue
		}
		copy(r.orphan[lo:hi], gone)
	}
}

// reportOrphans lists the orphans, removing them with opts.Remove.
func (r *scrubRun) reportOrphans(ctx context.Context) {
	rep := r.rep
	for i, id := range r.ids {
		if !r.orphan[i] {
			continue
		}
		rep.NOrphans++
		o := wire.ScrubOrphan{ID: id}
		for _, h := range r.byID[id] {
			o.Paths = append(o.Paths, h.files.Paths...)
			o.Bytes += uint64(h.files.Bytes)
		}
		if r.opts.Remove {
			if err := r.s.bury(ctx, []uint64{id}, true); err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("remove orphaned object %d: %v", id, err))
			} else {
				o.Removed = true
			}
		}
		if len(rep.Orphans) < r.opts.Max {
			rep.Orphans = append(rep.Orphans, o)
		}
	}
}

// verify checks every block of the objects that are not orphans against
// its checksum, reporting the corrupt ones.
func (r *scrubRun) verify(ctx context.Context) error {
	rep, most := r.rep, r.opts.Max
	for i, id := range r.ids {
		if r.orphan[i] {
			continue
		}
		for _, h := range r.byID[id] {
			if err := ctx.Err(); err != nil {
				return ctxErr(ctx, err)
			}
			n, err := h.store.Verify(id, func(c *regionstore.Corruption) {
				rep.NCorrupt++
				if len(rep.Corrupt) < most {
					rep.Corrupt = append(rep.Corrupt, wire.ScrubBad{ID: c.Obj, Path: c.Path, Block: uint64(c.Block), Offset: uint64(c.Offset),
						First: c.First, Last: c.Last, RegionOff: c.Region.Off, RegionSize: c.Region.Size, Message: c.Err.Error()})
				}
			})
			rep.Verified += uint64(n)
			switch {
			case errors.Is(err, pdc.ErrNotFound):
				// Deleted since it was listed.
			case err != nil:
				// A file that cannot be opened (a corrupt header) is one
				// corrupt block too: nothing of it can be read.
				rep.NCorrupt++
				if len(rep.Corrupt) < most {
					rep.Corrupt = append(rep.Corrupt, wire.ScrubBad{ID: id, Path: h.files.Paths[0], Message: err.Error()})
				}
			}
		}
	}
	return nil
}

// scrub is MethodDataScrub.
func (s *Service) scrub(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.ScrubReq
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	rep, err := s.Scrub(ctx, ScrubOptions{Remove: m.Remove, Verify: m.Verify, Max: int(min(m.Max, maxScrubList))})
	if err != nil {
		return nil, err
	}
	return rpc.Respond(rep), nil
}

// maxScrubList bounds the entries of each list a scrub answers with, so
// that the answer stays well under the frame header limit.
const maxScrubList = 1000

// StartScrub looks for orphaned files in the background (no removal, no
// checksums: it costs a directory listing and a question per few thousand
// objects to the metadata servers) and logs what it finds. Close stops it.
func (s *Service) StartScrub() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		rep, err := s.Scrub(s.quit, ScrubOptions{Max: 5})
		switch {
		case err != nil:
			if s.quit.Err() == nil {
				s.log.Warn("start-up scrub: " + err.Error())
			}
			return
		case rep.NOrphans > 0:
			var paths []string
			for _, o := range rep.Orphans {
				paths = append(paths, o.Paths...)
			}
			s.log.Warn(fmt.Sprintf("start-up scrub: %d of %d objects stored here were deleted; their files (%v...) are removed once their metadata server pushes their tombstones, or by pdc fsck --remove",
				rep.NOrphans, rep.Objects, paths))
		}
		for _, e := range rep.Errors {
			s.log.Warn("start-up scrub: " + e)
		}
	}()
}
