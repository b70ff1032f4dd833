package dataserver

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// A start is confirmed with the metadata server only when its dims may
// cut data stored under other dims: a shrink or a relayout newer than
// seen, or any change since create after a restart.
func TestMayCut(t *testing.T) {
	s := &Service{}
	s.mu.layouts = map[uint64]layoutSeen{1: {version: 3, dims: []uint64{12, 64}}}
	item := func(obj, version uint64, dims ...uint64) wire.DataItem {
		return wire.DataItem{Obj: obj, DimsVersion: version, Dims: dims}
	}
	cases := []struct {
		name  string
		it    wire.DataItem
		floor uint64
		want  bool
	}{
		{"dims of a new object", item(2, 0, 16, 64), 0, false},
		{"a version seen", item(1, 3, 12, 64), 0, false},
		{"an older version (refused anyway)", item(1, 2, 1, 64), 0, false},
		{"a newer grow", item(1, 4, 24, 64), 0, false},
		{"a newer shrink", item(1, 4, 1, 64), 0, true},
		{"a newer relayout", item(1, 4, 12, 32), 0, true},
		{"none seen, version of the files", item(2, 5, 8, 64), 5, false},
		{"none seen, newer than the files", item(2, 6, 8, 64), 5, true},
		{"none seen, no files", item(2, 1, 8, 64), 0, true},
	}
	for _, tc := range cases {
		if got := s.mayCutLocked(tc.it, tc.floor); got != tc.want {
			t.Errorf("%s: mayCut %v, want %v", tc.name, got, tc.want)
		}
	}
}

// livesObjects is a fakeObjects that tells objects' dims too (Lives):
// those in dims are found with them, those gone are gone, the rest are
// neither (a delete not yet durable, a record on its way). onAsk, if set,
// runs while a question is out, before it is answered.
type livesObjects struct {
	*fakeObjects
	dims  map[uint64]Life
	lives int // questions asked
	onAsk func(ids []uint64)
}

func newLivesObjects() *livesObjects {
	return &livesObjects{fakeObjects: newFakeObjects(), dims: map[uint64]Life{}}
}

func (f *livesObjects) set(obj, version uint64, dims ...uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dims[obj] = Life{Found: true, Dims: dims, DimsVersion: version}
}

func (f *livesObjects) questionsAsked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lives
}

func (f *livesObjects) Lives(ctx context.Context, ids []uint64) ([]Life, error) {
	f.mu.Lock()
	f.lives++
	onAsk := f.onAsk
	f.mu.Unlock()
	// The answer is the metadata server's as the question reaches it.
	f.mu.Lock()
	out := make([]Life, len(ids))
	for i, id := range ids {
		switch l, ok := f.dims[id]; {
		case f.gone[id]:
			out[i] = Life{Gone: true}
		case ok:
			out[i] = l
		}
	}
	err := f.err
	f.mu.Unlock()
	if onAsk != nil {
		onAsk(ids)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// A data server that has seen no dims of an object, and holds no file of
// it (restarted, or new to it), refuses a start older than the dims its
// metadata server has, version 0 included: they come with the question
// it asks about an object seen for the first time, so that starts whose
// versions are seen, and grows, ask nothing more. It took version 0
// unasked, and a write through a handle from before a shrink put rows
// past it that a regrow read back (TestStaleFirstWriteAfterRestart in
// internal/e2e/region).
func TestStaleFirstTouchAfterRestart(t *testing.T) {
	objs := newLivesObjects()
	objs.set(1, 2, 4, 16)
	e := newEnv(t, Config{Objects: objs})
	c := e.dial("c")
	ctx := testCtx(t)
	old := []uint64{12, 16}
	whole := region.Shape(old...)
	it := item(1, true, old, whole.Off, whole.Size)
	_, err := start(ctx, c, []wire.DataItem{it}, pattern(nbytes(old), 1))
	if !errors.Is(err, pdc.ErrStale) || !strings.Contains(err.Error(), "object 1: dims version 0 is older than version 2") {
		t.Fatalf("a write at dims version 0 after the object's dims moved to version 2: %v, want ErrStale naming both", err)
	}
	if files := storeFiles(t, e, 1); len(files) > 0 {
		t.Fatalf("a stale write made files: %v", files)
	}

	// The current version, then a grow: no question beyond the first.
	cur := []uint64{4, 16}
	it = item(1, true, cur, []uint64{0, 0}, cur)
	it.DimsVersion = 2
	if _, _, err := startWait(ctx, c, []wire.DataItem{it}, pattern(nbytes(cur), 2)); err != nil {
		t.Fatal(err)
	}
	grown := []uint64{8, 16}
	it = item(1, true, grown, []uint64{4, 0}, []uint64{4, 16})
	it.DimsVersion = 3
	if _, _, err := startWait(ctx, c, []wire.DataItem{it}, pattern(nbytes(cur), 3)); err != nil {
		t.Fatal(err)
	}
	if n := objs.questionsAsked(); n != 1 {
		t.Fatalf("%d questions to the metadata server, want 1 (the first touch's)", n)
	}
}

// A start whose dims may cut stored data is confirmed with the object's
// metadata server; one that does not find the object and does not know
// it deleted (moving between metadata servers, or its delete not yet
// durable) cannot confirm it, and the start is refused, not taken as if
// nothing newer existed; one that says it is deleted refuses it as
// deleted. Both were taken: the answer was version 0.
func TestConfirmDimsNotFound(t *testing.T) {
	objs := newLivesObjects()
	objs.set(1, 1, 8, 16)
	e := newEnv(t, Config{Objects: objs})
	c := e.dial("c")
	ctx := testCtx(t)
	dims := []uint64{8, 16}
	it := item(1, true, dims, []uint64{0, 0}, dims)
	it.DimsVersion = 1
	if _, _, err := startWait(ctx, c, []wire.DataItem{it}, pattern(nbytes(dims), 1)); err != nil {
		t.Fatal(err)
	}
	// A shrink newer than seen is asked about.
	objs.mu.Lock()
	delete(objs.dims, 1)
	objs.mu.Unlock()
	shrunk := []uint64{2, 16}
	rd := item(1, false, shrunk, []uint64{0, 0}, shrunk)
	rd.DimsVersion = 2
	_, err := start(ctx, c, []wire.DataItem{rd})
	if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "object 1: its metadata server does not hold it") {
		t.Fatalf("a shrink its metadata server cannot confirm: %v, want ErrUnavailable", err)
	}
	objs.setGone(1)
	_, err = start(ctx, c, []wire.DataItem{rd})
	if !errors.Is(err, pdc.ErrNotFound) || !strings.Contains(err.Error(), "object 1 was deleted") {
		t.Fatalf("a shrink of an object its metadata server says is deleted: %v, want ErrNotFound", err)
	}
	rd = item(1, false, dims, []uint64{0, 0}, dims)
	rd.DimsVersion = 1
	res, parts, err := startWait(ctx, c, []wire.DataItem{rd})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if !bytes.Equal(parts[0], pattern(nbytes(dims), 1)) {
		t.Fatal("a refused shrink cut the object")
	}
}
