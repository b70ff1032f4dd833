// Package metrics_test checks the servers' Prometheus metrics and pdc top
// end to end, against real pdc server processes.
package metrics_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, nil)) }
