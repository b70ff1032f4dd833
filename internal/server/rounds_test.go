package server

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/wire"
)

func testRounds(size int, list *cluster.List) *rounds {
	rs := newRounds(size, func() *cluster.List { return list })
	rs.finish = func(round uint32, reports map[int]*wire.StartRound) (map[int]*wire.StartRound, error) {
		out := map[int]*wire.StartRound{}
		for r := range reports {
			out[r] = &wire.StartRound{Round: round, Rank: uint32(r), Plan: &wire.SlotPlan{Epoch: uint64(len(reports))}}
		}
		return out, nil
	}
	rs.rejoin = func(round uint32, rank int) *wire.StartRound {
		return &wire.StartRound{Round: round, Rank: uint32(rank), Instance: "rejoined"}
	}
	return rs
}

func TestRoundAnswersEveryServerOnceAllReported(t *testing.T) {
	rs := testRounds(3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan *wire.StartRound, 3)
	for r := range 3 {
		go func() {
			a, err := rs.report(ctx, &wire.StartRound{Round: wire.RoundPlan, Rank: uint32(r), Instance: "i"}, r == 0)
			if err != nil {
				t.Error(err)
			}
			got <- a
		}()
	}
	for range 3 {
		if a := <-got; a == nil || a.Plan == nil || a.Plan.Epoch != 3 {
			t.Fatalf("answer %+v", a)
		}
	}
	// A server that restarted after the round was done is answered as a
	// rejoin; the same one asking again gets its answer again.
	if a, err := rs.report(ctx, &wire.StartRound{Round: wire.RoundPlan, Rank: 1, Instance: "new"}, false); err != nil || a.Instance != "rejoined" {
		t.Fatalf("rejoin: %+v, %v", a, err)
	}
	if a, err := rs.report(ctx, &wire.StartRound{Round: wire.RoundPlan, Rank: 2, Instance: "i"}, false); err != nil || a.Plan.Epoch != 3 {
		t.Fatalf("asked again: %+v, %v", a, err)
	}
	if _, err := rs.report(ctx, &wire.StartRound{Round: wire.RoundPlan, Rank: 3}, false); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("rank out of range: %v", err)
	}
}

// A server that dies before it reports fails the round for every server
// waiting, with an error naming it, instead of leaving them waiting.
func TestRoundFailsWhenAServerIsGone(t *testing.T) {
	// Rank 1's address: a port that was listening and is closed now.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	list := &cluster.List{Size: 3, Servers: []cluster.Server{
		{Rank: 0, Addr: "127.0.0.1:1", Instance: "zero"},
		{Rank: 1, Addr: dead, Instance: "one", PID: 4242},
		{Rank: 2, Addr: "127.0.0.1:1", Instance: "two"},
	}}
	rs := testRounds(3, list)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other := make(chan error, 1)
	go func() {
		_, err := rs.report(ctx, &wire.StartRound{Round: wire.RoundMoved, Rank: 2, Instance: "two"}, false)
		other <- err
	}()
	_, err = rs.report(ctx, &wire.StartRound{Round: wire.RoundMoved, Rank: 0, Instance: "zero"}, true)
	if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "rank 1 ("+dead+") (pid 4242) is gone") {
		t.Fatalf("rank 0: %v", err)
	}
	if err2 := <-other; err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("rank 2: %v", err2)
	}
	if ctx.Err() != nil {
		t.Fatal("the round waited for its deadline")
	}
}
