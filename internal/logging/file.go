package logging

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/pdcgo/pdc"
)

// FileOptions configure a File.
type FileOptions struct {
	// MaxSize is the size past which the file is rotated. Default 64 MiB.
	MaxSize int64
	// Keep is how many rotated files are kept (PATH.1 the newest, up to
	// PATH.Keep); older ones are removed. Default 3; negative: none
	// (the file starts again empty).
	Keep int
	// OnOpen, if set, is called with each file opened, the first and
	// each one rotation opens: pdc server points its standard error at
	// it, so that a panic's trace lands in the current log. An error
	// fails the open.
	OnOpen func(*os.File) error
}

// File is a log file that rotates by size: a write that would take it
// past MaxSize first renames it PATH.1 (PATH.1 to PATH.2, and so on up to
// Keep) and starts a new one. A record is never split across two files.
// Safe for concurrent use.
type File struct {
	path string
	opts FileOptions

	mu struct {
		sync.Mutex
		f    *os.File // nil once closed
		size int64
	}
}

// OpenFile opens path for appending, creating it if needed; what it
// already holds counts towards MaxSize.
func OpenFile(path string, opts FileOptions) (*File, error) {
	if opts.MaxSize == 0 {
		opts.MaxSize = 64 << 20
	}
	if opts.MaxSize < 0 {
		return nil, fmt.Errorf("log file %s: max size %d: %w", path, opts.MaxSize, pdc.ErrInvalid)
	}
	if opts.Keep == 0 {
		opts.Keep = 3
	}
	l := &File{path: path, opts: opts}
	if err := l.openLocked(); err != nil {
		return nil, err
	}
	return l, nil
}

// openLocked opens the file at path; l.mu is held, or l not yet shared.
func (l *File) openLocked() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("log file: %w", err)
	}
	if l.opts.OnOpen != nil {
		if err := l.opts.OnOpen(f); err != nil {
			f.Close()
			return fmt.Errorf("log file %s: %w", l.path, err)
		}
	}
	l.mu.f, l.mu.size = f, fi.Size()
	return nil
}

// Write appends p, rotating first if p would take the file past MaxSize
// (a p larger than MaxSize gets a file of its own).
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.f == nil {
		return 0, fmt.Errorf("log file %s: %w", l.path, os.ErrClosed)
	}
	var rotErr error
	if l.mu.size > 0 && l.mu.size+int64(len(p)) > l.opts.MaxSize {
		// A rotation that failed part-way still leaves a file open (the
		// new one, or the old one): the record goes there, not nowhere.
		rotErr = l.rotateLocked()
	}
	n, err := l.mu.f.Write(p)
	l.mu.size += int64(n)
	if err == nil {
		err = rotErr
	}
	return n, err
}

// rotateLocked moves the current file to PATH.1, shifting older ones up
// and dropping the one past Keep, and opens a new file at PATH.
func (l *File) rotateLocked() error {
	name := func(i int) string { return l.path + "." + strconv.Itoa(i) }
	var errs []error
	// The live file gone (a user removed or moved it) is nothing to move
	// aside: the new file takes its place.
	notGone := func(err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if l.opts.Keep < 0 {
		errs = append(errs, notGone(os.Remove(l.path)))
	} else {
		if err := os.Remove(name(l.opts.Keep)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		for i := l.opts.Keep - 1; i >= 1; i-- {
			if err := os.Rename(name(i), name(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		errs = append(errs, notGone(os.Rename(l.path, name(1))))
	}
	// The old file stays open until the new one is: on any failure to
	// open, records keep going somewhere.
	old := l.mu.f
	if err := l.openLocked(); err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, old.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rotate log file %s: %w", l.path, err)
	}
	return nil
}

// Close closes the file; later writes fail. Idempotent.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.f == nil {
		return nil
	}
	err := l.mu.f.Close()
	l.mu.f = nil
	return err
}
