package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Op is a kind of file system operation, for choosing which to fail.
type Op uint32

const (
	OpCreate    Op = 1 << iota // Create; OpenFile with O_CREATE
	OpOpen                     // Open; OpenFile without O_CREATE
	OpRead                     // Read, ReadAt
	OpWrite                    // Write, WriteAt
	OpSync                     // File.Sync
	OpTruncate                 // File.Truncate
	OpFallocate                // File.Fallocate
	OpMap                      // Mapper.Map
	OpRename                   // FS.Rename
	OpRemove                   // FS.Remove, FS.RemoveAll
	OpLink                     // FS.Link
	OpMkdir                    // FS.MkdirAll
	OpStat                     // FS.Stat, File.Stat
	OpList                     // FS.List
	OpSyncDir                  // FS.SyncDir
	OpLock                     // FS.Lock
	opEnd
)

// OpWrites are the operations that change files or names.
const OpWrites = OpCreate | OpWrite | OpSync | OpTruncate | OpFallocate | OpRename | OpRemove | OpLink | OpMkdir | OpSyncDir

// OpAll is every operation.
const OpAll = opEnd - 1

var opNames = []string{"create", "open", "read", "write", "sync", "truncate", "fallocate", "mmap",
	"rename", "remove", "link", "mkdir", "stat", "list", "syncdir", "lock"}

func (o Op) String() string {
	var names []string
	for i, n := range opNames {
		if o&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// Rule chooses operations to fail.
type Rule struct {
	// Ops are the operations it applies to; 0 means OpWrites.
	Ops Op
	// Path selects the files whose path contains it; "" selects all.
	Path string
	// After lets the first After matching operations through.
	After int
	// Count is how many to fail after those; 0 fails every one.
	Count int
	// Err is what they fail with, inside an *fs.PathError; nil means
	// syscall.ENOSPC.
	Err error
	// Short makes a failing Write or WriteAt write the first half of its
	// bytes before it fails, as a write cut short by a full disk does.
	Short bool
	// Lose makes a failing Sync of a MemFS file lose what was written
	// since the last good one, as Linux may after a failed writeback;
	// see Loss. A failing SyncDir of a MemFS directory likewise loses
	// the names changed since the last good one (files created, renamed
	// or removed): no later SyncDir makes them durable, only a new change
	// of the name. Other file systems are left as they are.
	Lose Loss
}

// Loss is what a failed fsync does to the bytes it could not write.
// Linux marks their pages clean whatever it keeps, so a later fsync of
// the file succeeds without writing them ("fsyncgate"): they are lost
// to a power loss even if a retried fsync said otherwise.
type Loss uint8

const (
	// LoseNothing: the bytes stay dirty, and a later Sync makes them
	// durable (a file system that retries writeback).
	LoseNothing Loss = iota
	// LoseClean: the bytes stay readable (their pages are kept, clean),
	// but the disk keeps what it had: a later Sync does not write them,
	// and a power loss takes them.
	LoseClean
	// LoseEvict: the pages are dropped too: reads return what the disk
	// has (the bytes of the last good Sync, zeros past its end).
	LoseEvict
)

type rule struct {
	Rule
	seen, failed int
}

// Faulty wraps an FS and fails chosen operations: by rules (Inject), and
// with ENOSPC once writes would take more space than it has left
// (SetSpace). A hook (OnOp) runs before every operation, for a test that
// takes crash snapshots at chosen points. Safe for concurrent use.
type Faulty struct {
	inner FS
	ops   atomic.Int64

	mu       sync.Mutex
	rules    []*rule          // guarded by mu
	space    int64            // bytes writes may still add; < 0: no limit; guarded by mu
	hook     func(Op, string) // guarded by mu
	injected map[string]int   // faults by "op errno"; guarded by mu
}

// NewFaulty wraps inner; it fails nothing until told to.
func NewFaulty(inner FS) *Faulty {
	return &Faulty{inner: inner, space: -1, injected: map[string]int{}}
}

// Inject adds r; remove takes it out again.
func (f *Faulty) Inject(r Rule) (remove func()) {
	if r.Ops == 0 {
		r.Ops = OpWrites
	}
	if r.Err == nil {
		r.Err = syscall.ENOSPC
	}
	rs := &rule{Rule: r}
	f.mu.Lock()
	f.rules = append(f.rules, rs)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.rules {
			if x == rs {
				f.rules = append(f.rules[:i], f.rules[i+1:]...)
				return
			}
		}
	}
}

// Clear removes every rule and the space limit.
func (f *Faulty) Clear() {
	f.mu.Lock()
	f.rules, f.space = nil, -1
	f.mu.Unlock()
}

// SetSpace lets writes add at most n more bytes to files (growing them,
// by writes past their end, Truncate or Fallocate) before they fail with
// ENOSPC, as on a disk with n bytes free; a write that does not fit writes
// what does. Removing or shrinking a file gives its bytes back. n < 0
// lifts the limit.
func (f *Faulty) SetSpace(n int64) {
	f.mu.Lock()
	f.space = n
	f.mu.Unlock()
}

// Space is the bytes writes may still add; < 0 if there is no limit.
func (f *Faulty) Space() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.space
}

// OnOp sets a hook called before every operation (nil: none). It runs on
// the caller's goroutine, outside any lock of f's.
func (f *Faulty) OnOp(hook func(op Op, path string)) {
	f.mu.Lock()
	f.hook = hook
	f.mu.Unlock()
}

// Ops is how many operations f has seen.
func (f *Faulty) Ops() int64 { return f.ops.Load() }

// Injected returns how many faults f injected, by operation and error.
func (f *Faulty) Injected() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.injected))
	for k, v := range f.injected {
		out[k] = v
	}
	return out
}

// fault runs the hook and returns the rule that fails this operation, if
// any.
func (f *Faulty) fault(op Op, path string) *rule {
	f.ops.Add(1)
	f.mu.Lock()
	hook := f.hook
	var hit *rule
	for _, r := range f.rules {
		if r.Ops&op == 0 || !strings.Contains(path, r.Path) {
			continue
		}
		r.seen++
		if r.seen > r.After && (r.Count == 0 || r.failed < r.Count) {
			r.failed++
			hit = r
			f.injected[op.String()+" "+errName(r.Err)]++
			break
		}
	}
	f.mu.Unlock()
	if hook != nil {
		hook(op, path)
	}
	return hit
}

func errName(err error) string {
	var n syscall.Errno
	if errors.As(err, &n) {
		switch n {
		case syscall.ENOSPC:
			return "ENOSPC"
		case syscall.EIO:
			return "EIO"
		case syscall.EDQUOT:
			return "EDQUOT"
		}
	}
	return err.Error()
}

func (f *Faulty) check(op Op, path string) error {
	if r := f.fault(op, path); r != nil {
		return &fs.PathError{Op: op.String(), Path: path, Err: r.Err}
	}
	return nil
}

// take takes n bytes of space, failing with ENOSPC if fewer are left and
// taking none then.
func (f *Faulty) take(op Op, path string, n int64) error {
	if n <= 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.space < 0 {
		return nil
	}
	if n > f.space {
		f.injected[op.String()+" ENOSPC"]++
		return &fs.PathError{Op: op.String(), Path: path, Err: syscall.ENOSPC}
	}
	f.space -= n
	return nil
}

// giveBack returns the space of name (about to be removed or replaced).
func (f *Faulty) giveBack(name string) {
	f.mu.Lock()
	limited := f.space >= 0
	f.mu.Unlock()
	if !limited {
		return
	}
	if st, err := f.inner.Stat(name); err == nil && !st.IsDir() {
		f.mu.Lock()
		if f.space >= 0 {
			f.space += st.Size()
		}
		f.mu.Unlock()
	}
}

func (f *Faulty) limited() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.space >= 0
}

func (f *Faulty) Create(name string) (File, error) {
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
}

func (f *Faulty) Open(name string) (File, error) { return f.OpenFile(name, os.O_RDONLY, 0) }

func (f *Faulty) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	op := OpOpen
	if flag&os.O_CREATE != 0 {
		op = OpCreate
	}
	if err := f.check(op, name); err != nil {
		return nil, err
	}
	if flag&os.O_TRUNC != 0 && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		f.giveBack(name)
	}
	in, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultyFile{fs: f, f: in, appnd: flag&os.O_APPEND != 0}, nil
}

func (f *Faulty) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	f.giveBack(name)
	return f.inner.Remove(name)
}

func (f *Faulty) RemoveAll(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.inner.RemoveAll(name)
}

func (f *Faulty) Rename(oldname, newname string) error {
	if r := f.fault(OpRename, oldname+" "+newname); r != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: r.Err}
	}
	f.giveBack(newname)
	return f.inner.Rename(oldname, newname)
}

func (f *Faulty) Link(oldname, newname string) error {
	if r := f.fault(OpLink, oldname+" "+newname); r != nil {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: r.Err}
	}
	return f.inner.Link(oldname, newname)
}

func (f *Faulty) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.check(OpMkdir, dir); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir, perm)
}

func (f *Faulty) Stat(name string) (os.FileInfo, error) {
	if err := f.check(OpStat, name); err != nil {
		return nil, err
	}
	return f.inner.Stat(name)
}

func (f *Faulty) List(dir string) ([]string, error) {
	if err := f.check(OpList, dir); err != nil {
		return nil, err
	}
	return f.inner.List(dir)
}

func (f *Faulty) SyncDir(dir string) error {
	if r := f.fault(OpSyncDir, dir); r != nil {
		if m, ok := f.inner.(*MemFS); ok && r.Lose != LoseNothing {
			m.loseDir(dir, r.Lose == LoseEvict)
		}
		return &fs.PathError{Op: OpSyncDir.String(), Path: dir, Err: r.Err}
	}
	return f.inner.SyncDir(dir)
}

func (f *Faulty) Lock(name string) (io.Closer, error) {
	if err := f.check(OpLock, name); err != nil {
		return nil, err
	}
	return f.inner.Lock(name)
}

// faultyFile is a file of a Faulty FS.
type faultyFile struct {
	fs    *Faulty
	f     File
	appnd bool
	off   int64 // Read and Write's offset, mirrored to size writes
}

func (f *faultyFile) Name() string { return f.f.Name() }

func (f *faultyFile) Read(p []byte) (int, error) {
	if err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	n, err := f.f.Read(p)
	f.off += int64(n)
	return n, err
}

func (f *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *faultyFile) Write(p []byte) (int, error) {
	off := f.off
	if f.appnd {
		off = -1
	}
	n, err := f.write(p, off, func(b []byte) (int, error) { return f.f.Write(b) })
	f.off += int64(n)
	return n, err
}

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	return f.write(p, off, func(b []byte) (int, error) { return f.f.WriteAt(b, off) })
}

// write writes p at off (-1: at the end) with do, failing it as the rules
// and the space left say.
func (f *faultyFile) write(p []byte, off int64, do func([]byte) (int, error)) (int, error) {
	if r := f.fs.fault(OpWrite, f.Name()); r != nil {
		n := 0
		if r.Short && len(p) > 1 {
			n, _ = do(p[:len(p)/2])
		}
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: r.Err}
	}
	if !f.fs.limited() {
		return do(p)
	}
	st, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	if off < 0 {
		off = st.Size()
	}
	grow := off + int64(len(p)) - st.Size()
	if err := f.fs.take(OpWrite, f.Name(), grow); err != nil {
		// Write what fits, as a file system with that much room does.
		f.fs.mu.Lock()
		room := max(f.fs.space, 0)
		f.fs.space -= room
		f.fs.mu.Unlock()
		fit := max(0, int64(len(p))-(grow-room))
		n := 0
		if fit > 0 {
			n, _ = do(p[:fit])
		}
		return n, err
	}
	return do(p)
}

func (f *faultyFile) Close() error { return f.f.Close() }

func (f *faultyFile) Stat() (os.FileInfo, error) {
	if err := f.fs.check(OpStat, f.Name()); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

func (f *faultyFile) Sync() error {
	if r := f.fs.fault(OpSync, f.Name()); r != nil {
		if m, ok := f.f.(*memFile); ok && r.Lose != LoseNothing {
			m.node.lose(r.Lose == LoseEvict)
		}
		return &fs.PathError{Op: OpSync.String(), Path: f.Name(), Err: r.Err}
	}
	return f.f.Sync()
}

func (f *faultyFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.Name()); err != nil {
		return err
	}
	if f.fs.limited() {
		st, err := f.f.Stat()
		if err != nil {
			return err
		}
		if size > st.Size() {
			if err := f.fs.take(OpTruncate, f.Name(), size-st.Size()); err != nil {
				return err
			}
		} else {
			f.fs.mu.Lock()
			if f.fs.space >= 0 {
				f.fs.space += st.Size() - size
			}
			f.fs.mu.Unlock()
		}
	}
	return f.f.Truncate(size)
}

func (f *faultyFile) Fallocate(off, n int64) error {
	if err := f.fs.check(OpFallocate, f.Name()); err != nil {
		return err
	}
	if f.fs.limited() {
		st, err := f.f.Stat()
		if err != nil {
			return err
		}
		if err := f.fs.take(OpFallocate, f.Name(), off+n-st.Size()); err != nil {
			return err
		}
	}
	return f.f.Fallocate(off, n)
}

func (f *faultyFile) Map(n int, writable bool) ([]byte, error) {
	if err := f.fs.check(OpMap, f.Name()); err != nil {
		return nil, err
	}
	m, ok := f.f.(Mapper)
	if !ok {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), errors.ErrUnsupported)
	}
	return m.Map(n, writable)
}

func (f *faultyFile) Unmap(b []byte) error {
	if m, ok := f.f.(Mapper); ok {
		return m.Unmap(b)
	}
	return nil
}

func (f *faultyFile) SeekData(off int64) (int64, error) {
	return SeekData(f.f, off)
}
