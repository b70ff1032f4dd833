package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Load is the machine's 1-minute load average and its core count at one
// moment: figures taken while other work runs are that work's noise.
type Load struct {
	Load1 float64   `json:"load1"`
	Cores int       `json:"cores"`
	At    time.Time `json:"at"`
	// Err says why Load1 could not be read (no /proc/loadavg).
	Err string `json:"error,omitempty"`
}

// LoadSpan is the load before and after a run, and the CPU that
// processes other than the benchmark's own took during it.
type LoadSpan struct {
	Before Load `json:"before"`
	After  Load `json:"after"`
	// Others, when it could be read, is the CPU the rest of the machine
	// took while the benchmark ran.
	Others *OtherCPU `json:"others,omitempty"`
}

// ReadLoad reads /proc/loadavg.
func ReadLoad() Load {
	l := Load{Cores: runtime.NumCPU(), At: time.Now().UTC()}
	b, err := os.ReadFile("/proc/loadavg")
	if err == nil {
		l.Load1, err = ParseLoadavg(string(b))
	}
	if err != nil {
		l.Err = err.Error()
	}
	return l
}

// ParseLoadavg reads the 1-minute load average from the text of
// /proc/loadavg ("0.52 0.58 0.59 1/467 12345").
func ParseLoadavg(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return 0, fmt.Errorf("loadavg %q: want at least three fields", s)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("loadavg %q: first field is not a load", s)
	}
	return v, nil
}

// Busy says whether something else shared the machine: a 1-minute load
// above 1 before the run, or other processes taking more than half a
// core on average during it. The load after the run is not a sign: it
// counts the benchmark's own processes, which keep two cores busy.
func (s LoadSpan) Busy() bool {
	return s.Before.Load1 > 1 || (s.Others != nil && s.Others.Cores > othersBusy)
}

// othersBusy is the average number of cores other processes may take
// during a run before its figures are flagged.
const othersBusy = 0.5

func (l Load) String() string {
	if l.Err != "" {
		return fmt.Sprintf("load unknown (%s), %d cores", l.Err, l.Cores)
	}
	return fmt.Sprintf("load %.2f, %d cores", l.Load1, l.Cores)
}

// Warning is the line to print when the span was busy, else "".
func (s LoadSpan) Warning() string {
	if !s.Busy() {
		return ""
	}
	others := ""
	if s.Others != nil {
		others = fmt.Sprintf("; other processes took %.2f cores on average during the run", s.Others.Cores)
	}
	return fmt.Sprintf("WARNING: figures taken under load: 1-minute load average %.2f before the run (%.2f after, which counts the benchmark's own processes), on %d cores%s (other work shared the machine; ratios hold better than absolute figures, and a quiet machine is needed for the final figures)",
		s.Before.Load1, s.After.Load1, s.Before.Cores, others)
}

// OtherCPU is the CPU time processes other than the benchmark's own took
// during a run: the machine's busy time from /proc/stat less the
// benchmark process's and its descendants'.
type OtherCPU struct {
	// Seconds is the CPU time of the others; Cores is that over the
	// run's wall-clock time (1 = one core busy throughout).
	Seconds float64 `json:"seconds"`
	Cores   float64 `json:"cores"`
}

// CPUSample is the machine's busy CPU time and the benchmark's own (this
// process, its descendants, and the children they reaped), in clock
// ticks, at one moment.
type CPUSample struct {
	Machine, Own int64
	At           time.Time
	ok           bool
}

// clockTicks is USER_HZ, the unit of /proc/stat and /proc/PID/stat:
// 100 on every Linux architecture Go runs on.
const clockTicks = 100

// ReadCPU samples /proc; the zero sample (where there is no /proc) makes
// Others return nil.
func ReadCPU() CPUSample {
	s := CPUSample{At: time.Now()}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	if s.Machine, err = ParseProcStatBusy(string(b)); err != nil {
		return s
	}
	s.Own, s.ok = ownTicks(os.Getpid()), true
	return s
}

// Others is the CPU other processes took between s and end.
func (s CPUSample) Others(end CPUSample) *OtherCPU {
	wall := end.At.Sub(s.At).Seconds()
	if !s.ok || !end.ok || wall <= 0 {
		return nil
	}
	o := OtherCPU{Seconds: float64(max(0, (end.Machine-s.Machine)-(end.Own-s.Own))) / clockTicks}
	o.Cores = o.Seconds / wall
	return &o
}

// ParseProcStatBusy sums the busy fields of the "cpu" line of /proc/stat
// (user, nice, system, irq, softirq, steal; not idle nor iowait), in
// clock ticks. Guest time is already counted in user.
func ParseProcStatBusy(s string) (int64, error) {
	line, _, _ := strings.Cut(s, "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q is not the cpu totals", line)
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		if i >= len(f) {
			break
		}
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d %q: %w", i, f[i], err)
		}
		busy += v
	}
	return busy, nil
}

// ParsePIDStat reads a process's parent and its CPU time in clock ticks
// (its own and that of the children it reaped: utime, stime, cutime,
// cstime) from the text of /proc/PID/stat.
func ParsePIDStat(s string) (ppid int, ticks int64, err error) {
	// The command name is in parentheses and may hold spaces and ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("stat %q: no command name", s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); ppid is field 4, utime..cstime 14-17.
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("stat %q: too few fields", s)
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, fmt.Errorf("stat: ppid %q: %w", f[1], err)
	}
	for _, v := range f[11:15] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("stat: cpu time %q: %w", v, err)
		}
		ticks += n
	}
	return ppid, ticks, nil
}

// ownTicks is the CPU time of root and every live (or not yet reaped)
// descendant, each with the children it reaped: one pass over /proc.
func ownTicks(root int) int64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	type proc struct {
		ppid  int
		ticks int64
	}
	procs := map[int]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone since the listing
		}
		if ppid, ticks, err := ParsePIDStat(string(b)); err == nil {
			procs[pid] = proc{ppid, ticks}
		}
	}
	return treeTicks(root, func(yield func(pid, ppid int, ticks int64)) {
		for pid, p := range procs {
			yield(pid, p.ppid, p.ticks)
		}
	})
}

// treeTicks sums the ticks of root and its descendants among the
// processes procs lists.
func treeTicks(root int, procs func(yield func(pid, ppid int, ticks int64))) int64 {
	kids := map[int][]int{}
	ticks := map[int]int64{}
	procs(func(pid, ppid int, t int64) {
		kids[ppid] = append(kids[ppid], pid)
		ticks[pid] = t
	})
	var sum int64
	todo := []int{root}
	for len(todo) > 0 {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		sum += ticks[pid]
		todo = append(todo, kids[pid]...)
	}
	return sum
}
