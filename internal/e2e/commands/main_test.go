// Package commands_test runs the pdc commands end to end against real
// clusters: up, status, ping, down, demo, put and get, input checks, and
// what a cluster exposes (listen and advertised addresses, the cluster
// secret, private files), checking their output and exit codes.
package commands_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, clitest.Role)) }
