package bench

import (
	"os"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	busy, err := ParseProcStatBusy("cpu  100 2 30 5000 70 4 5 6 0 0\ncpu0 50 1 15 2500 35 2 2 3 0 0\n")
	if err != nil || busy != 100+2+30+4+5+6 {
		t.Errorf("ParseProcStatBusy = %d, %v; want %d (user, nice, system, irq, softirq, steal)", busy, err, 100+2+30+4+5+6)
	}
	if _, err := ParseProcStatBusy("intr 1 2 3\n"); err == nil {
		t.Error("ParseProcStatBusy of a stat without the cpu line: no error")
	}
	// A command name with spaces and a parenthesis.
	ppid, ticks, err := ParsePIDStat("4242 (a b) c) S 17 4242 1 0 -1 4194304 100 0 0 0 11 22 33 44 20 0 1 0 1 1 1")
	if err != nil || ppid != 17 || ticks != 11+22+33+44 {
		t.Errorf("ParsePIDStat = %d, %d, %v; want 17, %d", ppid, ticks, err, 11+22+33+44)
	}
	if _, _, err := ParsePIDStat("4242 (x) S 17"); err == nil {
		t.Error("ParsePIDStat of a short stat: no error")
	}
}

// The benchmark's own CPU is its process and every descendant, not its
// siblings nor its parent.
func TestTreeTicks(t *testing.T) {
	procs := []struct {
		pid, ppid int
		ticks     int64
	}{{1, 0, 1000}, {10, 1, 5}, {11, 10, 7}, {12, 11, 9}, {13, 10, 11}, {20, 1, 500}, {21, 20, 300}}
	got := treeTicks(10, func(yield func(pid, ppid int, ticks int64)) {
		for _, p := range procs {
			yield(p.pid, p.ppid, p.ticks)
		}
	})
	if want := int64(5 + 7 + 9 + 11); got != want {
		t.Errorf("treeTicks(10) = %d, want %d", got, want)
	}
}

// On Linux, this process's CPU is its own, not the others'.
func TestReadCPU(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat")
	}
	a := ReadCPU()
	x := uint64(1)
	for b := ReadCPU(); b.Own-a.Own < 5; b = ReadCPU() {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1
		}
	}
	b := ReadCPU()
	if b.Own-a.Own < 5 || b.Machine-a.Machine < b.Own-a.Own-2 {
		t.Errorf("own ticks %d -> %d, machine %d -> %d (%d)", a.Own, b.Own, a.Machine, b.Machine, x)
	}
	if o := a.Others(b); o == nil || o.Seconds < 0 || o.Cores < 0 {
		t.Errorf("Others = %+v", o)
	}
}
