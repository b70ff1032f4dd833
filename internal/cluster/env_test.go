package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
)

func TestFromEnv(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want Launch
		ok   bool
		err  string // substring of an error wrapping pdc.ErrInvalid
	}{
		{name: "none", env: nil},
		{name: "unrelated", env: map[string]string{"HOME": "/root", "RANK": "3", "WORLD_SIZE": "4"}},
		{name: "size without rank", env: map[string]string{"PMI_SIZE": "4", "SLURM_NTASKS": "8"}},
		{name: "empty rank is unset", env: map[string]string{"PMI_RANK": "", "PMI_SIZE": "4"}},

		{name: "PMI", env: map[string]string{"PMI_RANK": "2", "PMI_SIZE": "4"}, want: Launch{2, 4, "PMI"}, ok: true},
		{name: "Open MPI", env: map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"}, want: Launch{0, 1, "Open MPI"}, ok: true},
		{name: "Slurm", env: map[string]string{"SLURM_PROCID": "15", "SLURM_NTASKS": "16"}, want: Launch{15, 16, "Slurm"}, ok: true},
		{name: "Flux", env: map[string]string{"FLUX_TASK_RANK": "7", "FLUX_JOB_SIZE": "64"}, want: Launch{7, 64, "Flux"}, ok: true},
		{name: "PMIx alone", env: map[string]string{"PMIX_RANK": "3"}, want: Launch{3, 0, "PMIx"}, ok: true},
		{name: "rank without size", env: map[string]string{"SLURM_PROCID": "1"}, want: Launch{1, 0, "Slurm"}, ok: true},
		{name: "other launcher's size is not used", env: map[string]string{"SLURM_PROCID": "1", "PMI_SIZE": "9"}, want: Launch{1, 0, "Slurm"}, ok: true},

		{name: "PMI before Open MPI", env: map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "6"},
			want: Launch{1, 2, "PMI"}, ok: true},
		{name: "Open MPI before Slurm", env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"},
			want: Launch{3, 4, "Open MPI"}, ok: true},
		{name: "Slurm before Flux", env: map[string]string{"FLUX_TASK_RANK": "9", "FLUX_JOB_SIZE": "10", "SLURM_PROCID": "2", "SLURM_NTASKS": "3"},
			want: Launch{2, 3, "Slurm"}, ok: true},
		{name: "Flux before PMIx", env: map[string]string{"PMIX_RANK": "4", "FLUX_TASK_RANK": "1", "FLUX_JOB_SIZE": "2"},
			want: Launch{1, 2, "Flux"}, ok: true},
		{name: "all set", env: map[string]string{"PMIX_RANK": "4", "FLUX_TASK_RANK": "3", "SLURM_PROCID": "2", "OMPI_COMM_WORLD_RANK": "1", "PMI_RANK": "0", "PMI_SIZE": "5"},
			want: Launch{0, 5, "PMI"}, ok: true},

		{name: "non-numeric rank", env: map[string]string{"PMI_RANK": "zero"}, err: `PMI_RANK="zero" is not a rank`},
		{name: "negative rank", env: map[string]string{"SLURM_PROCID": "-1"}, err: `SLURM_PROCID="-1" is not a rank`},
		{name: "rank with space", env: map[string]string{"FLUX_TASK_RANK": " 1"}, err: "is not a rank"},
		{name: "rank overflow", env: map[string]string{"PMIX_RANK": "99999999999999999999"}, err: "is not a rank"},
		{name: "zero size", env: map[string]string{"PMI_RANK": "0", "PMI_SIZE": "0"}, err: `PMI_SIZE="0" is not a size`},
		{name: "negative size", env: map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "-4"}, err: "is not a size"},
		{name: "non-numeric size", env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4(x2)"}, err: `SLURM_NTASKS="4(x2)" is not a size`},
		{name: "malformed first launcher wins over a valid later one", env: map[string]string{"PMI_RANK": "x", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"},
			err: "PMI_RANK"},
	}
	for _, c := range cases {
		var asked []string
		getenv := func(k string) string {
			asked = append(asked, k)
			return c.env[k]
		}
		got, ok, err := FromEnv(getenv)
		if c.err != "" {
			if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("%s: got %+v, %v, %v; want pdc.ErrInvalid saying %q", c.name, got, ok, err, c.err)
			}
			if ok || got != (Launch{}) {
				t.Fatalf("%s: error with ok=%v and %+v", c.name, ok, got)
			}
			continue
		}
		if err != nil || ok != c.ok || got != c.want {
			t.Fatalf("%s: got %+v, %v, %v; want %+v, %v", c.name, got, ok, err, c.want, c.ok)
		}
		if len(asked) == 0 {
			t.Fatalf("%s: getenv was never called", c.name)
		}
	}
}
