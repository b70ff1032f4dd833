// Package durable_test checks that what pdc acknowledged survives: servers
// killed with SIGKILL mid-workload and restarted alone, in place or by pdc
// up, and clusters restarted with more or fewer servers, while client
// processes (internal/e2e/clitest roles) keep going; every acknowledged
// object and tag is read back.
package durable_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, clitest.Role)) }
