package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
)

// ServerCPUsEnv names the CPUs that the servers a local cluster starts
// (pdc up, and the servers and raw ceilings of pdc bench) run on, as
// taskset takes them ("1", "2-3", "0,2"): a model of a larger machine on
// a small one, with the client pinned apart (taskset -c 0 pdc bench ...).
// Unset: wherever the scheduler puts them.
const ServerCPUsEnv = "PDC_SERVER_CPUS"

// StartPinned starts cmd on the CPUs $PDC_SERVER_CPUS names, if set. A
// child starts with the CPU mask of the thread that forked it and its
// threads inherit it, so the mask is set on this goroutine's thread, locked
// to it, around the fork: no thread of the child runs elsewhere, even for
// a moment.
func StartPinned(cmd *exec.Cmd) error {
	list := os.Getenv(ServerCPUsEnv)
	if list == "" {
		return cmd.Start()
	}
	set, err := parseCPUs(list)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("$%s: %w", ServerCPUsEnv, err)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("$%s=%s: %w", ServerCPUsEnv, list, err)
	}
	err = cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &old); rerr != nil && err == nil {
		err = fmt.Errorf("$%s: restore this thread's CPUs: %w", ServerCPUsEnv, rerr)
	}
	return err
}

// parseCPUs reads a CPU list as taskset -c takes it.
func parseCPUs(list string) (unix.CPUSet, error) {
	var set unix.CPUSet
	bad := func() (unix.CPUSet, error) {
		return unix.CPUSet{}, fmt.Errorf("$%s=%q: want CPUs such as 1, 2-3 or 0,2: %w", ServerCPUsEnv, list, pdc.ErrInvalid)
	}
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return bad()
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return bad()
			}
		}
		for cpu := a; cpu <= b; cpu++ {
			if cpu >= 1024 {
				return bad()
			}
			set.Set(cpu)
		}
	}
	if set.Count() == 0 {
		return bad()
	}
	return set, nil
}
