package cluster

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
)

func TestParseCPUs(t *testing.T) {
	for _, tc := range []struct {
		list string
		want []int
	}{
		{"1", []int{1}},
		{"0,2", []int{0, 2}},
		{"2-4", []int{2, 3, 4}},
		{" 0 , 3-4", []int{0, 3, 4}},
	} {
		set, err := parseCPUs(tc.list)
		if err != nil {
			t.Errorf("%q: %v", tc.list, err)
			continue
		}
		if set.Count() != len(tc.want) {
			t.Errorf("%q: %d CPUs, want %v", tc.list, set.Count(), tc.want)
		}
		for _, c := range tc.want {
			if !set.IsSet(c) {
				t.Errorf("%q: CPU %d not set", tc.list, c)
			}
		}
	}
	for _, bad := range []string{"", "x", "-1", "3-1", "1,", "4096"} {
		if _, err := parseCPUs(bad); !errors.Is(err, pdc.ErrInvalid) {
			t.Errorf("%q: err %v, want ErrInvalid", bad, err)
		}
	}
}

// TestStartPinned starts a process with $PDC_SERVER_CPUS set and reads
// the CPUs it may run on from the kernel.
func TestStartPinned(t *testing.T) {
	var last int
	mask := func(pid int) string {
		t.Helper()
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatal("no Cpus_allowed_list in /proc status")
		return ""
	}
	self := mask(os.Getpid())
	// The highest CPU this process may use: pinning to it alone differs
	// from the inherited mask on any machine of two CPUs or more.
	for _, part := range strings.Split(self, ",") {
		_, hi, _ := strings.Cut(part, "-")
		if hi == "" {
			hi = part
		}
		last, _ = strconv.Atoi(hi)
	}
	t.Setenv(ServerCPUsEnv, strconv.Itoa(last))
	cmd := exec.Command("sleep", "60")
	if err := StartPinned(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if got := mask(cmd.Process.Pid); got != strconv.Itoa(last) {
		t.Errorf("child runs on CPUs %s, want %d", got, last)
	}
	t.Setenv(ServerCPUsEnv, "")
	plain := exec.Command("sleep", "60")
	if err := StartPinned(plain); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = plain.Process.Kill()
		_ = plain.Wait()
	}()
	if got := mask(plain.Process.Pid); got != self {
		t.Errorf("unpinned child runs on CPUs %s, want this process's %s", got, self)
	}
}
