package staging

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

func TestCombineCRCMatchesWholeChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		a := make([]byte, r.IntN(5000))
		b := make([]byte, r.IntN(5000))
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		want := crc32.Checksum(append(append([]byte(nil), a...), b...), Table)
		got := CombineCRC(crc32.Checksum(a, Table), crc32.Checksum(b, Table), int64(len(b)))
		if got != want {
			t.Fatalf("combine of %d+%d bytes: %08x, want %08x", len(a), len(b), got, want)
		}
	}
}

func TestFileCRCInPartsMatchesOnePass(t *testing.T) {
	for _, size := range []int64{0, 1, 4095, parallelMin - 1, parallelMin + 12345, 3*parallelMin + 7} {
		data := make([]byte, size)
		r := rand.New(rand.NewPCG(uint64(size), 9))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		p := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := FileCRC(context.Background(), f, size)
		if err != nil || got != crc32.Checksum(data, Table) {
			t.Fatalf("size %d: %08x %v, want %08x", size, got, err, crc32.Checksum(data, Table))
		}
		if _, err := FileCRC(context.Background(), f, size+1); err == nil {
			t.Fatalf("size %d: a checksum past the end did not fail", size)
		}
		f.Close()
	}
}

func TestCheckRel(t *testing.T) {
	for _, ok := range []string{"a", "a/b.dat", "x/.hidden", "..a", "a..b/c"} {
		if err := CheckRel(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for bad, want := range map[string]error{
		"": pdc.ErrInvalid, ".": pdc.ErrInvalid, "/abs": pdc.ErrInvalid, "a//b": pdc.ErrInvalid, "a/./b": pdc.ErrInvalid,
		"a/": pdc.ErrInvalid, "a\x00b": pdc.ErrInvalid, string(bytes.Repeat([]byte("a"), MaxPathLen+1)): pdc.ErrInvalid,
		"..": pdc.ErrPermission, "../a": pdc.ErrPermission, ".pdc-stage": pdc.ErrPermission, ".pdc-stage/locks/x": pdc.ErrPermission,
	} {
		if err := CheckRel(bad); !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", bad, err, want)
		}
	}
}

func TestResolveRefusesEscapes(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(root, "outside")
	inside := filepath.Join(root, "dir")
	for _, d := range []string{outside, filepath.Join(inside, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"tofile": filepath.Join(outside, "secret"), "todir": outside, "dangling": filepath.Join(outside, "none"),
		"sub/up": "../../outside", "ok": filepath.Join(inside, "sub"),
	} {
		if err := os.Symlink(target, filepath.Join(inside, name)); err != nil {
			t.Fatal(err)
		}
	}
	// The dir itself through a symlink: paths are checked against its
	// real location.
	alias := filepath.Join(root, "alias")
	if err := os.Symlink(inside, alias); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(alias, "consumer", false)
	if err != nil {
		t.Fatal(err)
	}
	for path, wantRel := range map[string]string{
		"a.dat": "a.dat", "sub/b": "sub/b", "new/deep/c": "new/deep/c", "ok/x": "ok/x", "./sub/../e": "e",
		filepath.Join(alias, "f"): "f", filepath.Join(inside, "sub", "g"): "sub/g",
	} {
		rel, abs, err := d.Resolve(path)
		if err != nil || rel != wantRel || abs != filepath.Join(inside, filepath.FromSlash(wantRel)) {
			t.Errorf("%q: %q %q %v; want %q", path, rel, abs, err, wantRel)
		}
	}
	for _, path := range []string{"../outside/secret", "sub/../../x", filepath.Join(outside, "secret"), "/etc/passwd",
		"tofile", "todir/secret", "todir/new", "dangling", "sub/up/secret", ".pdc-stage/copies/x"} {
		if _, _, err := d.Resolve(path); !errors.Is(err, pdc.ErrPermission) {
			t.Errorf("%q: %v, want ErrPermission", path, err)
		}
	}
	for _, path := range []string{"", "a\x00b"} {
		if _, _, err := d.Resolve(path); !errors.Is(err, pdc.ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", path, err)
		}
	}
	if _, err := OpenDir(filepath.Join(root, "none"), "producer", false); !errors.Is(err, pdc.ErrNotFound) {
		t.Errorf("missing dir: %v", err)
	}
	if _, err := OpenDir("", "producer", false); !errors.Is(err, pdc.ErrInvalid) {
		t.Errorf("no dir: %v", err)
	}
}

func TestLockWaitsUnderContext(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	open := func() *os.File {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	holder := open()
	if err := Lock(context.Background(), holder, true); err != nil {
		t.Fatal(err)
	}
	// A shared lock must wait for the exclusive one: it times out.
	waiter := open()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := Lock(ctx, waiter, false)
	cancel()
	if !errors.Is(err, pdc.ErrTimeout) {
		t.Fatalf("lock while held: %v, want ErrTimeout", err)
	}
	waiter.Close()
	// Once the holder lets go, a waiter gets it.
	waiter = open()
	defer waiter.Close()
	got := make(chan error, 1)
	go func() { got <- Lock(context.Background(), waiter, false) }()
	holder.Close()
	if err := <-got; err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	// Shared locks share.
	other := open()
	defer other.Close()
	if err := Lock(context.Background(), other, false); err != nil {
		t.Fatalf("second shared lock: %v", err)
	}
}

func produced(t *testing.T, dir, rel string, data []byte) *wire.StageRecord {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	rec := &wire.StageRecord{Path: rel, Version: 3, Host: "h", Size: uint64(len(data)), MtimeNS: st.ModTime().UnixNano(),
		CRC: crc32.Checksum(data, Table)}
	rec.Ino = inode(st)
	return rec
}

func TestOwnerServesOnlyTheProducedFile(t *testing.T) {
	dir := t.TempDir()
	files, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec := produced(t, dir, "a.dat", []byte("hello"))
	src, err := files.Resolve(ctx, FetchKey(rec))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := src.File.ReadAt(buf, 0); err != nil || string(buf) != "hello" || src.Len != 5 {
		t.Fatalf("served %q (%d bytes), %v", buf, src.Len, err)
	}
	src.Release()

	// Changed since produce: refused.
	if err := os.WriteFile(filepath.Join(dir, "a.dat"), []byte("hello!"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := files.Resolve(ctx, FetchKey(rec)); !errors.Is(err, pdc.ErrChecksum) {
		t.Fatalf("changed file: %v, want ErrChecksum", err)
	}
	// Removed: not found.
	os.Remove(filepath.Join(dir, "a.dat"))
	if _, err := files.Resolve(ctx, FetchKey(rec)); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("removed file: %v, want ErrNotFound", err)
	}
	// A key whose record escapes, or that is not a staging key at all.
	bad := *rec
	bad.Path = "../x"
	if _, err := files.Resolve(ctx, FetchKey(&bad)); !errors.Is(err, pdc.ErrPermission) {
		t.Fatalf("escaping key: %v", err)
	}
	if _, err := files.Resolve(ctx, []byte("stage:a.dat")); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("truncated key: %v", err)
	}
	k := FetchKey(rec)
	k[len("stage:a.dat")+1] = 9
	if _, err := files.Resolve(ctx, k); !errors.Is(err, pdc.ErrVersion) {
		t.Fatalf("future key format: %v", err)
	}
	// A symlink in the producer dir pointing out is not served.
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	link := *rec
	link.Path = "link"
	if _, err := files.Resolve(ctx, FetchKey(&link)); !errors.Is(err, pdc.ErrPermission) {
		t.Fatalf("symlink out: %v", err)
	}
}

func TestOwnerWaitsForAConcurrentProduce(t *testing.T) {
	dir := t.TempDir()
	files, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := produced(t, dir, "b", []byte("bytes"))
	f, err := os.Open(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Lock(context.Background(), f, true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = files.Resolve(ctx, FetchKey(rec))
	cancel()
	if !errors.Is(err, pdc.ErrTimeout) {
		t.Fatalf("serve during produce: %v, want ErrTimeout", err)
	}
	f.Close()
	src, err := files.Resolve(context.Background(), FetchKey(rec))
	if err != nil {
		t.Fatalf("serve after produce: %v", err)
	}
	src.Release()
}

func TestLocalCopyRecord(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, "consumer", false)
	if err != nil {
		t.Fatal(err)
	}
	rec := produced(t, root, "c", []byte("copy"))
	abs := filepath.Join(root, "c")
	if d.Current("c", abs, rec) {
		t.Fatal("current before any record")
	}
	if err := d.Remember("c", abs, rec); err != nil {
		t.Fatal(err)
	}
	if !d.Current("c", abs, rec) {
		t.Fatal("not current after Remember")
	}
	newer := *rec
	newer.Version++
	if d.Current("c", abs, &newer) {
		t.Fatal("current for a newer version")
	}
	// The copy edited locally: no longer current.
	if err := os.WriteFile(abs, []byte("copy, edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d.Current("c", abs, rec) {
		t.Fatal("current after a local edit")
	}
	checkCorruptCopyRecord(t, d, root, abs)
	checkCopyLocks(t, d, root)
}

// checkCorruptCopyRecord: a torn or flipped copy record is ignored, not
// trusted, and forgetting it twice is no error.
func checkCorruptCopyRecord(t *testing.T, d Dir, root, abs string) {
	t.Helper()
	rec := produced(t, root, "c", []byte("copy"))
	if err := d.Remember("c", abs, rec); err != nil {
		t.Fatal(err)
	}
	if !d.Current("c", abs, rec) {
		t.Fatal("not current after a second Remember")
	}
	buf := make([]byte, 4096)
	if n, err := unix.Getxattr(abs, copyAttr, buf); err == nil {
		buf[n/2] ^= 1
		if err := unix.Setxattr(abs, copyAttr, buf[:n], 0); err != nil {
			t.Fatal(err)
		}
	} else {
		p := d.copyRecordPath("c")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("no attribute (%v) and no record file: %v", err, err)
		}
		b[len(b)/2] ^= 1
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if d.Current("c", abs, rec) {
		t.Fatal("current with a corrupt record")
	}
	if err := d.Forget("c"); err != nil {
		t.Fatal(err)
	}
	if err := d.Forget("c"); err != nil {
		t.Fatalf("second forget: %v", err)
	}
}

// checkCopyLocks: consumers of one path serialise on its lock, and a
// holder that dies leaves its temporary file, which the next one clears.
func checkCopyLocks(t *testing.T, d Dir, root string) {
	t.Helper()
	release, tmp, err := d.LockCopy(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, _, err = d.LockCopy(ctx, "c")
	cancel()
	if !errors.Is(err, pdc.ErrTimeout) {
		t.Fatalf("second lock: %v", err)
	}
	// A holder that dies leaves its temporary file; the next one's
	// CreateTemp replaces it, and the lock file holds nothing.
	if filepath.Dir(tmp) != root {
		t.Fatalf("temporary file %s is not next to the copy", tmp)
	}
	if err := os.WriteFile(tmp, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	release()
	release2, tmp2, err := d.LockCopy(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	if tmp2 != tmp {
		t.Fatalf("temporary names %s, then %s: want one per path", tmp, tmp2)
	}
	f, err := CreateTemp(tmp2, false)
	if err != nil {
		t.Fatalf("create over a leftover: %v", err)
	}
	if st, err := f.Stat(); err != nil || st.Size() != 0 {
		t.Fatalf("the temporary file over a leftover: %v, %v; want a new, empty file", st, err)
	}
	f.Close()
	if st, err := os.Stat(filepath.Join(root, metaDir, "locks", name("c"))); err != nil || st.Size() != 0 {
		t.Fatalf("lock file: %v, %v; want it empty", st, err)
	}
	// A symlink put at the temporary name is replaced, not followed.
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(tmp2)
	if err := os.Symlink(outside, tmp2); err != nil {
		t.Fatal(err)
	}
	if f, err = CreateTemp(tmp2, true); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, err := os.ReadFile(outside); err != nil || string(b) != "keep" {
		t.Fatalf("the symlink's target: %q, %v", b, err)
	}
	if st, err := os.Lstat(tmp2); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("the temporary file: %v, %v; want a regular file", st, err)
	}
}

// The record file stands in where a file system keeps no attributes, and
// names the copy's inode: a record left by an older copy does not vouch
// for a new file.
func TestCopyRecordFile(t *testing.T) {
	rec := &wire.StageRecord{Path: "p", Version: 2, Host: "h", Size: 4, CRC: 9}
	b := encodeCopy(rec, 77, 1234)
	got, ino, mtime, ok := decodeCopy(b)
	if !ok || ino != 77 || mtime != 1234 || got.Path != "p" || got.Version != 2 || got.CRC != 9 {
		t.Fatalf("round trip: %+v %d %d %v", got, ino, mtime, ok)
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x40
		if _, _, _, ok := decodeCopy(c); ok {
			t.Fatalf("a flipped byte %d was accepted", i)
		}
	}
	for n := range len(b) {
		if _, _, _, ok := decodeCopy(b[:n]); ok {
			t.Fatalf("a record cut to %d bytes was accepted", n)
		}
	}
}

// A copy is current only for the produce it was made from, not for
// another produce given the same version (a metadata server that lost the
// first in a power loss hands its version out again; a removed path
// starts again at 1): the record's CRC and produce time are compared as
// well, so such a copy is fetched again, never kept as the new version.
func TestCopyOfOneProduceIsNotAnotherOfTheSameVersion(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, "consumer", false)
	if err != nil {
		t.Fatal(err)
	}
	rec := produced(t, root, "c", []byte("copy"))
	rec.Version, rec.Produced = 2, 1000
	abs := filepath.Join(root, "c")
	if err := d.Remember("c", abs, rec); err != nil {
		t.Fatal(err)
	}
	otherBytes := *rec
	otherBytes.CRC ^= 1
	otherBytes.Produced = 2000
	sameBytes := *rec // produced again, unchanged, under the same version
	sameBytes.Produced = 2000
	earlier := *rec // a clock behind the first produce's
	earlier.CRC ^= 1
	earlier.Produced = 500
	for name, other := range map[string]*wire.StageRecord{"other bytes": &otherBytes, "same bytes": &sameBytes, "earlier clock": &earlier} {
		if d.Current("c", abs, other) {
			t.Errorf("a copy of version 2 is current for another produce of version 2 (%s)", name)
		}
		if _, ok := d.Serves("c", abs, other); ok {
			t.Errorf("a copy of version 2 serves another produce of version 2 (%s)", name)
		}
	}
}

// The owner serves nothing outside its producer dir, even when a
// directory along a path is swapped for a symlink out of it between the
// check of the path's symlinks and the open, by anyone who can write in
// the dir; here over and over (renameat2 RENAME_EXCHANGE), while a
// consumer asks for the file outside under a record made to match it. It
// was served about once in 10 to 40 asks.
func TestOwnerServesNothingOutsideAfterASwap(t *testing.T) {
	root := t.TempDir()
	dir, outside := filepath.Join(root, "prod"), filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(dir, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "swap")); err != nil {
		t.Fatal(err)
	}
	rec := produced(t, outside, "f", []byte("not for consumers"))
	rec.Path = "sub/f"
	files, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	stop, swapped := make(chan struct{}), make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				swapped <- nil
				return
			default:
			}
			err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, "sub"), unix.AT_FDCWD, filepath.Join(dir, "swap"), unix.RENAME_EXCHANGE)
			if err != nil {
				swapped <- err
				return
			}
		}
	}()
	served := 0
	for range 3000 {
		src, err := files.Resolve(context.Background(), FetchKey(rec))
		if err == nil {
			served++
			src.Release()
		}
	}
	close(stop)
	if err := <-swapped; err != nil {
		t.Skipf("cannot swap a directory and a symlink (renameat2): %v", err)
	}
	if served > 0 {
		t.Fatalf("the file outside the producer dir was served %d times of 3000", served)
	}
}
