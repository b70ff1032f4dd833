package transfer

import (
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl/lane"
)

// TestSettledKeepsSpansTheServerMayRead: a start answered with the
// server's own deadline, cancellation or shutdown may still have its lane
// writes queued: its spans stay taken. A refusal frees them. (Found by
// review: the spans were reused under a queued write.)
func TestSettledKeepsSpansTheServerMayRead(t *testing.T) {
	for _, tc := range []struct {
		err  error
		free bool
	}{
		{nil, true},
		{&pdc.ServerError{Method: "data_start", Msg: "region outside dims", Err: pdc.ErrOutOfRange}, true},
		{&pdc.ServerError{Method: "data_start", Msg: "storing writes from the lane: deadline exceeded", Err: pdc.ErrTimeout}, false},
		{&pdc.ServerError{Method: "data_start", Msg: "canceled", Err: pdc.ErrCanceled}, false},
		{&pdc.ServerError{Method: "data_start", Msg: "shutting down", Err: pdc.ErrUnavailable}, false},
		{pdc.ErrTimeout, false},
	} {
		l := &clientLane{arena: lane.NewArena(1 << 20)}
		l.refs.Store(2) // the slot's and the use's; no memory, so no unmap
		u := &laneUse{l: l}
		if _, ok := u.alloc(64 << 10); !ok {
			t.Fatal("alloc")
		}
		u.settled(tc.err)
		if freed := l.arena.Used() == 0; freed != tc.free {
			t.Errorf("settled(%v): spans freed %v, want %v", tc.err, freed, tc.free)
		}
		if got := l.refs.Load(); got != 1 {
			t.Errorf("settled(%v): %d references left, want the slot's alone", tc.err, got)
		}
	}
}
