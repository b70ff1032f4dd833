package dataserver

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/regionstore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// A cut pushed while a data slot this server should hold is out of reach
// (its node-local dir on a node not started, an out-of-date copy) must
// not be acknowledged: the slot comes back at a later start with its
// files as they were, and the metadata server, which forgets a cut once
// every data server acknowledged it, would never push it again. A regrow
// then read back the rows the cut dropped (TestNodeLocalDataDirs has the
// slots out of reach and back). Refused, the cut stays pending, and its
// push after the slot is back cuts it.
func TestCutWithASlotOutOfReach(t *testing.T) {
	ctx := testCtx(t)
	log := slog.New(slog.DiscardHandler)
	open := func(dir string) *regionstore.Store {
		st, err := regionstore.Open(regionstore.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	own, away := t.TempDir(), t.TempDir()
	full := []uint64{27, 8}
	data := pattern(nbytes(full), 5)
	for i := range data {
		data[i] |= 1 // no zero byte, so a row the cut missed shows
	}
	// Object 3's rows are in slot 1, written while it was here.
	st := open(away)
	if err := st.Write(3, regionstore.Layout{Dims: full, Elem: elem, Mode: regionstore.ByOffset, Version: 1}, region.Shape(full...), data); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cut := wire.DimsCut{Obj: 3, DimsVersion: 2, Dims: []uint64{8, 8}}
	push := func(sl Slots) error {
		svc := New(Config{Logger: log})
		defer svc.Close()
		svc.SetSlots(sl)
		_, err := svc.cut(ctx, &rpc.Request{Header: cut.Marshal(nil)})
		return err
	}
	// A start without slot 1.
	ownStore := open(own)
	defer ownStore.Close()
	err := push(Slots{Own: 0, Stores: map[int]*regionstore.Store{0: ownStore},
		Missing: map[int]error{1: fmt.Errorf("its dir is on a node not started: %w", pdc.ErrUnavailable)}})
	if err == nil {
		// Acknowledged: the metadata server forgets the cut. Slot 1 is
		// back at the next start, and a regrow reads what it holds.
		st := open(away)
		defer st.Close()
		got := make([]byte, nbytes([]uint64{26, 8}))
		if err := st.Read(3, regionstore.Layout{Dims: []uint64{26, 8}, Elem: elem, Mode: regionstore.ByOffset, Version: 3}, region.Shape(26, 8), got); err != nil {
			t.Fatal(err)
		}
		t.Fatalf("a cut to dims %v was acknowledged with slot 1 out of reach: once it is back, row 8 reads %v after a regrow, want zeros", cut.Dims, got[nbytes([]uint64{8, 8}):nbytes([]uint64{9, 8})])
	}
	if !errors.Is(err, pdc.ErrUnavailable) {
		t.Fatalf("a cut with slot 1 out of reach: %v, want ErrUnavailable", err)
	}
	// Slot 1 is back: the cut, still pending, is pushed again.
	st = open(away)
	defer st.Close()
	if err := push(Slots{Own: 0, Stores: map[int]*regionstore.Store{0: ownStore, 1: st}}); err != nil {
		t.Fatalf("the cut pushed again with every slot here: %v", err)
	}
	got := make([]byte, nbytes([]uint64{26, 8}))
	if err := st.Read(3, regionstore.Layout{Dims: []uint64{26, 8}, Elem: elem, Mode: regionstore.ByOffset, Version: 3}, region.Shape(26, 8), got); err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		want := byte(0)
		if i < nbytes([]uint64{8, 8}) {
			want = data[i]
		}
		if b != want {
			t.Fatalf("after the cut and a regrow: byte %d (row %d) reads %d, want %d", i, i/nbytes([]uint64{1, 8}), b, want)
		}
	}
}

// fakeLedger keeps cuts owed in memory, for pure logic.
type fakeLedger struct {
	owes map[int]bool
	kept map[int][]wire.DimsCut
	err  error
}

func (l *fakeLedger) Owes(slot int) bool { return l.owes[slot] }
func (l *fakeLedger) Count(slot int) int { return len(l.kept[slot]) }
func (l *fakeLedger) Owe(slots []int, c wire.DimsCut) error {
	if l.err != nil {
		return l.err
	}
	for _, s := range slots {
		l.kept[s] = append(l.kept[s], c)
	}
	return nil
}

// A cut is acknowledged with a slot out of reach only once it is kept
// for that slot (to be applied before the slot serves again); a slot for
// which none is kept (a server restarted on another node), or a cut that
// could not be kept, fails it as before, and status says what is kept.
func TestCutKeptForASlotOutOfReach(t *testing.T) {
	ctx := testCtx(t)
	own, err := regionstore.Open(regionstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	cut := wire.DimsCut{Obj: 3, DimsVersion: 2, Dims: []uint64{8, 8}}
	push := func(l *fakeLedger) (*Service, error) {
		svc := New(Config{Logger: slog.New(slog.DiscardHandler), Rank: 1})
		t.Cleanup(func() { svc.Close() })
		svc.SetSlots(Slots{Own: 0, Stores: map[int]*regionstore.Store{0: own}, Owed: l,
			Missing: map[int]error{1: fmt.Errorf("its dir is on a node not started: %w", pdc.ErrUnavailable), 2: fmt.Errorf("away: %w", pdc.ErrUnavailable)}})
		_, err := svc.cut(ctx, &rpc.Request{Header: cut.Marshal(nil)})
		return svc, err
	}
	l := &fakeLedger{owes: map[int]bool{1: true, 2: true}, kept: map[int][]wire.DimsCut{}}
	svc, err := push(l)
	if err != nil {
		t.Fatalf("a cut with slots 1 and 2 out of reach, kept for both: %v", err)
	}
	if len(l.kept[1]) != 1 || len(l.kept[2]) != 1 || l.kept[1][0].DimsVersion != 2 {
		t.Fatalf("kept %+v", l.kept)
	}
	if got := svc.MissingSlots(); len(got) != 2 || !strings.Contains(got[0], "slot 1: ") || !strings.Contains(got[0], "(1 dims cut owed to it kept here, applied when it is back)") {
		t.Fatalf("status: %q", got)
	}
	l = &fakeLedger{owes: map[int]bool{1: true}, kept: map[int][]wire.DimsCut{}}
	if _, err := push(l); !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "data slot 2 on data server of rank 1") {
		t.Fatalf("a cut with slot 2 out of reach, none kept for it: %v", err)
	}
	l = &fakeLedger{owes: map[int]bool{1: true, 2: true}, err: fmt.Errorf("disk full: %w", pdc.ErrUnavailable)}
	if _, err := push(l); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("a cut that could not be kept: %v", err)
	}
}
