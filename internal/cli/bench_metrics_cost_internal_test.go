package cli

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/bench"
)

// bench io --metrics-cost --case: the cases measured are those reported,
// on both sides. fakeIO names its cases as bench.IO does ("io", and the
// label in parentheses) and measures only those cfg.Want wants.
func TestIOCostCaseFilter(t *testing.T) {
	fakeIO := func(_ context.Context, cfg bench.IOConfig) ([]bench.Result, error) {
		name := "io"
		if cfg.Label != "" {
			name += " (" + cfg.Label + ")"
		}
		var out []bench.Result
		for _, c := range []string{"write 8 MiB", "read 8 MiB"} {
			if cfg.Want.Any(name, c) {
				out = append(out, bench.Result{Bench: name, Case: c, Value: 1, Unit: "GB/s"})
			}
		}
		return out, nil
	}
	for _, re := range []string{`write`, `^io \(with metrics\): write`, `with metrics.*read`} {
		m := regexp.MustCompile(re)
		rs, err := ioCostRound(context.Background(), bench.IOConfig{Want: m.MatchString}, [2]string{"a", "b"}, 0, fakeIO)
		if err != nil {
			t.Fatal(err)
		}
		kept := bench.MatchCases(rs, m.MatchString)
		if len(rs) == 0 || len(kept) != len(rs) {
			t.Errorf("--case %q: measured %v, kept %v", re, rs, kept)
		}
		for _, r := range kept {
			if r.Bench != "io (with metrics)" || r.Ceiling != "the same, without metrics" || r.Ratio != 1 {
				t.Errorf("--case %q: %+v", re, r)
			}
		}
	}
	// Without a --case, every case, each side measured once in each
	// order.
	var order []string
	rec := func(ctx context.Context, cfg bench.IOConfig) ([]bench.Result, error) {
		order = append(order, cfg.TmpDir)
		return fakeIO(ctx, cfg)
	}
	for round := range 2 {
		rs, err := ioCostRound(context.Background(), bench.IOConfig{}, [2]string{"without", "with"}, round, rec)
		if err != nil || len(rs) != 2 {
			t.Fatalf("round %d: %v, %v", round, rs, err)
		}
	}
	if want := []string{"without", "with", "with", "without"}; !slices.Equal(order, want) {
		t.Errorf("order %q, want %q", order, want)
	}
}

// bench io --metrics-cost starts its own clusters and moves payloads on
// the stream: flags that would measure something else are refused, not
// silently dropped.
func TestIOCostRefusesOtherModes(t *testing.T) {
	for _, args := range [][]string{
		{"--cluster", t.TempDir(), "--raw", "127.0.0.1:9"},
		{"--unix"},
		{"--transport", "shm"},
	} {
		var out, errb strings.Builder
		err := Run(context.Background(), append([]string{"bench", "io", "--metrics-cost"}, args...), &out, &errb)
		if !errors.Is(err, errUsage) {
			t.Errorf("bench io --metrics-cost %s: %v, want a usage error", strings.Join(args, " "), err)
		}
	}
}
