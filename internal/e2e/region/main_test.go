// Package region_test runs region I/O end to end: every partition
// strategy and storage mode written and read back by client processes
// against a model of the data (internal/e2e/clitest), asynchronous
// transfers, shared-memory lanes, data that survives kills, value queries
// and full disks.
package region_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, clitest.Role)) }
