// Package cli_test runs the pdc command line end to end: real pdc server
// processes started by pdc up (or by hand), the test binary re-run as
// client processes in a role (clientRole), and the commands' output and
// exit codes checked. It is where internal/cli's multi-process tests live.
package cli_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, clientRole)) }
