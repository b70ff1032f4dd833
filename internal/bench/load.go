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

// LoadSpan is the load before and after a run.
type LoadSpan struct {
	Before Load `json:"before"`
	After  Load `json:"after"`
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

// Busy says whether either end of the span had a 1-minute load above 1:
// something else was running, and the figures carry its noise.
func (s LoadSpan) Busy() bool { return s.Before.Load1 > 1 || s.After.Load1 > 1 }

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
	return fmt.Sprintf("WARNING: figures taken under load: 1-minute load average %.2f before, %.2f after, on %d cores (above 1: other work shared the machine; ratios hold better than absolute figures, and a quiet machine is needed for the final figures)",
		s.Before.Load1, s.After.Load1, s.Before.Cores)
}
