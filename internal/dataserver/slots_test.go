package dataserver

import (
	"errors"
	"log/slog"
	"slices"
	"testing"
)

// MissingSlots, which pdc status shows, names each slot this server
// cannot hold and why, and nothing before its slots are known.
func TestMissingSlots(t *testing.T) {
	svc := New(Config{Logger: slog.New(slog.DiscardHandler)})
	defer svc.Close()
	if got := svc.MissingSlots(); got != nil {
		t.Fatalf("missing slots before they are set: %q", got)
	}
	svc.SetSlots(Slots{Own: 0, Missing: map[int]error{3: errors.New("its dir is on a node not started"), 1: errors.New("out of date")}})
	want := []string{"slot 1: out of date", "slot 3: its dir is on a node not started"}
	if got := svc.MissingSlots(); !slices.Equal(got, want) {
		t.Fatalf("missing slots: %q, want %q", got, want)
	}
}
