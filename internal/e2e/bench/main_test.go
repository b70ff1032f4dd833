// Package bench_test runs pdc bench end to end: the benchmarks pdc bench
// all chooses, the multi-host one and VPIC-IO, against the clusters they
// start, checking what each reports. It is a package of its own, so that its
// test binary runs beside the other end-to-end packages of the command
// line (internal/e2e/clitest).
package bench_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, clitest.Role)) }
