package stage_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/e2e"
)

// consumedLocally reports whether out says rel (version) was placed at
// local on the owner's node as a file of its own: a reflink, or a copy
// where the file system cannot clone.
func consumedLocally(out, rel string, version uint64, local string) bool {
	return hasConsumed(out, rel, version, local, "reflinked") || hasConsumed(out, rel, version, local, "copied")
}

func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// A consumer on the owner's node gets a file of its own: writing to it
// leaves the producer's file as produced, and another consumer on that
// node still gets the produced bytes past its checksum. Only --link (or
// PDC_STAGE_LINK=1) shares the producer's inode.
func TestStageLocalConsumerOwnsItsCopy(t *testing.T) {
	sc := stageUp(t)
	const rel = "ckpt/model.bin"
	want := randBytes(51, 1<<20+7)
	writeFile(t, sc.prodA, rel, want)
	sc.produce(t, rel)
	src := filepath.Join(sc.prodA, rel)

	cons1 := realDir(t, filepath.Join(sc.base, "cons-a1"))
	r := sc.consume(t, "node-a", cons1, rel)
	if r.Err != nil || !consumedLocally(r.Stdout, rel, 1, filepath.Join(cons1, rel)) {
		t.Fatalf("consume on the owner's node: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	t.Logf("on the owner's node: %s", strings.TrimSpace(r.Stdout))
	mine := filepath.Join(cons1, rel)
	if inodeOf(t, mine) == inodeOf(t, src) {
		t.Fatalf("the consumer's %s is the producer's inode", mine)
	}
	// The consumer writes to its file, as a training job writes to the
	// checkpoint it was handed.
	f, err := os.OpenFile(mine, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("overwritten by the consumer"), 100); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	sameFile(t, sc.prodA, rel, want)

	// Another consumer on the node, and one on another node, get the
	// produced bytes: their checksums pass.
	cons2 := realDir(t, filepath.Join(sc.base, "cons-a2"))
	r = sc.consume(t, "node-a", cons2, rel)
	if r.Err != nil || !consumedLocally(r.Stdout, rel, 1, filepath.Join(cons2, rel)) {
		t.Fatalf("second consume on the owner's node after the first wrote to its copy: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, cons2, rel, want)
	consB := realDir(t, filepath.Join(sc.base, "cons-b"))
	r = sc.consume(t, "node-b", consB, rel)
	if r.Err != nil || !hasConsumed(r.Stdout, rel, 1, filepath.Join(consB, rel), "fetched") {
		t.Fatalf("consume on another node after a consumer wrote to its copy: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, consB, rel, want)
	// The first consumer's edited file is not taken for the produced
	// version: consumed again, it is replaced.
	r = sc.consume(t, "node-a", cons1, rel)
	if r.Err != nil || !consumedLocally(r.Stdout, rel, 1, mine) {
		t.Fatalf("consume again over the edited copy: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	sameFile(t, cons1, rel, want)

	// Asked for, a hard link: the producer's inode, nothing moved.
	for i, how := range [][]string{{"--link"}, {}} {
		dir := realDir(t, filepath.Join(sc.base, "cons-link", string(rune('a'+i))))
		env := sc.env("node-a")
		if len(how) == 0 {
			env = sc.env("node-a", "PDC_STAGE_LINK=1")
		}
		r := e2e.Run(t, env, append(append([]string{"stage", "consume"}, how...), "--consumer-dir", dir, rel)...)
		if r.Err != nil || !hasConsumed(r.Stdout, rel, 1, filepath.Join(dir, rel), "linked") {
			t.Fatalf("consume asking for a link (%v): %v\nstdout:\n%s\nstderr:\n%s", how, r.Err, r.Stdout, r.Stderr)
		}
		if inodeOf(t, filepath.Join(dir, rel)) != inodeOf(t, src) {
			t.Errorf("the consume asking for a link (%v) did not hard-link the producer's file", how)
		}
		sameFile(t, dir, rel, want)
	}
	// -h names the option.
	r = sc.consume(t, "node-a", cons1, "-h")
	if !strings.Contains(r.Stdout+r.Stderr, "PDC_STAGE_LINK") {
		t.Errorf("pdc stage consume -h does not name PDC_STAGE_LINK:\n%s%s", r.Stdout, r.Stderr)
	}
}

// A consume on the owner's node whose context ends while it copies the
// owner's file stops there, fails, and leaves nothing in the consumer dir.
// The local copy and its two checksum passes took no context: a large
// file was copied to its end past the consume's deadline (2 GB with a 300
// ms --timeout: 7.6 s) and installed. The test cancels the consume as its
// temporary file appears (inotify), after the check of the owner's file.
func TestStageLocalCopyStopsWhenItsContextEnds(t *testing.T) {
	sc := stageUp(t)
	const rel = "big.bin"
	writeFile(t, sc.prodA, rel, nil)
	if err := os.Truncate(filepath.Join(sc.prodA, rel), 256<<20); err != nil {
		t.Fatal(err)
	}
	sc.produce(t, rel)
	consA := realDir(t, filepath.Join(sc.base, "cons-node-a"))
	c := sc.client(t, "node-a", consA)

	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Skipf("no inotify: %v", err)
	}
	events := os.NewFile(uintptr(fd), "inotify")
	if _, err := unix.InotifyAddWatch(fd, consA, unix.IN_CREATE); err != nil {
		events.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e2e.Ctx(t, time.Minute))
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		buf := make([]byte, 64<<10)
		for {
			n, err := events.Read(buf)
			if err != nil {
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
				if strings.Contains(name, ".pdc-tmp-") {
					cancel()
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}()
	got, err := c.Consume(ctx, rel)
	events.Close()
	<-watched
	if !errors.Is(err, pdc.ErrCanceled) {
		t.Fatalf("consume canceled while it copies: got %+v, %v; want ErrCanceled", got, err)
	}
	if got := listFiles(t, consA); len(got) != 0 {
		t.Fatalf("the canceled consume left %v in the consumer dir", got)
	}
}
