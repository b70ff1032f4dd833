// Package bench_test runs pdc bench end to end: the benchmarks pdc bench
// all chooses, the multi-host one and VPIC-IO, against the clusters they
// start, checking what each reports.
package bench_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// Its tests run no client processes: no roles.
func TestMain(m *testing.M) { os.Exit(e2e.Main(m, nil)) }
