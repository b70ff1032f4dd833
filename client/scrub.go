package client

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/pdcgo/pdc/internal/batch"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// ScrubOptions say what Scrub does beyond finding orphaned files.
type ScrubOptions struct {
	// Remove deletes orphaned files.
	Remove bool
	// Verify checks every stored block against its checksum.
	Verify bool
	// Progress, if set, is called as each data server's report comes
	// in, with the number in and of data servers asked, from the
	// goroutine of that server's call: it must not block.
	Progress func(done, total int)
}

// ScrubReport is what one data server's scrub found. The lists hold at
// most 1000 entries each; the counts are complete.
type ScrubReport struct {
	Server   Server
	Objects  uint64 // objects with files there
	Bytes    uint64 // disk space of their files
	Orphans  []Orphan
	Corrupt  []CorruptBlock
	NOrphans uint64
	NCorrupt uint64
	Verified uint64 // blocks checked
	// Errors say what could not be checked, and why.
	Errors []string
}

// Orphan is an object whose data a data server holds and whose metadata
// is gone.
type Orphan struct {
	ID      uint64
	Paths   []string
	Bytes   uint64
	Removed bool
}

// CorruptBlock is a stored block that fails its checksum (or cannot be
// read).
type CorruptBlock struct {
	ID     uint64
	Name   string // the object's name, "" if it could not be found
	Path   string
	Block  uint64 // in the file's data, or in the payload of Region
	Offset uint64 // file offset
	// First and Last are the object coordinates of the first and last
	// element the block holds.
	First, Last []uint64
	// Region is the written region holding the block (by-region
	// storage); empty by offset.
	Region  region.Box
	Message string
}

// Scrub has every data server look through its files: files of objects
// whose metadata is gone (orphans) are reported and, with Remove, deleted;
// with Verify every stored block is checked against its checksum (pdc
// fsck). It returns one report per data server that answered, and an
// error for those that did not.
func (c *Client) Scrub(ctx context.Context, opts ScrubOptions) ([]ScrubReport, error) {
	ranks := c.dataServers()
	reps := make([]ScrubReport, len(ranks))
	at := map[int]int{}
	for i, r := range ranks {
		at[r] = i
	}
	var answered atomic.Int64
	err := batch.FanOut(ranks, func(rank int) error {
		if opts.Progress != nil {
			defer func() { opts.Progress(int(answered.Add(1)), len(ranks)) }()
		}
		w, err := c.calls().DataScrub(ctx, rank, &wire.ScrubReq{Remove: opts.Remove, Verify: opts.Verify})
		if err != nil {
			return fmt.Errorf("scrub %s: %w", c.label(rank), err)
		}
		s, _, _ := c.server(rank)
		r := ScrubReport{Server: s, Objects: w.Objects, Bytes: w.Bytes, NOrphans: w.NOrphans, NCorrupt: w.NCorrupt,
			Verified: w.Verified, Errors: w.Errors}
		for _, o := range w.Orphans {
			r.Orphans = append(r.Orphans, Orphan{ID: o.ID, Paths: o.Paths, Bytes: o.Bytes, Removed: o.Removed})
		}
		for _, b := range w.Corrupt {
			r.Corrupt = append(r.Corrupt, CorruptBlock{ID: b.ID, Path: b.Path, Block: b.Block, Offset: b.Offset, First: b.First,
				Last: b.Last, Region: region.Box{Off: b.RegionOff, Size: b.RegionSize}, Message: b.Message})
		}
		reps[at[rank]] = r
		return nil
	})
	// Name the objects with corrupt blocks.
	names := map[uint64]string{}
	for i := range reps {
		for j := range reps[i].Corrupt {
			b := &reps[i].Corrupt[j]
			name, ok := names[b.ID]
			if !ok {
				name = c.peekName(ctx, b.ID)
				names[b.ID] = name
			}
			b.Name = name
		}
	}
	out := reps[:0]
	for _, r := range reps {
		if r.Server.Addr != "" {
			out = append(out, r)
		}
	}
	return out, err
}

// peekName is the name of object id, "" if it cannot be found.
func (c *Client) peekName(ctx context.Context, id uint64) string {
	rank, err := c.ownerOfKey(placement.KeyOf(id))
	if err != nil {
		return ""
	}
	res, err := c.calls().ObjOpen(ctx, rank, &wire.ObjBatch{Opens: []wire.ObjKey{{ID: id, Peek: true}}})
	if err != nil {
		return ""
	}
	if len(res.Items) != 1 || res.Items[0].Code != wire.CodeOK {
		return ""
	}
	return res.Items[0].Meta.Name
}
