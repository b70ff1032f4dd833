package vfs_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/vfs"
)

// Every FS passes one conformance suite; each gets a fresh root.
var impls = []struct {
	name string
	new  func(t *testing.T) (vfs.FS, string)
}{
	{"os", func(t *testing.T) (vfs.FS, string) { return vfs.Default, t.TempDir() }},
	{"mem", func(t *testing.T) (vfs.FS, string) { return vfs.NewMem(), "/root" }},
	{"faulty-mem", func(t *testing.T) (vfs.FS, string) { return vfs.NewFaulty(vfs.NewMem()), "/root" }},
	{"faulty-os", func(t *testing.T) (vfs.FS, string) { return vfs.NewFaulty(vfs.Default), t.TempDir() }},
}

func TestConformance(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			fsys, root := impl.new(t)
			if err := fsys.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			conformance(t, fsys, root)
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// conformance checks fsys behaves as a POSIX file system would for what
// the stores use, in files and directories under root. The steps build on
// each other's files and run in order.
func conformance(t *testing.T, fsys vfs.FS, root string) {
	conformFileIO(t, fsys, root)
	conformOpenModes(t, fsys, root)
	conformNames(t, fsys, root)
	conformLockAndMap(t, fsys, root)
}

// conformFileIO checks writes, reads, stat, holes, truncate and
// fallocate of one file.
func conformFileIO(t *testing.T, fsys vfs.FS, root string) {
	p := func(name string) string { return filepath.Join(root, name) }

	// Create, write, read back by offset and in order.
	f, err := fsys.Create(p("a"))
	must(t, err)
	if n, err := f.Write([]byte("hello ")); n != 6 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if n, err := f.Write([]byte("world")); n != 5 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if _, err := f.WriteAt([]byte("W"), 6); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 11)
	if n, err := f.ReadAt(buf, 0); n != 11 || (err != nil && err != io.EOF) || string(buf) != "hello World" {
		t.Fatalf("read at 0: %d %q %v", n, buf[:n], err)
	}
	if n, err := f.ReadAt(buf, 6); n != 5 || err != io.EOF {
		t.Fatalf("read past the end: %d, %v; want 5 and io.EOF", n, err)
	}
	st, err := f.Stat()
	must(t, err)
	if st.Size() != 11 || st.IsDir() {
		t.Fatalf("stat: size %d dir %v", st.Size(), st.IsDir())
	}
	must(t, f.Sync())
	// A write past the end leaves a hole of zeros; truncate cuts and grows.
	if _, err := f.WriteAt([]byte("!"), 20); err != nil {
		t.Fatal(err)
	}
	must(t, f.Truncate(15))
	must(t, f.Truncate(17))
	got, err := readAll(fsys, p("a"))
	must(t, err)
	if want := "hello World\x00\x00\x00\x00\x00\x00"; string(got) != want {
		t.Fatalf("after hole and truncates: %q, want %q", got, want)
	}
	// Fallocate grows the file with zeros, or is unsupported.
	if err := f.Fallocate(0, 64); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("fallocate: %v", err)
	} else if err == nil {
		st, _ := f.Stat()
		if st.Size() != 64 {
			t.Fatalf("fallocate to 64: size %d", st.Size())
		}
		must(t, f.Truncate(17))
	}
	must(t, f.Close())
}

// conformOpenModes checks read-only and append opens and the errors for
// missing and existing files.
func conformOpenModes(t *testing.T, fsys vfs.FS, root string) {
	p := func(name string) string { return filepath.Join(root, name) }

	// Read-only files refuse writes; missing files are fs.ErrNotExist.
	r, err := fsys.Open(p("a"))
	must(t, err)
	if _, err := r.Write([]byte("x")); err == nil {
		t.Fatal("write to a file opened read-only succeeded")
	}
	data, err := io.ReadAll(r)
	must(t, err)
	if len(data) != 17 {
		t.Fatalf("read all: %d bytes, want 17", len(data))
	}
	must(t, r.Close())
	if _, err := fsys.Open(p("missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open missing: %v, want fs.ErrNotExist", err)
	}
	if _, err := fsys.Stat(p("missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat missing: %v, want fs.ErrNotExist", err)
	}
	if _, err := fsys.OpenFile(p("a"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("exclusive create of an existing file: %v, want fs.ErrExist", err)
	}
	if _, err := fsys.OpenFile(p("nodir/x"), os.O_RDWR|os.O_CREATE, 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create in a missing dir: %v, want fs.ErrNotExist", err)
	}

	// Append mode writes at the end.
	ap, err := fsys.OpenFile(p("a"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = ap.Write([]byte("END"))
	must(t, err)
	must(t, ap.Close())
	got, err := readAll(fsys, p("a"))
	must(t, err)
	if !bytes.HasSuffix(got, []byte("END")) || len(got) != 20 {
		t.Fatalf("after append: %q", got)
	}
}

// conformNames checks mkdir, rename over, link, list and remove.
func conformNames(t *testing.T, fsys vfs.FS, root string) {
	p := func(name string) string { return filepath.Join(root, name) }

	// Names: mkdir, rename over, link, list, remove.
	must(t, fsys.MkdirAll(p("d/e"), 0o755))
	must(t, fsys.MkdirAll(p("d/e"), 0o755))
	must(t, atomicfile.WriteFS(fsys, p("d/b"), []byte("bee"), 0o644))
	must(t, atomicfile.WriteFS(fsys, p("d/b"), []byte("bee2"), 0o644))
	must(t, fsys.Rename(p("a"), p("d/c")))
	must(t, fsys.Link(p("d/c"), p("d/c2")))
	names, err := fsys.List(p("d"))
	must(t, err)
	if !slices.Equal(names, []string{"b", "c", "c2", "e"}) {
		t.Fatalf("list: %q", names)
	}
	must(t, fsys.SyncDir(p("d")))
	must(t, fsys.Rename(p("d/b"), p("d/c")))
	got, err := readAll(fsys, p("d/c"))
	must(t, err)
	if string(got) != "bee2" {
		t.Fatalf("renamed over: %q", got)
	}
	got, err = readAll(fsys, p("d/c2"))
	must(t, err)
	if len(got) != 20 {
		t.Fatalf("the link keeps the replaced file: %q", got)
	}
	if err := fsys.Remove(p("d")); err == nil {
		t.Fatal("removed a directory that is not empty")
	}
	must(t, fsys.Remove(p("d/c2")))
	must(t, fsys.RemoveAll(p("d")))
	must(t, fsys.RemoveAll(p("d")))
	if _, err := fsys.Stat(p("d")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat after RemoveAll: %v", err)
	}
}

// conformLockAndMap checks locks and MapOrRead.
func conformLockAndMap(t *testing.T, fsys vfs.FS, root string) {
	p := func(name string) string { return filepath.Join(root, name) }

	// A lock is exclusive until closed.
	l, err := fsys.Lock(p("LOCK"))
	must(t, err)
	if l2, err := fsys.Lock(p("LOCK")); err == nil {
		l2.Close()
		t.Fatal("a held lock was taken again")
	}
	must(t, l.Close())
	l, err = fsys.Lock(p("LOCK"))
	must(t, err)
	must(t, l.Close())

	// MapOrRead gives the file's bytes either way.
	must(t, atomicfile.WriteFS(fsys, p("m"), []byte("mapped bytes"), 0o644))
	mf, err := fsys.Open(p("m"))
	must(t, err)
	m, free, err := vfs.MapOrRead(mf, 12)
	must(t, err)
	if string(m) != "mapped bytes" {
		t.Fatalf("MapOrRead: %q", m)
	}
	must(t, free())
	off, err := vfs.SeekData(mf, 0)
	must(t, err)
	if off != 0 {
		t.Fatalf("SeekData(0) of a file with data at 0: %d", off)
	}
	must(t, mf.Close())
}

func readAll(fsys vfs.FS, name string) ([]byte, error) { return vfs.ReadFile(fsys, name) }

// CrashClone keeps what was synced, Clone what was written.
func TestMemCrash(t *testing.T) {
	m := vfs.NewMem()
	must(t, m.MkdirAll("/s", 0o755))
	// synced file, synced name: survives.
	must(t, atomicfile.WriteFS(m, "/s/durable", []byte("kept"), 0o644))
	// synced name, contents changed after the sync: the old contents.
	f, err := m.Create("/s/stale")
	must(t, err)
	_, _ = f.Write([]byte("old"))
	must(t, f.Sync())
	must(t, m.SyncDir("/s"))
	_, _ = f.WriteAt([]byte("new"), 0)
	must(t, f.Close())
	must(t, atomicfile.WriteFS(m, "/s/r1", []byte("r"), 0o644))
	// synced contents, name never synced: lost.
	f, err = m.Create("/s/unnamed")
	must(t, err)
	_, _ = f.Write([]byte("x"))
	must(t, f.Sync())
	must(t, f.Close())
	// a rename not synced is undone; a removal not synced too.
	must(t, m.Rename("/s/r1", "/s/r2"))
	must(t, m.Remove("/s/durable"))

	c := m.CrashClone()
	names, err := c.List("/s")
	must(t, err)
	if !slices.Equal(names, []string{"durable", "r1", "stale"}) {
		t.Fatalf("after a crash: %q", names)
	}
	for name, want := range map[string]string{"durable": "kept", "stale": "old", "r1": "r"} {
		got, err := vfs.ReadFile(c, "/s/"+name)
		must(t, err)
		if string(got) != want {
			t.Fatalf("after a crash %s holds %q, want %q", name, got, want)
		}
	}
	// The clone is durable throughout, and apart from the original.
	cc := c.CrashClone()
	if got, _ := vfs.ReadFile(cc, "/s/stale"); string(got) != "old" {
		t.Fatalf("crash of a crash clone: %q", got)
	}
	must(t, atomicfile.WriteFS(m, "/s/stale", []byte("changed"), 0o644))
	if got, _ := vfs.ReadFile(c, "/s/stale"); string(got) != "old" {
		t.Fatalf("the clone changed with the original: %q", got)
	}

	p := m.Clone()
	names, err = p.List("/s")
	must(t, err)
	if !slices.Equal(names, []string{"r2", "stale", "unnamed"}) {
		t.Fatalf("after a process crash: %q", names)
	}
}

// A failed Sync that loses its bytes (Rule.Lose) leaves them to no later
// Sync, through a process crash too: only a power loss shows it, and with
// LoseEvict reads show it at once.
func TestFaultySyncLoses(t *testing.T) {
	for _, loss := range []vfs.Loss{vfs.LoseNothing, vfs.LoseClean, vfs.LoseEvict} {
		m := vfs.NewMem()
		fsys := vfs.NewFaulty(m)
		must(t, fsys.MkdirAll("/s", 0o755))
		f, err := fsys.Create("/s/f")
		must(t, err)
		_, _ = f.Write([]byte("old"))
		must(t, f.Sync())
		must(t, fsys.SyncDir("/s"))
		_, _ = f.WriteAt([]byte("new!"), 0)
		fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Count: 1, Err: syscall.EIO, Lose: loss})
		if err := f.Sync(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("loss %d: sync: %v, want EIO", loss, err)
		}
		read, want := "new!", "old\x00"
		switch loss {
		case vfs.LoseNothing:
			want = "new!"
		case vfs.LoseEvict:
			read = want
		}
		if got, _ := vfs.ReadFile(m, "/s/f"); string(got) != read {
			t.Fatalf("loss %d: reads %q, want %q", loss, got, read)
		}
		must(t, f.Sync())
		for _, c := range []*vfs.MemFS{m.CrashClone(), m.Clone().CrashClone()} {
			if got, _ := vfs.ReadFile(c, "/s/f"); string(got) != want {
				t.Fatalf("loss %d: after a power loss %q, want %q", loss, got, want)
			}
		}
		must(t, f.Close())
	}
}

// A failed SyncDir that loses its names (Rule.Lose) leaves them to no
// later SyncDir: a power loss takes them, though the next SyncDir
// succeeded; a name changed again after the failure is durable again.
// With LoseEvict the directory reads at once as its disk has it.
func TestFaultySyncDirLoses(t *testing.T) {
	for _, loss := range []vfs.Loss{vfs.LoseNothing, vfs.LoseClean, vfs.LoseEvict} {
		m := vfs.NewMem()
		fsys := vfs.NewFaulty(m)
		must(t, fsys.MkdirAll("/s", 0o755))
		must(t, atomicfile.WriteFS(fsys, "/s/a", []byte("a"), 0o644))
		f, err := fsys.Create("/s/b")
		must(t, err)
		must(t, f.Sync())
		must(t, f.Close())
		must(t, fsys.Rename("/s/a", "/s/c"))
		fsys.Inject(vfs.Rule{Ops: vfs.OpSyncDir, Count: 1, Err: syscall.EIO, Lose: loss})
		if err := fsys.SyncDir("/s"); !errors.Is(err, syscall.EIO) {
			t.Fatalf("loss %d: syncdir: %v, want EIO", loss, err)
		}
		live, durable := "b c", "a"
		switch loss {
		case vfs.LoseNothing:
			durable = "b c"
		case vfs.LoseEvict:
			live = durable
		}
		if names, _ := m.List("/s"); strings.Join(names, " ") != live {
			t.Fatalf("loss %d: lists %q, want %q", loss, names, live)
		}
		must(t, fsys.SyncDir("/s"))
		if names, _ := m.CrashClone().List("/s"); strings.Join(names, " ") != durable {
			t.Fatalf("loss %d: after a power loss %q, want %q", loss, names, durable)
		}
		must(t, atomicfile.WriteFS(fsys, "/s/d", []byte("d"), 0o644))
		if names, _ := m.CrashClone().List("/s"); !slices.Contains(names, "d") {
			t.Fatalf("loss %d: a name made after the failure and synced: after a power loss %q", loss, names)
		}
	}
}

// Rules fail the operations they choose, after the ones they let through;
// the space limit fails what does not fit with a short write.
func TestFaulty(t *testing.T) {
	fsys := vfs.NewFaulty(vfs.NewMem())
	must(t, fsys.MkdirAll("/d", 0o755))
	remove := fsys.Inject(vfs.Rule{Ops: vfs.OpWrite, Path: "/d/x", After: 1, Count: 1, Err: syscall.EIO})
	f, err := fsys.Create("/d/x")
	must(t, err)
	_, err = f.Write([]byte("1"))
	must(t, err)
	if _, err := f.Write([]byte("2")); !errors.Is(err, syscall.EIO) || pdc.NoSpaceOrIO(err) != pdc.ErrIO {
		t.Fatalf("second write: %v, want EIO", err)
	}
	_, err = f.Write([]byte("3"))
	must(t, err)
	remove()
	if n := fsys.Injected()["write EIO"]; n != 1 {
		t.Fatalf("injected %v", fsys.Injected())
	}

	fsys.Inject(vfs.Rule{Ops: vfs.OpWrite, Path: "/d/y", Short: true})
	g, err := fsys.Create("/d/y")
	must(t, err)
	n, err := g.Write([]byte("abcd"))
	if n != 2 || !errors.Is(err, syscall.ENOSPC) || pdc.NoSpaceOrIO(err) != pdc.ErrNoSpace {
		t.Fatalf("short write: %d, %v", n, err)
	}
	fsys.Clear()

	fsys.SetSpace(10)
	h, err := fsys.Create("/d/z")
	must(t, err)
	_, err = h.Write(make([]byte, 6))
	must(t, err)
	_, err = h.WriteAt(make([]byte, 6), 0) // an overwrite takes no space
	must(t, err)
	if n, err := h.Write(make([]byte, 6)); n != 4 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the space left: %d, %v; want 4 and ENOSPC", n, err)
	}
	if err := h.Fallocate(0, 20); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fallocate past the space left: %v", err)
	}
	must(t, h.Close())
	must(t, fsys.Remove("/d/z"))
	if got := fsys.Space(); got != 10 {
		t.Fatalf("space after removing the file: %d, want 10", got)
	}
	var hooked []vfs.Op
	fsys.OnOp(func(op vfs.Op, _ string) { hooked = append(hooked, op) })
	_, _ = fsys.Stat("/d")
	must(t, fsys.SyncDir("/d"))
	if !slices.Equal(hooked, []vfs.Op{vfs.OpStat, vfs.OpSyncDir}) {
		t.Fatalf("hook saw %v", hooked)
	}
}
