package crashloop_test

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/crashloop"
	"github.com/pdcgo/pdc/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.MainRace(m, nil)) }

var (
	// Under -race every server and client is race-built (MainRace) and
	// slow: a few cycles here look for data races under faults; .ci/run's
	// `pdc bench soak --cycles 20` (a normal build) gives the volume.
	cycles = flag.Int("crashloop.cycles", 8, "cycles of the crash loop (a soak: 500 and -timeout 0)")
	seed   = flag.Uint64("crashloop.seed", 0, "seed of the crash loop's choices (default: from the clock, logged)")
)

type lineWriter struct{ t *testing.T }

func (w lineWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestCrashLoop runs real servers and client processes doing mixed work
// in every partition and storage mode, kills servers and clients with
// SIGKILL mid-operation, restarts the cluster, and checks every
// acknowledged operation against a linearizable register model: nothing
// acknowledged is lost, zeroed or corrupt, and no server dies on its own.
func TestCrashLoop(t *testing.T) {
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -crashloop.seed=%d)", s, s)
	res, err := crashloop.Run(e2e.Ctx(t, 30*time.Minute), crashloop.Config{
		Bin: e2e.Bin(), Dir: t.TempDir(), Cycles: *cycles, Seed: s, Work: 1500 * time.Millisecond, Out: lineWriter{t},
		ServerCounts: []int{2, 3, 4}, // restarts move region data to new owners (record 0013)
	})
	if res != nil {
		for _, p := range res.Problems {
			t.Log(p)
		}
		t.Log(res.Summary())
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() {
		t.Fatalf("%d acknowledged operations lost, zeroed or corrupt; %d servers died without being killed; %d data races", res.Violations(), res.ServerDeaths, res.RaceReports)
	}
	// The loop must have done what it is for.
	if res.Acked() == 0 || res.AckedWrites == 0 || res.AckedCreates == 0 || res.AckedTags == 0 || res.Reads == 0 ||
		res.AckedDeletes == 0 || res.AckedDims == 0 || res.AckedTagDels == 0 || res.Searches == 0 || res.Lists == 0 ||
		res.CrashStops == 0 || (*cycles >= 8 && (res.ServerKills == 0 || res.ClientKills == 0 || res.Resizes == 0)) {
		t.Fatalf("the loop checked or injected too little: %s", res.Summary())
	}
	fmt.Fprintln(os.Stderr, "crash loop:", res.Summary())
}
