// Package commands_test runs the pdc commands end to end against real
// clusters: up, status, ping, down, demo, bench dtl, put and get, and
// input checks, checking their output and exit codes.
package commands_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// Its tests run no client processes: no roles.
func TestMain(m *testing.M) { os.Exit(e2e.Main(m, nil)) }
