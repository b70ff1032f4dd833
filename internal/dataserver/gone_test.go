package dataserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/regionstore"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// fakeObjects answers which objects are gone from a set, counting the
// questions; hold, if set, blocks each question until it is closed.
type fakeObjects struct {
	mu    sync.Mutex
	gone  map[uint64]bool
	asked []uint64
	err   error
	hold  chan struct{}
	in    chan struct{} // a question arrived (capacity 1)
}

func newFakeObjects() *fakeObjects {
	return &fakeObjects{gone: map[uint64]bool{}, in: make(chan struct{}, 1)}
}

func (f *fakeObjects) Gone(ctx context.Context, ids []uint64) ([]bool, error) {
	f.mu.Lock()
	f.asked = append(f.asked, ids...)
	hold, err := f.hold, f.err
	f.mu.Unlock()
	select {
	case f.in <- struct{}{}:
	default:
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]bool, len(ids))
	for i, id := range ids {
		out[i] = f.gone[id]
	}
	return out, nil
}

func (f *fakeObjects) setGone(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gone[id] = true
}

func (f *fakeObjects) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeObjects) questions(id uint64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, a := range f.asked {
		if a == id {
			n++
		}
	}
	return n
}

func storeFiles(t *testing.T, e *env, obj uint64) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(e.dir, fmt.Sprintf("%016x.*", obj)))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A data server asks about an object once, the first time it sees it, and
// refuses an object its metadata server says is gone, or one it cannot
// ask about, without storing anything.
func TestFirstTouchAsksOnce(t *testing.T) {
	objs := newFakeObjects()
	e := newEnv(t, Config{Objects: objs})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{8, 8}
	whole := region.Shape(dims...)

	// Many first touches at once ask once.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { write(t, e.dial(fmt.Sprint("w", i)), 7, dims, whole, pattern(nbytes(dims), 1)) })
	}
	wg.Wait()
	write(t, c, 7, dims, whole, pattern(nbytes(dims), 2))
	if got := read(t, c, 7, dims, whole); !bytes.Equal(got, pattern(nbytes(dims), 2)) {
		t.Fatal("read back other bytes")
	}
	if n := objs.questions(7); n != 1 {
		t.Fatalf("asked about object 7 %d times, want once", n)
	}

	objs.setGone(8)
	for _, write := range []bool{true, false} {
		var payload [][]byte
		if write {
			payload = [][]byte{pattern(nbytes(dims), 3)}
		}
		_, err := start(ctx, c, []wire.DataItem{item(8, write, dims, whole.Off, whole.Size)}, payload...)
		if !errors.Is(err, pdc.ErrNotFound) || !strings.Contains(err.Error(), "object 8 was deleted") {
			t.Fatalf("start (write %v) of a deleted object: %v, want ErrNotFound naming it", write, err)
		}
	}
	if n := objs.questions(8); n != 1 {
		t.Fatalf("asked about deleted object 8 %d times, want once", n)
	}
	if files := storeFiles(t, e, 8); len(files) > 0 {
		t.Fatalf("a deleted object got files: %v", files)
	}

	objs.setErr(fmt.Errorf("metadata server 0 of 1: %w", pdc.ErrUnavailable))
	_, err := start(ctx, c, []wire.DataItem{item(9, true, dims, whole.Off, whole.Size)}, pattern(nbytes(dims), 4))
	if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "object 9: cannot tell whether it still exists") {
		t.Fatalf("write of an object no metadata server can vouch for: %v", err)
	}
	if files := storeFiles(t, e, 9); len(files) > 0 {
		t.Fatalf("an unvouched object got files: %v", files)
	}
}

// A tombstone that arrives while the first question about the object is
// out wins over the answer, and a tombstone of an object never seen here
// removes its files without being remembered.
func TestTombstoneDuringQuestion(t *testing.T) {
	objs := newFakeObjects()
	objs.hold = make(chan struct{})
	e := newEnv(t, Config{Objects: objs})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{8, 8}
	whole := region.Shape(dims...)
	res := make(chan error, 1)
	go func() {
		_, err := start(ctx, c, []wire.DataItem{item(5, true, dims, whole.Off, whole.Size)}, pattern(nbytes(dims), 1))
		res <- err
	}()
	select {
	case <-objs.in:
	case <-ctx.Done():
		t.Fatal("the write never asked about its object")
	}
	gone := wire.IDList{IDs: []uint64{5}}
	if _, err := e.dial("meta").Call(ctx, wire.MethodDataGone, gone.Marshal(nil), nil, nil); err != nil {
		t.Fatal(err)
	}
	close(objs.hold) // the answer: object 5 exists, as it did when asked
	if err := <-res; !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("write whose object was deleted while it was asked about: %v, want ErrNotFound", err)
	}
	if files := storeFiles(t, e, 5); len(files) > 0 {
		t.Fatalf("files of a deleted object: %v", files)
	}

	// Tombstones of objects this server never served keep nothing.
	gone = wire.IDList{IDs: []uint64{77, 78}}
	if _, err := e.dial("meta").Call(ctx, wire.MethodDataGone, gone.Marshal(nil), nil, nil); err != nil {
		t.Fatal(err)
	}
	e.svc.mu.Lock()
	_, kept := e.svc.mu.lives[77]
	e.svc.mu.Unlock()
	if kept || e.store.Buried(77) {
		t.Fatal("a tombstone of an object never served here is remembered")
	}
}

// Writes racing a tombstone either are stored before it (and removed by
// it) or are refused: no file is left, whatever the interleaving.
func TestTombstoneRacingWrites(t *testing.T) {
	objs := newFakeObjects()
	e := newEnv(t, Config{Objects: objs})
	dims := []uint64{64, 64}
	whole := region.Shape(dims...)
	for round := range 10 {
		// Generous: the race detector on a loaded machine is slow.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		obj := uint64(100 + round)
		write(t, e.dial("first"), obj, dims, whole, pattern(nbytes(dims), 1))
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for w := range 4 {
			wg.Go(func() {
				c := e.dial(fmt.Sprint("racer", w))
				for {
					_, _, err := startWait(ctx, c, []wire.DataItem{item(obj, true, dims, whole.Off, whole.Size)}, pattern(nbytes(dims), byte(w)))
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		gone := wire.IDList{IDs: []uint64{obj}}
		if _, err := e.dial("meta").Call(ctx, wire.MethodDataGone, gone.Marshal(nil), nil, nil); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, pdc.ErrNotFound) {
				t.Fatalf("round %d: a write racing the tombstone failed with %v, want ErrNotFound", round, err)
			}
		}
		if files := storeFiles(t, e, obj); len(files) > 0 {
			t.Fatalf("round %d: files left after the tombstone: %v", round, files)
		}
	}
}

// Scrub lists the files of objects whose metadata is gone, removes them
// if asked, and finds blocks that fail their checksums, by object, block
// and path.
func TestScrub(t *testing.T) {
	objs := newFakeObjects()
	e := newEnv(t, Config{Objects: objs})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{32, 1024}
	whole := region.Shape(dims...)
	write(t, c, 1, dims, whole, pattern(nbytes(dims), 1))
	write(t, c, 2, dims, whole, pattern(nbytes(dims), 2))
	ids, err := start(ctx, c, []wire.DataItem{regItem(3, true, dims, whole.Off, whole.Size)}, pattern(nbytes(dims), 3))
	if err != nil {
		t.Fatal(err)
	}
	if res, _, err := wait(ctx, c, ids...); err != nil {
		t.Fatal(err)
	} else {
		mustOK(t, res)
	}
	for _, obj := range []uint64{1, 3} {
		if err := idArg(ctx, c, wire.MethodDataFlush, obj); err != nil {
			t.Fatal(err)
		}
	}
	objs.setGone(2) // deleted while this server was down, say
	// A file put in the store's directory behind its back (after it
	// opened), of an object that is gone.
	stray := filepath.Join(e.dir, fmt.Sprintf("%016x.off", 55))
	if err := os.WriteFile(stray, []byte("stray"), 0o644); err != nil {
		t.Fatal(err)
	}
	objs.setGone(55)
	offPath := flipStoredBit(t, e, 1, ".off", 4096*3+1) // block 28 of 32
	regPath := flipStoredBit(t, e, 3, ".reg", 1)        // the last block of the region

	checkScrubVerify(ctx, t, e, dims, stray, offPath, regPath)

	rep, err := e.svc.Scrub(ctx, ScrubOptions{Remove: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.NOrphans != 2 || !rep.Orphans[0].Removed || !rep.Orphans[1].Removed || len(storeFiles(t, e, 2)) != 0 || len(storeFiles(t, e, 55)) != 0 {
		t.Fatalf("scrub --remove: %+v, files %v %v", rep, storeFiles(t, e, 2), storeFiles(t, e, 55))
	}
	if _, err := start(ctx, c, []wire.DataItem{item(2, false, dims, whole.Off, whole.Size)}); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("read of a removed orphan: %v", err)
	}
}

// flipStoredBit flips a bit fromEnd bytes before the end of an object's
// store file, the damage a scrub must find, and returns the file's path.
func flipStoredBit(t *testing.T, e *env, obj uint64, ext string, fromEnd int64) string {
	t.Helper()
	path := filepath.Join(e.dir, fmt.Sprintf("%016x%s", obj, ext))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	b := []byte{0}
	f.ReadAt(b, st.Size()-fromEnd)
	b[0] ^= 1
	if _, err := f.WriteAt(b, st.Size()-fromEnd); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkScrubVerify checks a verifying scrub without --remove: it lists
// objects 2 and 55 as orphans but keeps them, and names the two flipped
// blocks by object, block and path.
func checkScrubVerify(ctx context.Context, t *testing.T, e *env, dims []uint64, stray, offPath, regPath string) {
	t.Helper()
	rep, err := e.svc.Scrub(ctx, ScrubOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Objects != 4 || rep.NOrphans != 2 || len(rep.Orphans) != 2 || rep.Orphans[0].ID != 2 || rep.Orphans[1].ID != 55 ||
		rep.Orphans[0].Removed || rep.Orphans[1].Paths[0] != stray {
		t.Fatalf("orphans: %+v", rep)
	}
	// 32 blocks by offset, 32 or 33 by region (its payload may start
	// inside a block).
	if rep.NCorrupt != 2 || rep.Verified < 64 || rep.Verified > 65 || len(rep.Errors) != 0 {
		t.Fatalf("corrupt %d, verified %d, errors %v: want 2 corrupt of 64 or 65 blocks", rep.NCorrupt, rep.Verified, rep.Errors)
	}
	bad := rep.Corrupt
	slices.SortFunc(bad, func(a, b wire.ScrubBad) int { return int(a.ID) - int(b.ID) })
	if b := bad[0]; b.ID != 1 || b.Path != offPath || b.Block != 28 || !slices.Equal(b.First, []uint64{28, 0}) ||
		!slices.Equal(b.Last, []uint64{28, 1023}) || !strings.Contains(b.Message, "stored data is corrupt") {
		t.Fatalf("corrupt by-offset block: %+v", b)
	}
	if b := bad[1]; b.ID != 3 || b.Path != regPath || b.Block != rep.Verified-33 || !slices.Equal(b.RegionOff, []uint64{0, 0}) ||
		!slices.Equal(b.RegionSize, dims) || !slices.Equal(b.Last, []uint64{31, 1023}) {
		t.Fatalf("corrupt by-region block: %+v", b)
	}
}

// A read started before a tombstone and done after it fails as deleted
// rather than reading zeros, also for an object whose files were there
// when the server started and were not touched since: the tombstone then
// removes them without the store having an entry for the object.
func TestReadAcrossTombstone(t *testing.T) {
	for _, mode := range []regionstore.Mode{regionstore.ByOffset, regionstore.ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dims := []uint64{8, 8}
			whole := region.Shape(dims...)
			it := func(obj uint64, write bool) wire.DataItem {
				i := item(obj, write, dims, whole.Off, whole.Size)
				i.Storage = uint32(mode)
				return i
			}
			dir := t.TempDir()
			// The data of objects 3 and 4, stored before a restart.
			before := newEnvAt(t, Config{}, nil, filepath.Join(dir, "before"))
			for _, obj := range []uint64{3, 4} {
				if _, _, err := startWait(testCtx(t), before.dial("w"), []wire.DataItem{it(obj, true)}, pattern(nbytes(dims), byte(obj))); err != nil {
					t.Fatal(err)
				}
			}
			if err := before.store.Close(); err != nil {
				t.Fatal(err)
			}

			objs := newFakeObjects()
			e := newEnvAt(t, Config{Objects: objs}, nil, filepath.Join(dir, "before"))
			c := e.dial("c")
			ctx := testCtx(t)
			var ids []uint64
			for _, obj := range []uint64{3, 4} {
				id, err := start(ctx, c, []wire.DataItem{it(obj, false)})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id...)
			}
			// Object 3 is written again after the restart (the store has
			// an entry for it); object 4 is not.
			if _, _, err := startWait(ctx, c, []wire.DataItem{it(3, true)}, pattern(nbytes(dims), 3)); err != nil {
				t.Fatal(err)
			}
			gone := wire.IDList{IDs: []uint64{3, 4}}
			if _, err := e.dial("meta").Call(ctx, wire.MethodDataGone, gone.Marshal(nil), nil, nil); err != nil {
				t.Fatal(err)
			}
			res, parts, err := wait(ctx, c, ids...)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res.Items {
				obj := 3 + i
				if r.Code == wire.CodeOK {
					if !bytes.Equal(parts[i], pattern(nbytes(dims), byte(obj))) {
						t.Errorf("object %d: a read across its tombstone answered other bytes than it held (zeros: %v)", obj, !slices.ContainsFunc(parts[i], func(b byte) bool { return b != 0 }))
					}
					continue
				}
				if r.Code != wire.CodeNotFound {
					t.Errorf("object %d: read across its tombstone: %v %s, want its bytes or not found", obj, r.Code, r.Message)
				}
			}
		})
	}
}

// An object its metadata server has never created (a client guessed its
// id) is refused without being remembered as deleted: once it is
// created, the next start asks again and is taken. It was refused as
// deleted for as long as the data server ran.
func TestNeverCreatedIsNotRemembered(t *testing.T) {
	objs := newLivesObjects()
	e := newEnv(t, Config{Objects: objs})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{8, 8}
	whole := region.Shape(dims...)
	objs.mu.Lock()
	objs.dims[5] = Life{Never: true}
	objs.mu.Unlock()
	for _, write := range []bool{true, false} {
		var payload [][]byte
		if write {
			payload = [][]byte{pattern(nbytes(dims), 1)}
		}
		_, err := start(ctx, c, []wire.DataItem{item(5, write, dims, whole.Off, whole.Size)}, payload...)
		if !errors.Is(err, pdc.ErrNotFound) || !strings.Contains(err.Error(), "object 5 does not exist") {
			t.Fatalf("start (write %v) of an object not created: %v, want ErrNotFound naming it", write, err)
		}
	}
	if files := storeFiles(t, e, 5); len(files) > 0 {
		t.Fatalf("an object not created got files: %v", files)
	}
	// A write asks on the connection's reader and again in start.
	if asked := objs.questionsAsked(); asked < 2 {
		t.Fatalf("asked %d questions about an object not created in 2 starts, want one each at least", asked)
	}
	objs.set(5, 0, dims...)
	write(t, c, 5, dims, whole, pattern(nbytes(dims), 2))
	if got := read(t, c, 5, dims, whole); !bytes.Equal(got, pattern(nbytes(dims), 2)) {
		t.Fatal("read back other bytes")
	}
}
