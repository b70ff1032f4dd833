// Package trace_test follows one region write by its trace id through
// the client's and the servers' logs, and checks that pdc up's server
// logs rotate, against real pdc processes (docs/design/0031).
package trace_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, nil)) }
