package regionstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// Mode is how an object's data is laid out in its file.
type Mode uint8

const (
	// ByOffset places every element at its canonical row-major offset.
	ByOffset Mode = 1
	// ByRegion appends each written region to a log indexed by box.
	ByRegion Mode = 2
)

func (m Mode) String() string {
	switch m {
	case ByOffset:
		return "offset"
	case ByRegion:
		return "region"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode parses "offset" or "region".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "offset":
		return ByOffset, nil
	case "region":
		return ByRegion, nil
	}
	return 0, fmt.Errorf("unknown storage mode %q (want offset or region): %w", s, pdc.ErrInvalid)
}

// Layout is what the store needs to know of an object.
type Layout struct {
	Dims []uint64 // the object's dims now; the first may grow
	Elem int      // bytes per element
	Mode Mode
}

// Options configure a Store.
type Options struct {
	// Dir holds the object files. Required; created if missing.
	Dir string
	// Sync fsyncs each write before Write returns.
	Sync bool
}

// Store keeps objects' data in files under one directory, one file per
// object. Safe for concurrent use.
type Store struct {
	opts Options

	mu     sync.Mutex
	files  map[uint64]*objFile
	closed bool
}

type objFile struct {
	mu sync.RWMutex
	f  *os.File
}

// Open opens the store in opts.Dir.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("region store: no directory given: %w", pdc.ErrInvalid)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("region store: %w", err)
	}
	return &Store{opts: opts, files: map[uint64]*objFile{}}, nil
}

func (s *Store) path(obj uint64) string {
	return filepath.Join(s.opts.Dir, fmt.Sprintf("%016x.off", obj))
}

func (s *Store) file(obj uint64) (*objFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("region store: %w", pdc.ErrClosed)
	}
	if of := s.files[obj]; of != nil {
		return of, nil
	}
	f, err := os.OpenFile(s.path(obj), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("region store: object %d: %w", obj, err)
	}
	of := &objFile{f: f}
	s.files[obj] = of
	return of, nil
}

func check(obj uint64, l Layout, box region.Box, n int) error {
	if err := box.Within(l.Dims); err != nil {
		return fmt.Errorf("object %d: %w", obj, err)
	}
	if want := box.Volume() * uint64(l.Elem); uint64(n) != want {
		return fmt.Errorf("object %d region %v: buffer of %d bytes, want %d: %w", obj, box, n, want, pdc.ErrInvalid)
	}
	return nil
}

// Write stores data, box's elements in row-major order, as object obj's
// box. It is in the file (in the kernel) when Write returns, and on disk
// too with Options.Sync.
func (s *Store) Write(obj uint64, l Layout, box region.Box, data []byte) error {
	if err := check(obj, l, box, len(data)); err != nil {
		return err
	}
	of, err := s.file(obj)
	if err != nil {
		return err
	}
	of.mu.Lock()
	defer of.mu.Unlock()
	elem := uint64(l.Elem)
	var pos uint64
	var werr error
	region.Runs(region.Shape(l.Dims...), box, func(r region.Run) bool {
		n := r.Len * elem
		if _, werr = of.f.WriteAt(data[pos:pos+n], int64(r.Off*elem)); werr != nil {
			return false
		}
		pos += n
		return true
	})
	if werr != nil {
		return fmt.Errorf("region store: write object %d region %v: %w", obj, box, werr)
	}
	if s.opts.Sync {
		if err := of.f.Sync(); err != nil {
			return fmt.Errorf("region store: sync object %d: %w", obj, err)
		}
	}
	return nil
}

// Read fills into with object obj's box in row-major order. Elements never
// written read as zeros.
func (s *Store) Read(obj uint64, l Layout, box region.Box, into []byte) error {
	if err := check(obj, l, box, len(into)); err != nil {
		return err
	}
	of, err := s.file(obj)
	if err != nil {
		return err
	}
	of.mu.RLock()
	defer of.mu.RUnlock()
	elem := uint64(l.Elem)
	var pos uint64
	var rerr error
	region.Runs(region.Shape(l.Dims...), box, func(r region.Run) bool {
		n := r.Len * elem
		got, err := of.f.ReadAt(into[pos:pos+n], int64(r.Off*elem))
		if err != nil && !errors.Is(err, io.EOF) {
			rerr = err
			return false
		}
		clear(into[pos+uint64(got) : pos+n])
		pos += n
		return true
	})
	if rerr != nil {
		return fmt.Errorf("region store: read object %d region %v: %w", obj, box, rerr)
	}
	return nil
}

// Flush fsyncs object obj's file.
func (s *Store) Flush(obj uint64) error {
	of, err := s.file(obj)
	if err != nil {
		return err
	}
	if err := of.f.Sync(); err != nil {
		return fmt.Errorf("region store: sync object %d: %w", obj, err)
	}
	return nil
}

// Delete removes object obj's data.
func (s *Store) Delete(obj uint64) error {
	s.mu.Lock()
	of := s.files[obj]
	delete(s.files, obj)
	s.mu.Unlock()
	if of != nil {
		of.mu.Lock()
		_ = of.f.Close()
		of.mu.Unlock()
	}
	if err := os.Remove(s.path(obj)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("region store: delete object %d: %w", obj, err)
	}
	return nil
}

// Close fsyncs and closes every open file. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for obj, of := range s.files {
		of.mu.Lock()
		if err := of.f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("sync object %d: %w", obj, err))
		}
		_ = of.f.Close()
		of.mu.Unlock()
	}
	s.files = nil
	return errors.Join(errs...)
}
