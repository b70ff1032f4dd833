package crashloop

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReplay checks the op logs a soak kept (pdc bench soak --dir) again,
// cycle by cycle: CRASHLOOP_REPLAY=dir, and CRASHLOOP_REPLAY_CYCLES=n to
// stop after cycle n. For work on the checker: a model change is tried
// on histories that found something, without running the loop again.
func TestReplay(t *testing.T) {
	dir := os.Getenv("CRASHLOOP_REPLAY")
	if dir == "" {
		t.Skip("CRASHLOOP_REPLAY not set")
	}
	last := 1 << 30
	if n := os.Getenv("CRASHLOOP_REPLAY_CYCLES"); n != "" {
		if _, err := fmt.Sscan(n, &last); err != nil {
			t.Fatalf("CRASHLOOP_REPLAY_CYCLES=%q: %v", n, err)
		}
	}
	c := newChecker()
	props := map[string]*ObjProps{}
	for cycle := 1; cycle <= last; cycle++ {
		cd := filepath.Join(dir, fmt.Sprintf("c%04d", cycle))
		back, err := readLog(filepath.Join(cd, "readback.log"))
		if err != nil {
			break // the cycle did not get to its read-back
		}
		ws, err := filepath.Glob(filepath.Join(cd, "w*.log"))
		if err != nil {
			t.Fatal(err)
		}
		var logs [][]Record
		for _, w := range ws {
			recs, err := readLog(w)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.Kind == kindCreate && r.Props != nil {
					props[r.Obj] = r.Props
				}
			}
			logs = append(logs, recs)
		}
		t0 := time.Now()
		before := c.Stats.Violations()
		c.Add(cycle, logs, props)
		c.Verify(cycle, back)
		t.Logf("cycle %d: %d violations, checked in %v", cycle, c.Stats.Violations()-before, time.Since(t0))
	}
	t.Logf("%+v", c.Stats)
	for _, p := range c.Problems {
		t.Log(p)
	}
}
