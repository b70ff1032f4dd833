package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/pdcgo/pdc/client"
)

func BenchmarkQuery(b *testing.B) {
	io := startCluster(b)
	cfg := QueryConfig{TmpDir: io.TmpDir, ObjectSize: 32 << 20, Rounds: 1}
	var rs []Result
	for b.Loop() {
		var err error
		if rs, err = Query(context.Background(), cfg); err != nil {
			b.Fatal(err)
		}
	}
	report(b, rs)
}

func TestQueryBenchRuns(t *testing.T) {
	io := startCluster(t)
	rs, err := Query(context.Background(), QueryConfig{TmpDir: io.TmpDir, ObjectSize: 1 << 20, Rounds: 1, Label: "lbl"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 10 {
		t.Fatalf("got %d results, want 10", len(rs))
	}
	// Case names are what reports and comparisons key on.
	if got, want := rs[9].Case, fmt.Sprintf("count within quarter x>0.5, %s, 0 MiB, lbl", client.RegionDynamic); got != want {
		t.Errorf("last case %q, want %q", got, want)
	}
	for _, r := range rs {
		if r.Value <= 0 || r.CeilingValue <= 0 || r.Ratio <= 0 {
			t.Errorf("%s: empty figure %+v", r.Case, r)
		}
	}
}
