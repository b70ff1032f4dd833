package regionstore

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// ObjectFiles is an object's files in the store's directory.
type ObjectFiles struct {
	Obj   uint64
	Paths []string
	Bytes int64 // disk space they take (holes not counted)
}

// Files lists the objects that have files in the store's directory, in id
// order. It reads the directory, not what the store has opened, so it
// finds files of objects nobody has used since the store opened; names
// that are not an object's file are left out.
func (s *Store) Files() ([]ObjectFiles, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	names, err := s.fs.List(s.opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("region store: %w", err)
	}
	var out []ObjectFiles
	for _, name := range names {
		id, ok := objectOf(name)
		if !ok {
			continue
		}
		p := filepath.Join(s.opts.Dir, name)
		st, err := s.fs.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue // gone meanwhile, or not a file
		}
		if n := len(out); n == 0 || out[n-1].Obj != id {
			out = append(out, ObjectFiles{Obj: id})
		}
		of := &out[len(out)-1]
		of.Paths = append(of.Paths, p)
		of.Bytes += diskBytes(st)
	}
	// List sorts by name, and names start with the id in fixed-width
	// hex: ids come in order already.
	return out, nil
}

// ObjectOf returns the id of the object whose file is named name (a
// name in a store's directory), and false for a name that is not an
// object's file.
func ObjectOf(name string) (uint64, bool) { return objectOf(name) }

// objectOf parses the id out of an object's file name (%016x and one of
// fileExts).
func objectOf(name string) (uint64, bool) {
	if len(name) < 17 {
		return 0, false
	}
	if !slices.Contains(fileExts, name[16:]) {
		return 0, false
	}
	id, err := strconv.ParseUint(name[:16], 16, 64)
	return id, err == nil && !strings.ContainsAny(name[:16], "+-ABCDEF")
}

// Corruption is a stored block of an object that fails its checksum, or
// that could not be read.
type Corruption struct {
	Obj    uint64
	Path   string
	Block  int64 // in its area: the by-offset file's data, or a region's payload
	Offset int64 // file offset of the block
	// First and Last are the object coordinates of the first and last
	// element the block holds.
	First, Last []uint64
	// Region is the written region whose payload holds the block (by
	// region); empty by offset.
	Region region.Box
	Err    error
}

func (c *Corruption) Error() string {
	where := fmt.Sprintf("elements %v to %v", c.First, c.Last)
	if c.Region.Ndim() > 0 {
		where += fmt.Sprintf(" of region %v", c.Region)
	}
	return fmt.Sprintf("object %d: %s: block %d (file offset %d, %s): %v", c.Obj, c.Path, c.Block, c.Offset, where, c.Err)
}

func (c *Corruption) Unwrap() error { return c.Err }

// verifyChunk is how many bytes Verify reads at a time.
const verifyChunk = 1 << 20

// Verify reads every stored block of object obj and checks it against its
// checksum; it calls bad for each that fails (or cannot be read) and
// returns how many blocks it checked. Writes to the object wait meanwhile;
// reads do not. An object without files checks nothing; a buried one is
// pdc.ErrNotFound. A file that cannot be opened at all (its header is
// corrupt) is the error.
func (s *Store) Verify(obj uint64, bad func(*Corruption)) (int64, error) {
	o, err := s.object(obj)
	if err != nil {
		return 0, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s.closed.Load() {
		return 0, errClosed
	}
	if o.gone {
		return 0, errGone(obj)
	}
	if err := s.load(o); err != nil {
		return 0, err
	}
	var checked int64
	switch o.mode {
	case ByOffset:
		off := o.off
		trailing := off.trailing
		err = s.withFile(off.path, func(f vfs.File) error {
			n, err := verifyArea(f, &off.area, off.dataLen, func(b, lo, hi int64, err error) {
				first, last := lo/int64(off.elem), (hi-1)/int64(off.elem)
				bad(&Corruption{Obj: obj, Path: off.path, Block: b, Offset: off.area.base + lo,
					First: coordOf(trailing, uint64(first)), Last: coordOf(trailing, uint64(last)), Err: err})
			})
			checked = n
			return err
		})
		if err != nil {
			return checked, fmt.Errorf("region store: verify object %d: %s: %w", obj, off.path, err)
		}
	case ByRegion:
		l := o.reg
		err = s.withFile(l.path, func(f vfs.File) error {
			for _, p := range l.pieces {
				n, err := verifyArea(f, &p.area, p.area.size, func(b, lo, hi int64, err error) {
					first, last := lo/int64(l.elem), (hi-1)/int64(l.elem)
					bad(&Corruption{Obj: obj, Path: l.path, Block: b, Offset: p.area.base + lo,
						First: within(p.box, uint64(first)), Last: within(p.box, uint64(last)), Region: p.box.Clone(), Err: err})
				})
				checked += n
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return checked, fmt.Errorf("region store: verify object %d: %s: %w", obj, l.path, err)
		}
	}
	return checked, nil
}

// verifyArea checks the blocks holding the first size bytes of a,
// reading them a chunk of whole blocks at a time (bytes past the end of
// the file read as zeros, as they do when served); it calls bad with each
// failing block and its byte range in the area. It returns the blocks
// checked.
func verifyArea(f vfs.File, a *area, size int64, bad func(b, lo, hi int64, err error)) (int64, error) {
	size = min(size, a.size)
	if size <= 0 {
		return 0, nil
	}
	end := a.blockEnd(a.block(size - 1))
	buf := make([]byte, min(verifyChunk, end)+blockSize)
	var checked int64
	for b := int64(0); a.blockStart(b) < end; {
		// Whole blocks from b, up to a chunk.
		lo := a.blockStart(b)
		hi, nb := a.blockEnd(b), b+1
		for hi < end && a.blockEnd(nb)-lo <= int64(len(buf)) {
			hi, nb = a.blockEnd(nb), nb+1
		}
		chunk := buf[:hi-lo]
		n, err := f.ReadAt(chunk, a.base+lo)
		readErr := err != nil && !errors.Is(err, io.EOF)
		if !readErr {
			clear(chunk[n:])
		}
		for ; b < nb; b++ {
			bl, bh := a.blockStart(b), a.blockEnd(b)
			data := chunk[bl-lo : bh-lo]
			if readErr {
				// Block by block, so that one unreadable block does not
				// hide the others.
				k, err := f.ReadAt(data, a.base+bl)
				if err != nil && !errors.Is(err, io.EOF) {
					bad(b, bl, bh, err)
					checked++
					continue
				}
				clear(data[k:])
			}
			if err := a.verify(b, data); err != nil {
				bad(b, bl, bh, err)
			}
			checked++
		}
	}
	return checked, nil
}

// coordOf is the coordinates of element idx of a row-major array whose
// dims after the first are trailing.
func coordOf(trailing []uint64, idx uint64) []uint64 {
	dims := append([]uint64{math.MaxUint64}, trailing...)
	return region.Delinearize(dims, idx, nil)
}

// within is the object coordinates of element idx of box's row-major
// elements.
func within(box region.Box, idx uint64) []uint64 {
	c := region.Delinearize(box.Size, idx, nil)
	for i := range c {
		c[i] += box.Off[i]
	}
	return c
}
