package cluster

import (
	"fmt"
	"os"
	"strconv"

	"github.com/pdcgo/pdc"
)

// launcherVars lists the rank and size variables of the launchers pdc
// understands, in the order they are tried. PMIX_RANK has no size variable
// of its own; PMIx launchers also set one of the others or the size flag.
var launcherVars = []struct{ rank, size, name string }{
	{"PMI_RANK", "PMI_SIZE", "PMI"},
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
	{"SLURM_PROCID", "SLURM_NTASKS", "Slurm"},
	{"FLUX_TASK_RANK", "FLUX_JOB_SIZE", "Flux"},
	{"PMIX_RANK", "", "PMIx"},
}

// Launch is a server's place in a launched job.
type Launch struct {
	Rank, Size int
	// Source says where Rank came from: a launcher name or "flags".
	Source string
}

// FromEnv reads the rank and size a launcher set. ok is false when no
// launcher variable is set; an error when one is set but malformed.
// Size is 0 when the launcher sets a rank but no size.
func FromEnv(getenv func(string) string) (l Launch, ok bool, err error) {
	for _, v := range launcherVars {
		rs := getenv(v.rank)
		if rs == "" {
			continue
		}
		rank, err := strconv.Atoi(rs)
		if err != nil || rank < 0 {
			return Launch{}, false, fmt.Errorf("launcher variable %s=%q is not a rank: %w", v.rank, rs, pdc.ErrInvalid)
		}
		l := Launch{Rank: rank, Source: v.name}
		if v.size != "" {
			if ss := getenv(v.size); ss != "" {
				size, err := strconv.Atoi(ss)
				if err != nil || size < 1 {
					return Launch{}, false, fmt.Errorf("launcher variable %s=%q is not a size: %w", v.size, ss, pdc.ErrInvalid)
				}
				l.Size = size
			}
		}
		return l, true, nil
	}
	return Launch{}, false, nil
}

// HostEnv names the variable that overrides the host name servers and
// clients report. Placement by host (region-local data, staged files that
// need no transfer) compares these names, so a test or a container can
// stand for several nodes on one machine.
const HostEnv = "PDC_HOST"

// HostName is $PDC_HOST, else the kernel's host name.
func HostName() string {
	if h := os.Getenv(HostEnv); h != "" {
		return h
	}
	h, _ := os.Hostname()
	return h
}
